"""QMIX (and VDN, and independent Q-learning): value decomposition for a cooperative group.

Each agent of the group acts greedily on a shared Q-network ``Q(o_a, .)`` (with
epsilon-greedy exploration annealed over env steps); the team is trained end to end
through a mixer ``Q_tot = f(Q_1(o_1, a_1), ..., Q_n(o_n, a_n); s)``:

    L = (r_team + gamma * (1 - term) * f'(Q'_a(o'_a, argmax_b Q_a(o'_a, b)); s') - Q_tot)^2

with target networks ``Q'``, ``f'`` (hard copies every ``target_update`` updates) and
double Q (the online network picks the next action, the target values it). ``f`` is
`pbmarl.learners.multiagent.mixers.QMixer` (monotonic, over the global state or the concatenated
observations), `VDN` (a sum), or nothing (``mixer="none"``: each agent learns its own
Q from its own reward, i.e. independent Q-learning).

Replay holds whole episodes (``buffer_episodes``); every update samples
``batch_episodes`` of them and trains on all their steps. With ``agent="gru"`` the
agent network is recurrent (`pbmarl.policies.recurrent`): in play its hidden state
runs through each episode per environment instance and agent, and in replay each
sampled episode is unrolled from ``t = 0`` with a zero state, so the Q-values trained
are the ones the agents acted on. ``weighting="ow"``/``"cw"`` turns on Weighted QMIX
(`pbmarl.learners.multiagent.mixers.wqmix_weights`).

Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent
RL" (ICML); the defaults are the paper's where they apply (gamma 0.99, eps 1 -> 0.05,
mixing embed 32, batch 32 episodes).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import FLAG, POSITIVE, POSITIVE_INT, UNIT, Rule, is_real
from pbmarl.distributed.options import ParallelOptions
from pbmarl.learners.common.config import DeviceOption
from pbmarl.learners.common.nets import masked_argmax
from pbmarl.learners.multiagent.episode_batch import episode_grid, unroll_q
from pbmarl.learners.multiagent.group import (
    HIDDEN,
    ReplayGroupLearner,
    as_widths,
    central_input,
    central_source,
    check_discrete,
    joint_steps,
)
from pbmarl.learners.multiagent.mixers import CentralQ, make_mixer, wqmix_weights
from pbmarl.policies.neural import MLPPolicy
from pbmarl.policies.recurrent import RecurrentQNet, RecurrentQPolicy
from pbmarl.rl.schedules import linear_schedule
from pbmarl.rollout.mapping import GroupGame
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.torchutil import clip_grad_norm


@dataclass(frozen=True)
class QMIXConfig(ParallelOptions, DeviceOption):
    """QMIX options (Rashid et al. 2018 where they apply).

    With ``workers > 1`` (`ParallelOptions`) `pb.MARL` trains it on a parameter server: each
    worker keeps its own replay, and a job is one update on one batch drawn from it.
    """

    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the agent Q-network (paper: 64)."""
    agent: str = "mlp"
    """Agent network: 'mlp' (reads the current observation) or 'gru' (a recurrent network for partial
    observability, the paper's: fc, GRU cell, fc; its hidden state runs through each episode, in play
    and in replay)."""
    rnn_hidden: int = 64
    """Width of the GRU agent network (paper: 64)."""
    weighting: str = "none"
    """Weighted QMIX (Rashid et al. 2020): 'none', 'ow' (optimistic) or 'cw' (centralised) weights of the
    TD errors, with targets from an unrestricted critic Q*; lets the monotonic mixer's greedy joint action
    reach optima it cannot represent (the climbing game)."""
    weight_alpha: float = 0.1
    """Weight of the TD errors Weighted QMIX deems suboptimal, in (0, 1] (1: plain QMIX); smaller trusts the
    optimistic targets more (on the climbing game 0.01 found the optimum on 8 of 8 seeds, 0.1 on 4 of 8)."""
    central_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of Weighted QMIX's critic Q* (paper: 256)."""
    lr: float = 5e-4
    """Adam learning rate (paper: RMSprop 5e-4)."""
    gamma: float = 0.99
    """Discount (paper: 0.99)."""
    mixer: str = "qmix"
    """'qmix' (monotonic hypernetwork mixer), 'vdn' (sum) or 'none' (independent Q-learners)."""
    mixing_embed: int = 32
    """Width of the mixing layer (paper: 32)."""
    central: str = "auto"
    """Mixer input: 'auto' (global state if the game has one, else concatenated observations), 'state', 'concat'."""
    eps_start: float = 1.0
    """Initial exploration rate (paper: 1.0)."""
    eps_end: float = 0.05
    """Final exploration rate (paper: 0.05)."""
    eps_anneal_steps: int = 50_000
    """Env steps over which epsilon falls linearly (paper: 50k)."""
    buffer_episodes: int = 5000
    """Episodes kept in replay (paper: 5000)."""
    batch_episodes: int = 32
    """Episodes per update (paper: 32)."""
    updates_per_round: int = 8
    """Gradient updates per round."""
    target_update: int = 200
    """Updates between hard target copies (paper: every 200 episodes)."""
    double_q: bool = True
    """Pick the next action with the online network, value it with the target one."""
    team_reward: str = "sum"
    """How the team reward is formed from the agents' rewards: 'sum' or 'mean'."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip (paper: 10)."""
    steps_per_round: int = 1000
    """Env steps collected per round."""

    checks: ClassVar[dict[str, Rule]] = {
        "hidden": HIDDEN, "central_hidden": HIDDEN,
        "agent": (lambda v: v in ("mlp", "gru"), "'mlp' or 'gru'"),
        "weighting": (lambda v: v in ("none", "ow", "cw"), "'none', 'ow' or 'cw'"),
        "weight_alpha": (lambda v: is_real(v) and 0 < v <= 1, "a number in (0, 1]"),
        "mixer": (lambda v: v in ("qmix", "vdn", "none"), "'qmix', 'vdn' or 'none'"),
        "central": (lambda v: v in ("auto", "state", "concat"), "'auto', 'state' or 'concat'"),
        "team_reward": (lambda v: v in ("sum", "mean"), "'sum' or 'mean'"),
        "lr": POSITIVE, "max_grad_norm": POSITIVE, "gamma": UNIT, "eps_start": UNIT, "eps_end": UNIT,
        "rnn_hidden": POSITIVE_INT, "buffer_episodes": POSITIVE_INT, "batch_episodes": POSITIVE_INT,
        "updates_per_round": POSITIVE_INT, "target_update": POSITIVE_INT, "steps_per_round": POSITIVE_INT,
        "eps_anneal_steps": POSITIVE_INT, "mixing_embed": POSITIVE_INT, "double_q": FLAG,
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", as_widths(self.hidden))
        object.__setattr__(self, "central_hidden", as_widths(self.central_hidden))
        super().__post_init__()
        if self.weighting != "none" and self.mixer == "none":
            raise ValueError(f"weighting={self.weighting!r} weights a mixer's TD errors; "
                             "mixer='none' (independent Q-learners) has none: use mixer='qmix' or 'vdn'")
        if self.buffer_episodes < self.batch_episodes:
            raise ValueError(f"buffer_episodes must be at least batch_episodes={self.batch_episodes} (an update "
                             f"samples that many episodes from replay), got {self.buffer_episodes}")


class EpsilonGreedyQ(MLPPolicy):
    """Acts greedily on the Q-values its network outputs, uniformly at random with probability `epsilon`."""

    kind = "epsilon_greedy_q"

    def __init__(self, game: Any, hidden: Any = (64, 64), *, seed: int | None = 0, epsilon: float = 0.0) -> None:
        super().__init__(game, hidden, seed=seed)
        self.epsilon = float(epsilon)

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Any) -> np.ndarray:
        with torch.no_grad():
            q = self.logits(torch.as_tensor(np.asarray(obs, dtype=np.float32)))
            best = masked_argmax(q, torch.as_tensor(legal_mask)).numpy()
        legal = legal_mask.astype(float)
        probs = self.epsilon * legal / np.maximum(legal.sum(axis=1, keepdims=True), 1)
        probs[np.arange(len(best)), best] += 1.0 - self.epsilon
        return probs

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "epsilon": self.epsilon}

    @classmethod
    def from_state(cls, game: Any, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> EpsilonGreedyQ:
        policy = cls(game, hidden=meta["hidden"], seed=None, epsilon=float(meta.get("epsilon", 0.0)))
        policy.net.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in arrays.items()})
        policy.version = int(meta.get("version", 0))
        return policy


