"""`NFSP`: Neural Fictitious Self-Play (Heinrich & Silver 2016), stepped from a notebook.

Each player keeps two networks (Heinrich & Silver 2016, "Deep Reinforcement Learning from
Self-Play in Imperfect-Information Games", arXiv:1603.01121, Algorithm 1):

- a best response ``Q(s, a)`` learned by DQN on a circular replay buffer ``M_RL`` of its
  own transitions (epsilon-greedy, a target network refitted every few updates);
- an average policy ``Pi(s, a)`` fit by supervised learning (cross-entropy) to a
  reservoir buffer ``M_SL`` of the actions it took while following its best response.

At the start of every episode each player follows ``epsilon-greedy(Q)`` with probability
eta (the anticipatory parameter) and ``Pi`` otherwise; only best-response actions enter
``M_SL``. The average policies approach a Nash equilibrium; `step()` plays
``episodes_per_step`` episodes and measures their exploitability exactly (OpenSpiel and
other games whose tree fits in memory).

Example:
    >>> nfsp = NFSP("kuhn_poker", seed=0, episodes_per_step=50)
    >>> records = nfsp.run(2, progress=False)       # exploitability of the average policies
    >>> list(nfsp.history.columns[:6])
    ['env_steps', 'episodes', 'wall_time', 'exploitability', 'nash_conv', 'loss/rl']
    >>> nfsp.evaluate(100, seed=0).mean  # doctest: +SKIP
    >>> nfsp.history.plot(x="episodes", y="exploitability")  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any, ClassVar, cast

import numpy as np
import torch
import torch.nn.functional as F

from pbmarl.algorithms.nfsp_config import NFSPConfig, NFSPRecord, check_memory, record_from_json, record_json
from pbmarl.config import build_config, check_seed
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.learners.common.buffers import ReplayBuffer, Transitions
from pbmarl.learners.common.nets import build_mlp, obs_dim, seeded, to_tensor
from pbmarl.learners.common.reservoir import ReservoirBuffer
from pbmarl.policies.neural import MLPPolicy, masked_logits
from pbmarl.rl.value_learning import masked_max_q
from pbmarl.rollout.results import EvalResult
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.runs import Run, SavedRun, State
from pbmarl.runs.folder import refused_as
from pbmarl.runs.transaction import all_or_nothing

#: the most answers kept per network between its updates (`NFSP._answer`)
_MAX_ANSWERS = 4096


def _modules(run: NFSP) -> dict[str, Any]:
    """Every network and optimiser of the run by a stable name (what `save` and `snapshot` keep)."""
    out: dict[str, Any] = {}
    for p in range(run.game.num_players):
        out.update({f"q{p}": run.q_nets[p], f"target{p}": run.target_nets[p], f"avg{p}": run.avg_nets[p],
                    f"rl_opt{p}": run.rl_opts[p], f"sl_opt{p}": run.sl_opts[p]})
    return out


class NFSP(Run):
    """Neural Fictitious Self-Play for turn-based games of two or more players; see the module doc.

    Args:
        game: a `Game` or its name.
        seed: seeds the networks, exploration, modes, chance and minibatches.
        config: an `NFSPConfig`; keyword `options` override its fields.
    """

    history_columns: ClassVar[tuple[str, ...]] = ("exploitability", "nash_conv", "loss/rl", "loss/sl", "epsilon")

    def __init__(self, game: Game | str, *, seed: int = 0, config: NFSPConfig | None = None, **options: Any) -> None:
        from pbmarl.algorithms.psro.parts import exact_capable

        self.config: NFSPConfig = build_config(NFSPConfig, config, options, owner="NFSP")
        self.seed = check_seed(seed)
        self.game = load_game(game) if isinstance(game, str) else game
        if not isinstance(self.game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        if self.game.num_players < 2:
            raise ValueError(f"NFSP learns by self-play in games of two or more players; {self.game.name!r} has "
                             f"{self.game.num_players}: train a single-agent learner on it (pb.DQN, pb.PPO)")
        if not self.game.turn_based:
            raise ValueError(f"NFSP here plays turn-based games; {self.game.name!r} is simultaneous-move")
        check_memory(self.game, self.config)
        self.rng = np.random.default_rng(self.seed)
        self.measure = exact_capable(self.game) if self.config.measure is None else bool(self.config.measure)
        cfg, P, A, d = self.config, self.game.num_players, self.game.num_actions, obs_dim(self.game)
        base = self.seed * 1000  # torch seeds are 64-bit: a seed past 2**63 / 1000 wraps (the same nets below it)
        self.q_nets = [seeded((base + 2 * p) % 2**63, lambda: build_mlp(d, cfg.hidden, A)) for p in range(P)]
        self.avg_nets = [seeded((base + 2 * p + 1) % 2**63, lambda: build_mlp(d, cfg.hidden, A)) for p in range(P)]
        for net in self.q_nets + self.avg_nets:  # built on the CPU from the seed (the same weights anywhere), then moved
            net.to(cfg.device)
        self.target_nets = [copy.deepcopy(q) for q in self.q_nets]
        optimizer = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.SGD
        self.rl_opts = [optimizer(q.parameters(), lr=cfg.rl_lr) for q in self.q_nets]
        self.sl_opts = [optimizer(a.parameters(), lr=cfg.sl_lr) for a in self.avg_nets]
        self.replay = [ReplayBuffer(cfg.replay_capacity, self.game.observation_shape, A) for _ in range(P)]
        self.reservoir = [ReservoirBuffer(cfg.reservoir_capacity, self.game.observation_shape, A) for _ in range(P)]
        self.decisions = [0] * P
        self.rl_updates = [0] * P
        self.episodes = 0
        self.records: list[NFSPRecord] = []
        self._wall = 0.0
        self._losses: dict[str, list[float]] = {"rl": [], "sl": []}
        #: per network (by id): its parameters, their versions and its answers by observation and mask
        self._answers: dict[int, tuple[list[torch.Tensor], tuple[int, ...], dict[bytes, np.ndarray]]] = {}

    # -- acting ------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        cfg = self.config
        return cfg.epsilon_start / math.sqrt(1.0 + self.episodes / cfg.epsilon_decay_episodes)

    def _act(self, player: int, obs: np.ndarray, mask: np.ndarray, best_response: bool) -> int:
        if best_response and self.rng.random() < self.epsilon:  # the draws of the plain version, in its order
            legal = np.flatnonzero(mask)
            return int(legal[self.rng.integers(len(legal))])
        if best_response:
            q = self._answer(self.q_nets[player], obs, mask, greedy=True)
            legal = np.flatnonzero(mask)
            return int(legal[np.argmax(q[legal])])
        probs = self._answer(self.avg_nets[player], obs, mask, greedy=False)
        return int(self.rng.choice(len(probs), p=probs / probs.sum()))

    def _answer(self, net: torch.nn.Module, obs: np.ndarray, mask: np.ndarray, *, greedy: bool) -> np.ndarray:
        """`net`'s Q-values (`greedy`) or masked softmax for one decision, as numpy.

        A network's answer to the same observation and mask is the same until its weights change (an update
        every ``learn_every`` decisions), and the same decisions recur often in between (the first moves of
        a game), so answers are kept per network until any of its parameters is written in place (an
        optimiser step, `load_state_dict`: each bumps the tensor's version; the parameters are listed once per
        network, as its optimiser lists them)."""
        kept = self._answers.get(id(net))
        params: list[torch.Tensor] = list(net.parameters()) if kept is None else kept[0]
        stamp = tuple([t._version for t in params])
        if kept is None or kept[1] != stamp or len(kept[2]) >= _MAX_ANSWERS:
            kept = (params, stamp, {})
            self._answers[id(net)] = kept
        answers = kept[2]
        key = obs.tobytes() + mask.tobytes()
        out = answers.get(key)
        if out is None:
            device = self.config.device  # acting runs on the networks' device, one decision at a time
            with torch.inference_mode():
                x = torch.as_tensor(obs, dtype=torch.float32, device=device).reshape(1, -1)
                if greedy:
                    out = _forward(net, x)[0].cpu().numpy()
                else:
                    logits = masked_logits(_forward(net, x), torch.as_tensor(mask, device=device)[None])
                    out = torch.softmax(logits, dim=-1)[0].double().cpu().numpy()
            answers[key] = out
        return out

    def play_episode(self) -> int:
        """One self-play episode with learning; returns the decisions it took."""
        game, P = self.game, self.game.num_players
        modes = [bool(self.rng.random() < self.config.anticipatory) for _ in range(P)]
        rows: list[list[tuple[Any, ...]]] = [[] for _ in range(P)]
        pending: list[tuple[np.ndarray, np.ndarray, int] | None] = [None] * P
        gained = np.zeros(P)
        state = game.new_initial_state()
        steps = 0
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes())
                state.apply_action(int(outcomes[self.rng.choice(len(probs), p=np.asarray(probs) / sum(probs))]))
                continue
            p = state.current_player()
            obs, mask = game.observation(state, p), game.legal_mask(state, p)
            if pending[p] is not None:
                o, m, a = pending[p]  # type: ignore[misc]
                rows[p].append((o, m, a, gained[p], False, obs, mask))
                gained[p] = 0.0
            action = self._act(p, obs, mask, modes[p])
            if modes[p]:
                self.reservoir[p].add(obs, mask, action, self.rng)
            pending[p] = (obs, mask, action)
            state.apply_action(action)
            gained += np.asarray(state.rewards(), dtype=float)
            steps += 1
            self.decisions[p] += 1
            if self.decisions[p] % self.config.learn_every == 0:
                self._learn(p)
        for p in range(P):
            if pending[p] is not None:
                o, m, a = pending[p]  # type: ignore[misc]
                rows[p].append((o, m, a, gained[p], True, np.zeros_like(o), np.zeros_like(m)))
            if rows[p]:
                cols = list(zip(*rows[p]))
                batch = Transitions(np.stack(cols[0]), np.stack(cols[1]), np.asarray(cols[2], np.int64),
                                     np.asarray(cols[3], float), np.asarray(cols[4], bool), np.stack(cols[5]),
                                     np.stack(cols[6]))
                self.replay[p].add(cast(Trajectories, batch))
        self.episodes += 1
        return steps

    # -- learning -----------------------------------------------------------------------
    def _learn(self, p: int) -> None:
        cfg = self.config
        for _ in range(cfg.updates_per_learn):
            if len(self.replay[p]) >= cfg.min_buffer:
                self._losses["rl"].append(self._rl_update(p))
            if len(self.reservoir[p]) >= cfg.min_buffer:
                self._losses["sl"].append(self._sl_update(p))

    def _rl_update(self, p: int) -> float:
        cfg = self.config
        b = self.replay[p].sample(cfg.batch_size, self.rng)
        n, device = len(b.action), cfg.device  # the minibatch goes to the device once
        q = self.q_nets[p](to_tensor(b.obs, device=device).reshape(n, -1)).gather(
            1, to_tensor(b.action, dtype=None, device=device)[:, None]).squeeze(1)
        with torch.no_grad():
            q_next = self.target_nets[p](to_tensor(b.next_obs, device=device).reshape(n, -1))
            bootstrap = masked_max_q(q_next, q_next, to_tensor(b.next_legal_mask, dtype=None, device=device))
            target = to_tensor(b.reward, device=device) + cfg.gamma * (1.0 - to_tensor(b.done, device=device)) * bootstrap
        loss = F.mse_loss(q, target)
        self.rl_opts[p].zero_grad()
        loss.backward()
        self.rl_opts[p].step()
        self.rl_updates[p] += 1
        if self.rl_updates[p] % cfg.target_update_every == 0:
            self.target_nets[p].load_state_dict(self.q_nets[p].state_dict())
        return float(loss.detach())

    def _sl_update(self, p: int) -> float:
        obs, mask, action = self.reservoir[p].sample(self.config.batch_size, self.rng)
        device = self.config.device
        logits = masked_logits(self.avg_nets[p](to_tensor(obs, device=device).reshape(len(action), -1)),
                               torch.as_tensor(mask, device=device))
        loss = F.cross_entropy(logits, torch.as_tensor(action, device=device))
        self.sl_opts[p].zero_grad()
        loss.backward()
        self.sl_opts[p].step()
        return float(loss.detach())

    # -- the loop -------------------------------------------------------------------------
    def average_policies(self) -> list[MLPPolicy]:
        """Per player, a copy of its average policy ``Pi`` as an `MLPPolicy`."""
        out = []
        for net in self.avg_nets:
            policy = MLPPolicy(self.game, hidden=self.config.hidden, seed=None)
            policy.net.load_state_dict(copy.deepcopy(net.state_dict()))
            out.append(policy)
        return out

    def snapshot(self) -> object:
        """Everything a `step` changes (networks, optimisers, buffers, counters, random state), for `restore`."""
        from pbmarl.torchutil import torch_threads

        with torch_threads(1):  # copying a few MB over threads the shared cores are busy with took 5-20x longer
            nets = {k: copy.deepcopy(m.state_dict()) for k, m in _modules(self).items()}
        buffers = [(r.mark(), s.mark()) for r, s in zip(self.replay, self.reservoir)]  # journals of what is overwritten
        return (nets, buffers, list(self.decisions), list(self.rl_updates), self.episodes, len(self.records),
                self.rng.bit_generator.state, self._wall)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it (the latest snapshot: the buffers keep what a step overwrites
        for their latest mark only)."""
        from pbmarl.torchutil import torch_threads

        nets, buffers, decisions, updates, episodes, n, rng, wall = cast("tuple[Any, ...]", state)
        for (replay, _), buf in zip(buffers, self.replay):
            if buf._journal is None or buf._journal() is not replay:
                raise ValueError("restore takes the run's latest snapshot(): a later one stopped the buffers' record of "
                                 "what the steps since overwrote")
        with torch_threads(1):
            for k, m in _modules(self).items():
                m.load_state_dict(nets[k])
        for (replay, reservoir), buf, res in zip(buffers, self.replay, self.reservoir):
            buf.rollback(replay)
            res.rollback(reservoir)
        self.decisions, self.rl_updates, self.episodes = list(decisions), list(updates), episodes
        del self.records[n:]
        self.rng.bit_generator.state = rng
        self._wall = wall

    @all_or_nothing
    def step(self) -> NFSPRecord:
        """Play ``episodes_per_step`` episodes, then measure; returns the record.

        All or nothing: if anything raises (a ``KeyboardInterrupt`` included), the run is left as before.
        """
        from pbmarl.torchutil import flush_denormals, torch_threads

        t0 = time.perf_counter()
        self._losses = {"rl": [], "sl": []}
        with torch_threads(1), flush_denormals():
            for _ in range(self.config.episodes_per_step):
                self.play_episode()
        seconds = {"play": time.perf_counter() - t0}
        t0 = time.perf_counter()
        expl = nash_conv = None
        if self.measure:
            from pbmarl.evaluation.exact import exploitability

            result = exploitability(self.game, self.average_policies())
            expl, nash_conv = float(result.exploitability), float(result.nash_conv)
        seconds["measure"] = time.perf_counter() - t0
        self._wall += sum(seconds.values())
        rl, sl = self._losses["rl"], self._losses["sl"]
        record = NFSPRecord(iteration=len(self.records) + 1, env_steps=sum(self.decisions), episodes=self.episodes,
                            wall_time=self._wall, exploitability=expl, nash_conv=nash_conv,
                            losses={"rl": float(np.mean(rl)) if rl else math.nan,
                                    "sl": float(np.mean(sl)) if sl else math.nan},
                            times=seconds, epsilon=self.epsilon)
        self.records.append(record)
        return record

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """`episodes` episodes of the average policies against each other -> a `pb.EvalResult` by player.

        The run is unchanged (a pool of its own plays them, seeded by `seed`).
        """
        from pbmarl.algorithms.league.records import play_profile

        return cast(EvalResult, play_profile(self.game, self.average_policies(), episodes, seed=seed,
                                             deterministic=deterministic))

    def __repr__(self) -> str:
        return f"NFSP({self.game.name!r}, seed={self.seed}, episodes={self.episodes})"

    # -- files ------------------------------------------------------------------------------
    def state(self) -> State:
        """Networks and optimisers (torch state dicts), both buffers (arrays), counters, random state, records."""
        arrays: dict[str, np.ndarray] = {}
        for p in range(self.game.num_players):
            arrays.update({f"replay{p}.{k}": v for k, v in self.replay[p].state_arrays().items()})
            arrays.update({f"reservoir{p}.{k}": v for k, v in self.reservoir[p].state_arrays().items()})
        data = {"episodes": self.episodes, "decisions": list(self.decisions), "rl_updates": list(self.rl_updates),
                "rng": dict(self.rng.bit_generator.state), "wall_time": self._wall,
                "records": [record_json(r) for r in self.records]}
        return State(data=data, arrays=arrays, modules={k: m.state_dict() for k, m in _modules(self).items()},
                     config=self.config.to_dict(), seed=self.seed, game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> NFSP:
        """Rebuild a run `state` wrote; it continues exactly as the uninterrupted run would.

        `overrides` change options (e.g. ``episodes_per_step``); the buffers' capacities must still hold what was saved.
        """
        options = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.config.items()}
        config = build_config(NFSPConfig, None, {**options, **overrides}, owner="NFSP")
        run = cls(saved.game(), seed=check_seed(saved.seed), config=config)
        data = saved.data
        with refused_as((KeyError, TypeError, ValueError, RuntimeError, IndexError), lambda exc: (
                f"{str(saved.state_dir)!r}: cannot restore the NFSP run "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")):
            P, A, shape = run.game.num_players, run.game.num_actions, tuple(run.game.observation_shape)
            for name, module in _modules(run).items():
                module.load_state_dict(saved.module(name))
            for p in range(P):
                size = saved.arrays({f"replay{p}.position": ((2,), "iu"), f"reservoir{p}.seen": ((1,), "iu")})
                n = int(size[f"replay{p}.position"][1])
                m = min(int(size[f"reservoir{p}.seen"][0]), run.reservoir[p].capacity)
                replay = {f"replay{p}.obs": ((n, *shape), "f"), f"replay{p}.next_obs": ((n, *shape), "f"),
                          f"replay{p}.legal_mask": ((n, A), "b"), f"replay{p}.next_legal_mask": ((n, A), "b"),
                          f"replay{p}.action": ((n,), "iu"), f"replay{p}.reward": ((n,), "f"),
                          f"replay{p}.done": ((n,), "b"), f"replay{p}.position": ((2,), "iu")}
                reservoir = {f"reservoir{p}.obs": ((m, *shape), "f"), f"reservoir{p}.legal_mask": ((m, A), "b"),
                             f"reservoir{p}.action": ((m,), "iu"), f"reservoir{p}.seen": ((1,), "iu")}
                got = saved.arrays({**replay, **reservoir})
                run.replay[p].load_state_arrays({k.split(".", 1)[1]: got[k] for k in replay})
                run.reservoir[p].load_state_arrays({k.split(".", 1)[1]: got[k] for k in reservoir})
            run.episodes = int(data["episodes"])
            run.decisions = [int(x) for x in data["decisions"]]
            run.rl_updates = [int(x) for x in data["rl_updates"]]
            if len(run.decisions) != P or len(run.rl_updates) != P:
                raise ValueError(f"'decisions' and 'rl_updates' must hold one count per player ({P})")
            run.rng.bit_generator.state = data["rng"]
            run._wall = float(data["wall_time"])
            run.records = [record_from_json(r) for r in data["records"]]
        return run


def _forward(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` for one decision: each layer's own ``forward`` in turn (the same kernels, so the same numbers),
    without the module-call machinery around every layer, which costs more than a small layer's product."""
    if net._forward_hooks or net._forward_pre_hooks or not isinstance(net, torch.nn.Sequential):
        return cast(torch.Tensor, net(x))
    for layer in net:
        x = layer(x) if layer._forward_hooks or layer._forward_pre_hooks else layer.forward(x)
    return x
