"""Self-play actor-critic: one policy trained against its current self, measured in the last iterate.

The shared body of `PPOSelfPlay` and `DeepMMD`. One `step()` is one round:

1. for every seat, collect ``steps_per_round / num_players`` transitions of that seat with the current
   policy in **every** seat (its current self, not a past snapshot: no population grows);
2. value them with the critic and compute GAE advantages (`pbmarl.rl.multistep.gae`);
3. ``epochs`` passes of ``minibatches`` Adam steps on ``policy loss + vf_coef * value loss``, where the
   policy loss is the subclass's (PPO's clipped surrogate and entropy bonus; MMD's magnetic loss);
4. every ``eval_every`` rounds, the last iterate's exploitability: exactly where the exact engine holds the
   game (`pbmarl.evaluation.exact.exploitability`), else, with ``br_budget > 0``, from trained best
   responses (a `pb.PPO` oracle per seat against the current policy, values from evaluation episodes).

``shared=True`` (default) trains one actor and one critic on every seat's data; the seat must then be
readable from the observation (OpenSpiel's information-state tensors carry it, e.g. Kuhn's and Leduc's
first entries). ``shared=False`` trains one actor-critic per seat, each against the other seats' current
actors.

The maths is composed, not copied: the losses come from `pbmarl.rl` (`clipped_surrogate_loss`,
`magnetic_policy_loss`), the networks and masking from `pbmarl.learners.common.nets` and
`pbmarl.policies.neural`, collection from `pbmarl.rollout.RolloutPool`.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np
import torch

from pbmarl.config import FLAG, NON_NEGATIVE, POSITIVE, POSITIVE_INT, UNIT, Rule, build_config, check_seed, did_you_mean
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.learners.common.config import DeviceOption
from pbmarl.learners.common.nets import TensorBatch, adam, build_mlp, obs_dim, seeded, to_tensor
from pbmarl.policies.neural import MLPPolicy, masked_logits
from pbmarl.rl.multistep import gae
from pbmarl.rollout.results import EvalResult
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.runs import Record, Run, RunFolderError, SavedRun, State, shared_row
from pbmarl.runs.transaction import all_or_nothing
from pbmarl.torchutil import clip_grad_norm, torch_threads

__all__ = ["SelfPlayBatch", "SelfPlayConfig", "SelfPlayRecord", "SelfPlayRun"]


@dataclass(frozen=True)
class SelfPlayConfig(DeviceOption):
    """Options every self-play actor-critic shares."""

    shared: bool = True
    """One actor-critic for every seat (the seat read from the observation); False: one per seat."""
    hidden: tuple[int, ...] = (128, 128)
    """Widths of the hidden layers of the actor and the critic."""
    lr: float = 2.5e-4
    """Adam learning rate (actor and critic together)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over `budget` env steps (the IIG benchmark's annealing)."""
    num_envs: int = 8
    """Game copies stepped together while collecting."""
    steps_per_round: int = 2048
    """Transitions collected per round, all seats together (8 envs x 256 steps)."""
    epochs: int = 4
    """Passes over each round's data."""
    minibatches: int = 4
    """Minibatches per pass."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip per Adam step."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    budget: int = 1_000_000
    """Env steps (all seats) that `run()` trains for and the learning rate anneals over."""
    eval_every: int = 1
    """Rounds between exploitability measurements (0: never)."""
    br_budget: int = 0
    """Games the exact engine cannot hold: learner steps of each trained best response (0: no measurement)."""

    checks: ClassVar[dict[str, Rule]] = {
        "shared": FLAG, "lr": POSITIVE, "anneal_lr": FLAG, "num_envs": POSITIVE_INT, "steps_per_round": POSITIVE_INT,
        "epochs": POSITIVE_INT, "minibatches": POSITIVE_INT, "gamma": UNIT, "gae_lambda": UNIT, "vf_coef": NON_NEGATIVE,
        "max_grad_norm": POSITIVE, "norm_adv": FLAG, "budget": POSITIVE_INT,
        "eval_every": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a non-negative int"),
        "br_budget": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a non-negative int"),
    }


@dataclass(frozen=True)
class SelfPlayRecord(Record):
    """One self-play round.

    Attributes:
        iteration, env_steps, episodes, wall_time: the shared columns (env steps: all seats, cumulative).
        exploitability, nash_conv: of the last iterate (exact, or from trained best responses; None when not
            measured this round).
        returns: mean return per seat in this round's episodes.
        losses: mean loss terms over the round's updates (policy, value, entropy, ...).
        times: seconds per phase (collect, update, measure).
        extra: the run's own columns (lr, and DeepMMD's alpha and stepsize).
    """

    iteration: int
    env_steps: int
    episodes: int
    wall_time: float
    exploitability: float | None = None
    nash_conv: float | None = None
    returns: dict[str, float] = field(default_factory=dict)
    losses: dict[str, float] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, exploitability=self.exploitability, nash_conv=self.nash_conv,
                          measured=True, returns=dict(sorted(self.returns.items())),
                          losses=dict(sorted(self.losses.items())), times=dict(sorted(self.times.items())),
                          extra=dict(sorted(self.extra.items())))  # sorted: a folder's JSON keeps no order

    def __str__(self) -> str:
        expl = "-" if self.exploitability is None else f"{self.exploitability:.4g}"
        return f"iter {self.iteration:>4} | {self.env_steps:,} env steps | exploitability {expl}"


@dataclass(frozen=True)
class SelfPlayBatch(TensorBatch):
    """One actor's data for a round: tensors, with GAE advantages and every action's behaviour log-probability."""

    obs: torch.Tensor
    legal_mask: torch.Tensor
    action: torch.Tensor
    old_logp: torch.Tensor
    old_logp_all: torch.Tensor
    advantage: torch.Tensor
    returns: torch.Tensor


class SelfPlayRun(Run):
    """Self-play actor-critic; see the module doc. Subclasses define `config_class` and `policy_loss`."""

    config_class: ClassVar[type[SelfPlayConfig]] = SelfPlayConfig
    #: named option sets (``preset=``) the options start from, e.g. a paper's tuned setting
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    history_columns: ClassVar[tuple[str, ...]] = ("exploitability", "nash_conv")
    config: SelfPlayConfig
    records: list[SelfPlayRecord]

    def __init__(self, game: Game | str, *, seed: int = 0, config: SelfPlayConfig | None = None,
                 preset: str | None = None, **options: Any) -> None:
        name = type(self).__name__
        if preset is not None:  # options over the named preset's values
            if preset not in self.presets:
                raise ValueError(f"unknown preset {preset!r} for {name}{did_you_mean(preset, self.presets) or '.'} "
                                 f"Known presets: {', '.join(self.presets) or 'none'}")
            options = {**self.presets[preset], **options}
        self._configure(game, build_config(self.config_class, config, options, owner=name), check_seed(seed))

    # -- building ----------------------------------------------------------------------
    def _configure(self, game: Game | str, config: SelfPlayConfig, seed: int) -> None:
        self.game = load_game(game) if isinstance(game, str) else game
        if not isinstance(self.game, Game):
            raise TypeError(f"{type(self).__name__} needs a pbmarl Game or a game name, got "
                            f"{type(game).__name__}: {game!r}")
        if self.game.num_actions < 1:
            raise ValueError(f"{type(self).__name__} needs discrete actions; {self.game.name!r} has none")
        self.config, self.seed = config, seed
        self.rng = np.random.default_rng(seed)
        P = self.game.num_players
        n = 1 if config.shared else P
        self.actors = [MLPPolicy(self.game, hidden=config.hidden, seed=int(self.rng.integers(2**31))) for _ in range(n)]
        self.critics = [seeded(int(self.rng.integers(2**31)), lambda: build_mlp(obs_dim(self.game), config.hidden, 1))
                        for _ in range(n)]
        for actor, critic in zip(self.actors, self.critics):  # built on the CPU from the seed, then moved
            actor.net.to(config.device)
            critic.to(config.device)
        self.optimizers = [adam(list(a.net.parameters()) + list(c.parameters()), lr=config.lr, eps=1e-5)
                           for a, c in zip(self.actors, self.critics)]
        self.records = []
        self._counts = {"env_steps": 0, "episodes": 0, "wall": 0.0}
        self._pool: Any = None
        self._exact: bool | None = None
        self._init_extra()

    def _init_extra(self) -> None:
        """Subclasses build what they add (a magnet network)."""

    @property
    def pool(self) -> Any:
        if self._pool is None:
            from pbmarl.rollout import RolloutPool

            self._pool = RolloutPool(self.game, num_workers=1, envs_per_worker=self.config.num_envs, backend="local",
                                     seed=self.seed)
        return self._pool

    def actor_of(self, seat: int) -> MLPPolicy:
        """The actor that plays `seat`."""
        return self.actors[0 if self.config.shared else seat]

    @property
    def policies(self) -> list[MLPPolicy]:
        """The last iterate: the policy of every seat."""
        return [self.actor_of(p) for p in range(self.game.num_players)]

    # -- the subclass's loss --------------------------------------------------------------
    def policy_loss(self, index: int, mb: SelfPlayBatch, adv: torch.Tensor, logp: torch.Tensor,
                    logp_all: torch.Tensor, entropy: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The policy part of the loss of actor `index` on minibatch `mb`, and the terms to record."""
        raise NotImplementedError

    def _round_extra(self) -> dict[str, Any]:
        """Columns the subclass records (its schedules' values this round)."""
        return {}

    def _after_round(self) -> None:
        """What the subclass does once a round's updates are done (move a magnet)."""

    # -- the loop -----------------------------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.runs.transaction`)."""
        return copy.deepcopy((self._modules_state(), self.rng.bit_generator.state, dict(self._counts),
                              len(self.records), [a.version for a in self.actors]))

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        modules, rng, counts, n_records, versions = cast("tuple[dict[str, Any], Any, dict[str, Any], int, list[int]]",
                                                         copy.deepcopy(state))
        self._load_modules(modules)
        self.rng.bit_generator.state = rng
        self._counts = counts
        del self.records[n_records:]
        for actor, version in zip(self.actors, versions):
            actor.version = version + 1  # weights may differ from what a pool cached under the old version

    @all_or_nothing
    def step(self) -> SelfPlayRecord:
        """One round (collect every seat, update, measure); returns its record (all or nothing)."""
        with torch_threads(1):  # small networks: one thread is fastest, and fair to a shared machine
            return self._round()

    def _round(self) -> SelfPlayRecord:
        cfg = self.config
        start = time.perf_counter()
        lr = cfg.lr * (max(1.0 - self._counts["env_steps"] / cfg.budget, 0.0) if cfg.anneal_lr else 1.0)
        for opt in self.optimizers:
            for group in opt.param_groups:
                group["lr"] = lr
        extra = {"lr": lr, **self._round_extra()}  # this round's schedules, before its steps count
        P = self.game.num_players
        trajs = []
        for seat in range(P):
            seed = int(self.rng.integers(2**63 - 1))
            trajs.append(self.pool.collect(seat, self.actor_of(seat), self.policies, max(1, cfg.steps_per_round // P),
                                           seed=seed))
        collected = time.perf_counter()
        groups = [list(range(P))] if cfg.shared else [[p] for p in range(P)]
        sums: dict[str, float] = {}
        for index, seats in enumerate(groups):
            batch = self._prepare(index, [trajs[p] for p in seats])
            for key, value in self._update(index, batch).items():
                sums[key] = sums.get(key, 0.0) + value / len(groups)
        for actor in self.actors:
            actor.version += 1  # pools cache policies by version
        self._after_round()
        updated = time.perf_counter()
        iteration = self.iteration + 1
        self._counts["env_steps"] += sum(int(t.steps) for t in trajs)
        self._counts["episodes"] += sum(len(t.episode_returns) for t in trajs)
        nash_conv = None
        if cfg.eval_every and iteration % cfg.eval_every == 0:
            nash_conv = self._nash_conv()
        measured = time.perf_counter()
        times = {"collect": collected - start, "update": updated - collected, "measure": measured - updated}
        self._counts["wall"] += sum(times.values())
        returns = {str(p): float(np.mean(t.episode_returns[:, p])) for p, t in enumerate(trajs)}
        record = SelfPlayRecord(
            iteration=iteration, env_steps=int(self._counts["env_steps"]), episodes=int(self._counts["episodes"]),
            wall_time=float(self._counts["wall"]),
            exploitability=None if nash_conv is None else nash_conv / P, nash_conv=nash_conv,
            returns=returns, losses=sums, times=times, extra=extra)
        self.records.append(record)
        return record

    def _prepare(self, index: int, trajs: list[Trajectories]) -> SelfPlayBatch:
        """One actor's round data as tensors, with GAE advantages computed per seat's trajectory."""
        cfg = self.config
        critic, actor = self.critics[index], self.actors[index]
        parts: list[tuple[torch.Tensor, ...]] = []
        device = cfg.device  # the round's rows go to the device once; minibatches index them there
        for traj in trajs:
            T = len(traj)
            obs = to_tensor(traj.obs, device=device).reshape(T, -1)
            legal = to_tensor(traj.legal_mask.reshape(T, -1), None, device=device)
            with torch.no_grad():
                value = critic(obs).squeeze(-1).double().cpu().numpy()
                next_value = critic(to_tensor(traj.next_obs, device=device).reshape(T, -1)).squeeze(-1).double().cpu().numpy()
                old_logp_all = torch.log_softmax(masked_logits(actor.logits(obs), legal), dim=-1)
            adv, ret = gae(traj.reward, traj.done, value, next_value, gamma=cfg.gamma, lam=cfg.gae_lambda)
            parts.append((obs, legal, to_tensor(traj.action, None, device=device),
                          to_tensor(np.log(traj.action_prob), device=device), old_logp_all,
                          to_tensor(adv, device=device), to_tensor(ret, device=device)))
        return SelfPlayBatch(*(torch.cat(column) for column in zip(*parts)))

    def _update(self, index: int, batch: SelfPlayBatch) -> dict[str, float]:
        cfg = self.config
        actor, critic, optimizer = self.actors[index], self.critics[index], self.optimizers[index]
        params = [p for group in optimizer.param_groups for p in group["params"]]
        T = len(batch)
        totals: dict[str, float] = {}
        n = 0
        for _ in range(cfg.epochs):
            for idx in np.array_split(self.rng.permutation(T), min(cfg.minibatches, T)):
                mb = batch.take(idx)
                logp_all = torch.log_softmax(masked_logits(actor.logits(mb.obs), mb.legal_mask), dim=-1)
                logp = logp_all.gather(1, mb.action[:, None]).squeeze(1)
                p_logp = torch.where(mb.legal_mask, logp_all.exp() * logp_all, torch.zeros_like(logp_all))
                entropy = -p_logp.sum(dim=-1).mean()
                adv = mb.advantage
                if cfg.norm_adv and len(adv) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pi_loss, terms = self.policy_loss(index, mb, adv, logp, logp_all, entropy)
                v_loss = 0.5 * (critic(mb.obs).squeeze(-1) - mb.returns).pow(2).mean()
                loss = pi_loss + cfg.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                clip_grad_norm(params, cfg.max_grad_norm)
                optimizer.step()
                for key, value in {"policy": pi_loss, "value": v_loss, "entropy": entropy, **terms}.items():
                    totals[key] = totals.get(key, 0.0) + float(value.detach())
                n += 1
        return {k: v / max(n, 1) for k, v in totals.items()}

    # -- measuring ------------------------------------------------------------------------
    def _nash_conv(self) -> float | None:
        """NashConv of the last iterate: exact where the engine holds the game, else from trained best responses."""
        if self._exact is None:
            from pbmarl.games.tree import NotExact

            try:
                self.game.tree()
                self._exact = True
            except (NotExact, NotImplementedError, TypeError, ValueError):
                self._exact = False
        if self._exact:
            from pbmarl.evaluation.exact import exploitability

            return float(exploitability(self.game, self.policies).nash_conv)
        if not self.config.br_budget:
            return None
        return self._trained_nash_conv()

    def _trained_nash_conv(self) -> float:
        """Sum over seats of (a trained best response's value - the policy's own value), both from episodes."""
        from pbmarl.learners.oracles.ppo import PPO

        seed = int(self.rng.integers(2**31))
        frozen = [copy.deepcopy(p) for p in self.policies]
        values = self.pool.evaluate(frozen, 200, seed=seed).mean.to_numpy()
        gains = []
        for p in range(self.game.num_players):
            oracle = PPO(self.game, seed=seed + p, budget=self.config.br_budget, num_envs=self.config.num_envs)
            _, value = oracle.best_response_with_value(p, [None if q == p else frozen[q] for q in range(len(frozen))])
            oracle.close()
            gains.append(value - values[p])
        return float(sum(gains))

    @property
    def done(self) -> bool:
        """At `budget` env steps: where `run()` stops."""
        return self._counts["env_steps"] >= self.config.budget

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` episodes of the last iterate in every seat; ``deterministic=True`` plays its argmax."""
        from pbmarl.learners.common.nets import tempered_policy
        from pbmarl.rollout import RolloutPool

        policies: list[Any] = self.policies
        if deterministic:
            policies = [tempered_policy(p.net, self.game, self.config.hidden, temperature=1e-3) for p in policies]
        with RolloutPool(self.game, backend="local", seed=seed) as pool:
            return pool.evaluate(policies, episodes, seed=seed)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __repr__(self) -> str:
        tail = ""
        if self.records and self.records[-1].exploitability is not None:
            tail = f", exploitability={self.records[-1].exploitability:.4g}"
        return f"{type(self).__name__}({self.game.name!r}, iteration={self.iteration}, env_steps={self._counts['env_steps']:,}{tail})"

    # -- files ----------------------------------------------------------------------------
    def _modules_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, (a, c, o) in enumerate(zip(self.actors, self.critics, self.optimizers)):
            out[f"actor_{k}"], out[f"critic_{k}"], out[f"optimizer_{k}"] = a.net.state_dict(), c.state_dict(), o.state_dict()
        return out

    def _load_modules(self, modules: dict[str, Any]) -> None:
        for k, (a, c, o) in enumerate(zip(self.actors, self.critics, self.optimizers)):
            a.net.load_state_dict(modules[f"actor_{k}"])
            c.load_state_dict(modules[f"critic_{k}"])
            o.load_state_dict(modules[f"optimizer_{k}"])

    def state(self) -> State:
        """The networks and optimisers (torch state dicts), the generator, counters and records."""
        data = {"rng": self.rng.bit_generator.state, "counts": self._counts,
                "records": [{"iteration": r.iteration, "env_steps": r.env_steps, "episodes": r.episodes,
                             "wall_time": r.wall_time, "exploitability": r.exploitability, "nash_conv": r.nash_conv,
                             "returns": r.returns, "losses": r.losses, "times": r.times, "extra": r.extra}
                            for r in self.records]}
        return State(data=data, modules=self._modules_state(), config=self.config.to_dict(), seed=self.seed,
                     game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> Any:
        """Rebuild a run `state` wrote; `overrides` replace options (``budget=``, ...)."""
        options = dict(saved.config)
        options["hidden"] = tuple(options.get("hidden", (128, 128)))
        run = cls.__new__(cls)
        run._configure(saved.game(), build_config(cls.config_class, None, {**options, **overrides}, owner=cls.__name__),
                       check_seed(saved.seed))
        try:
            modules = {name: saved.module(name) for name in run._modules_state()}
            run._load_modules(modules)
            data = saved.data
            run.rng.bit_generator.state = data["rng"]
            run._counts = {"env_steps": int(data["counts"]["env_steps"]), "episodes": int(data["counts"]["episodes"]),
                           "wall": float(data["counts"]["wall"])}
            run.records = [SelfPlayRecord(**r) for r in data["records"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: malformed {cls.__name__} state "
                                 f"({type(exc).__name__}: {exc})") from None
        return run