#: the per-step arrays an episode in replay keeps
_FIELDS = ("obs", "next_obs", "legal_mask", "next_legal_mask", "action", "reward", "terminated", "central",
           "next_central", "episode", "time")


class QMIX(ReplayGroupLearner):
    """QMIX for one group; see the module doc. ``pb.QMIX(game=None, *, seed=0, config=None, **options)``."""

    name = "qmix"
    config_class = QMIXConfig
    config: QMIXConfig

    def __init__(self, game: Any = None, *, seed: int = 0, config: QMIXConfig | None = None, **options: Any) -> None:
        super().__init__(game, seed=seed, config=config, **options)
        self.updates = 0
        self._next_episode = 0

    def _build(self, view: GroupGame) -> None:
        cfg = self.config
        who = f"{type(self).__name__} (group {view.group!r})"
        check_discrete(view, who)
        self.source = "concat" if cfg.mixer == "none" else central_source(view.base, cfg.central, who)
        width = (int(np.prod(view.base.global_state_shape)) if self.source == "state"
                 else self.n_agents * int(view.observation_shape[0]))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.agent: EpsilonGreedyQ | RecurrentQPolicy = (
                RecurrentQPolicy(view, cfg.rnn_hidden, seed=self.seed, epsilon=cfg.eps_start) if cfg.agent == "gru"
                else EpsilonGreedyQ(view, cfg.hidden, seed=self.seed, epsilon=cfg.eps_start))
            self.mixer = make_mixer(cfg.mixer, self.n_agents, width, embed=cfg.mixing_embed)
            self.central_q = (CentralQ(self.n_agents, view.num_actions, width, cfg.central_hidden)
                              if cfg.weighting != "none" else None)
        self.target_agent = copy.deepcopy(self.agent.net)
        self.target_mixer = copy.deepcopy(self.mixer)
        self.target_central = copy.deepcopy(self.central_q)
        params = list(self.agent.net.parameters()) + (list(self.mixer.parameters()) if self.mixer is not None else [])
        params += list(self.central_q.parameters()) if self.central_q is not None else []
        self.params = params
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr)

    @property
    def epsilon(self) -> float:
        cfg = self.config
        return linear_schedule(cfg.eps_start, cfg.eps_end, float(cfg.eps_anneal_steps), float(self.env_steps))

    def behaviour(self) -> EpsilonGreedyQ | RecurrentQPolicy:
        self.agent.epsilon = self.epsilon
        return self.agent

    def policy(self) -> EpsilonGreedyQ | RecurrentQPolicy:
        greedy = copy.deepcopy(self.agent)
        greedy.epsilon = 0.0
        return greedy

    # -- replay -----------------------------------------------------------------------------------
    def _store(self, rows: Trajectories) -> None:
        steps = joint_steps(rows, self.seats)
        new = {"obs": steps.obs, "next_obs": steps.next_obs, "legal_mask": steps.legal_mask,
               "next_legal_mask": steps.next_legal_mask, "action": steps.action, "reward": steps.reward,
               "terminated": steps.terminated, "central": central_input(steps, self.source),
               "next_central": central_input(steps, self.source, nxt=True),
               "episode": steps.episode + self._next_episode, "time": steps.time}
        self._next_episode += int(steps.episode.max()) + 1 if len(steps) else 0
        self.buffer = new if not self.buffer else {k: np.concatenate([self.buffer[k], new[k]]) for k in _FIELDS}
        kept = np.unique(self.buffer["episode"])[-self.config.buffer_episodes:]
        if len(kept) and kept[0] > self.buffer["episode"][0]:
            keep = self.buffer["episode"] >= kept[0]
            self.buffer = {k: v[keep] for k, v in self.buffer.items()}

    def _sample(self) -> dict[str, torch.Tensor]:
        ids = np.unique(self.buffer["episode"])
        pick = self.rng.choice(ids, size=min(self.config.batch_episodes, len(ids)), replace=False)
        sel = np.flatnonzero(np.isin(self.buffer["episode"], pick))
        out: dict[str, torch.Tensor] = {}
        if self.config.agent == "gru":  # whole episodes in time order, laid out on a grid for the GRU
            order, grid, valid = episode_grid(self.buffer["episode"][sel], self.buffer["time"][sel])
            sel = sel[order]
            out.update(grid=torch.as_tensor(grid), valid=torch.as_tensor(valid))
        out.update({k: torch.as_tensor(v[sel]) for k, v in self.buffer.items() if k not in ("episode", "time")})
        return out

    # -- learning ---------------------------------------------------------------------------------
    def _q(self, net: torch.nn.Module, obs: torch.Tensor) -> torch.Tensor:
        S, n = obs.shape[:2]
        return net(obs.reshape(S * n, -1).float()).view(S, n, -1)

    def _agent_q(self, b: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(q_all, q_next_online, q_next_target)``, each ``[S, n, A]``; the GRU unrolls each episode from t = 0."""
        if self.config.agent == "mlp":
            with torch.no_grad():
                nxt_online, nxt_target = self._q(self.agent.net, b["next_obs"]), self._q(self.target_agent, b["next_obs"])
            return self._q(self.agent.net, b["obs"]), nxt_online, nxt_target
        grid, valid = b["grid"].numpy(), b["valid"].numpy()
        obs, next_obs = b["obs"].float(), b["next_obs"].float()
        online, target = self.agent.net, self.target_agent
        assert isinstance(online, RecurrentQNet) and isinstance(target, RecurrentQNet)
        q_all, q_next_online = unroll_q(online, obs, next_obs, grid, valid)
        with torch.no_grad():
            _, q_next_target = unroll_q(target, obs, next_obs, grid, valid)
        return q_all, q_next_online.detach(), q_next_target

    def train(self, rows: Trajectories, env_steps: int) -> dict[str, float]:
        cfg = self.config
        self.env_steps = int(env_steps)
        self._store(rows)
        losses, q_means = [], []
        for _ in range(cfg.updates_per_round):
            b = self._sample()
            q_all, q_next_online, q_next_target = self._agent_q(b)
            q = q_all.gather(2, b["action"].long()[..., None]).squeeze(2)  # [S, n]
            with torch.no_grad():
                mask = b["next_legal_mask"]
                pick_from = q_next_online if cfg.double_q else q_next_target
                S, n, A = pick_from.shape
                best = masked_argmax(pick_from.reshape(S * n, A), mask.reshape(S * n, A)).view(S, n)
                q_next = q_next_target.gather(2, best[..., None]).squeeze(2)
                q_next = torch.where(mask.any(-1), q_next, torch.zeros_like(q_next))
            reward = b["reward"].float()
            if self.mixer is None:  # independent learners: each agent its own reward and bootstrap
                target = reward + cfg.gamma * (~b["terminated"]).float() * q_next
                loss = torch.nn.functional.mse_loss(q, target)
            elif self.central_q is None:
                team = reward.sum(1) if cfg.team_reward == "sum" else reward.mean(1)
                live = (~b["terminated"].any(1)).float()
                with torch.no_grad():
                    assert self.target_mixer is not None
                    target = team + cfg.gamma * live * self.target_mixer(q_next, b["next_central"].float())
                loss = torch.nn.functional.mse_loss(self.mixer(q, b["central"].float()), target)
            else:
                loss = self._weighted_loss(b, q, q_all, best)
            self.optimizer.zero_grad()
            loss.backward()
            clip_grad_norm(self.params, cfg.max_grad_norm)
            self.optimizer.step()
            self._after_update(())
            losses.append(loss.item())
            q_means.append(q.mean().item())
        self.agent.version += 1
        return {"td_loss": float(np.mean(losses)), "q": float(np.mean(q_means)), "epsilon": self.epsilon}

    def _after_update(self, reports: Sequence[tuple[dict[str, float], int]]) -> None:
        """Count the update; every ``target_update`` updates the targets copy the online networks."""
        self.updates += 1
        if self.updates % self.config.target_update == 0:
            self.target_agent.load_state_dict(self.agent.net.state_dict())
            if self.mixer is not None and self.target_mixer is not None:
                self.target_mixer.load_state_dict(self.mixer.state_dict())
            if self.central_q is not None and self.target_central is not None:
                self.target_central.load_state_dict(self.central_q.state_dict())

    def _weights_loaded(self) -> None:
        self.agent.version += 1

    def _weighted_loss(self, b: dict[str, torch.Tensor], q: torch.Tensor, q_all: torch.Tensor,
                       best_next: torch.Tensor) -> torch.Tensor:
        """Weighted QMIX: ``sum w (Q_tot - y)^2 + (Q*(s, u) - y)^2`` with ``y = r + gamma Q*'(s', greedy u')``."""
        cfg = self.config
        assert self.mixer is not None and self.central_q is not None and self.target_central is not None
        reward = b["reward"].float()
        team = reward.sum(1) if cfg.team_reward == "sum" else reward.mean(1)
        live = (~b["terminated"].any(1)).float()
        state, next_state = b["central"].float(), b["next_central"].float()
        action = b["action"].long()
        with torch.no_grad():
            target = team + cfg.gamma * live * self.target_central(best_next, next_state)
            S, n, A = q_all.shape
            greedy = masked_argmax(q_all.detach().reshape(S * n, A), b["legal_mask"].reshape(S * n, A)).view(S, n)
            q_star_greedy = self.central_q(greedy, state)
        q_tot = self.mixer(q, state)
        w = wqmix_weights(q_tot.detach(), target, kind=cfg.weighting, alpha=cfg.weight_alpha,
                          q_star_greedy=q_star_greedy, greedy=(greedy == action).all(1))
        return (w * (q_tot - target) ** 2).mean() + ((self.central_q(action, state) - target) ** 2).mean()

    # -- saving -----------------------------------------------------------------------------------
    def modules(self) -> dict[str, Any]:
        out: dict[str, Any] = {"agent": self.agent.net, "target_agent": self.target_agent, "optimizer": self.optimizer}
        if self.mixer is not None and self.target_mixer is not None:
            out.update(mixer=self.mixer, target_mixer=self.target_mixer)
        if self.central_q is not None and self.target_central is not None:
            out.update(central_q=self.central_q, target_central=self.target_central)
        return out

    def extra_state(self) -> dict[str, torch.Tensor]:
        out = super().extra_state()
        out["updates"] = torch.tensor(self.updates)
        out["next_episode"] = torch.tensor(self._next_episode)
        return out

    def load_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        super().load_extra_state(state)
        self.updates = int(state["updates"])
        self._next_episode = int(state["next_episode"])
        self.agent.version += 1


class IQL(QMIX):
    """Independent Q-learning: QMIX's agents without a mixer, each from its own reward."""

    name = "iql"
    defaults = {"mixer": "none"}


class VDNLearner(QMIX):
    """VDN: QMIX with the sum as its mixer."""

    name = "vdn"
    defaults = {"mixer": "vdn"}
