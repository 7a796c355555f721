"""MADDPG: decentralised actors, one centralised critic per agent over all observations and actions.

For agent ``i`` of the group, the critic ``Q_i(o_1..o_n, a_1..a_n)`` is trained on
``y_i = r_i + gamma * (1 - term_i) * Q'_i(o'_1..o'_n, mu'(o'_1)..mu'(o'_n))`` and the
actor follows ``grad E[Q_i(o, a_1..mu(o_i)..a_n)]`` with the other agents' actions
from replay. Target networks are Polyak-averaged (`pbmarl.rl.polyak.Polyak`).
The group's agents share one actor (give each agent a group of its own for separate
actors). Box actions use a `DeterministicPolicy` with Gaussian exploration noise;
Discrete actions use a softmax actor trained through the straight-through
Gumbel-softmax (Jang et al. 2017), as the MADDPG paper does for MPE's discrete actions.

Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
Environments" (NeurIPS): defaults are the paper's (lr 0.01, gamma 0.95, tau 0.01,
batch 1024, two layers of 64 units).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, UNIT, Rule, is_real
from pbmarl.distributed.options import ParallelOptions
from pbmarl.learners.common.config import DeviceOption
from pbmarl.learners.common.nets import build_mlp, masked_logits
from pbmarl.learners.multiagent.group import HIDDEN, ReplayGroupLearner, as_widths, joint_steps
from pbmarl.policies.base import Policy
from pbmarl.policies.continuous import DeterministicPolicy
from pbmarl.policies.neural import MLPPolicy
from pbmarl.policies.noise import Normal
from pbmarl.rl.polyak import Polyak
from pbmarl.rollout.mapping import GroupGame
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.torchutil import clip_grad_norm


@dataclass(frozen=True)
class MADDPGConfig(ParallelOptions, DeviceOption):
    """MADDPG options (Lowe et al. 2017, Appendix: lr 0.01, gamma 0.95, tau 0.01, batch 1024, 64 units).

    With ``workers > 1`` (`ParallelOptions`) `pb.MARL` trains it on a parameter server: each
    worker keeps its own replay, and a job is one critic and one actor gradient on one batch of it.
    """

    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of actor and critics (paper: 64, 64)."""
    actor_lr: float = 1e-2
    """Actor Adam learning rate (paper: 0.01)."""
    critic_lr: float = 1e-2
    """Critic Adam learning rate (paper: 0.01)."""
    gamma: float = 0.95
    """Discount (paper: 0.95)."""
    tau: float = 0.01
    """Polyak rate of the target networks (paper: 0.01)."""
    batch_size: int = 1024
    """Joint steps per update (paper: 1024)."""
    buffer_size: int = 1_000_000
    """Joint steps kept in replay (paper: 1e6)."""
    updates_per_round: int = 10
    """Gradient updates per round (the paper updates every 100 steps)."""
    learning_starts: int = 1024
    """Joint steps in replay before updates begin."""
    noise_sigma: float = 0.1
    """Gaussian exploration noise of Box actions, in normalised units."""
    gumbel_temperature: float = 1.0
    """Temperature of the Gumbel-softmax for Discrete actions."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip (paper code: 0.5)."""
    steps_per_round: int = 1000
    """Env steps collected per round."""

    checks: ClassVar[dict[str, Rule]] = {
        "hidden": HIDDEN, "actor_lr": POSITIVE, "critic_lr": POSITIVE, "max_grad_norm": POSITIVE,
        "gumbel_temperature": POSITIVE, "tau": (lambda v: is_real(v) and 0 < v <= 1, "a number in (0, 1]"),
        "gamma": UNIT, "batch_size": POSITIVE_INT, "buffer_size": POSITIVE_INT, "updates_per_round": POSITIVE_INT,
        "steps_per_round": POSITIVE_INT, "noise_sigma": NON_NEGATIVE, "learning_starts": NON_NEGATIVE_INT,
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", as_widths(self.hidden))
        super().__post_init__()


class MADDPG(ReplayGroupLearner):
    """MADDPG for one group; see the module doc. ``pb.MADDPG(game=None, *, seed=0, config=None, **options)``."""

    name = "maddpg"
    config_class = MADDPGConfig
    config: MADDPGConfig

    def _build(self, view: GroupGame) -> None:
        cfg = self.config
        self.discrete = view.num_actions > 0
        self.obs_dim = int(view.observation_shape[0])
        self.act_dim = view.num_actions if self.discrete else int(np.prod(view.action_space(0).shape))
        n = self.n_agents
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.actor: MLPPolicy | DeterministicPolicy
            if self.discrete:
                self.actor = MLPPolicy(view, cfg.hidden, seed=self.seed)
            else:
                self.actor = DeterministicPolicy(view, cfg.hidden, noise=Normal(cfg.noise_sigma), seed=self.seed)
            #: one critic per agent, each over every agent's observation and action
            self.critic_input_dim = n * (self.obs_dim + self.act_dim)
            self.critics = torch.nn.ModuleList([build_mlp(self.critic_input_dim, cfg.hidden, 1) for _ in range(n)])
        self.target_actor = copy.deepcopy(self.actor.net)
        self.target_critics = copy.deepcopy(self.critics)
        self._polyak = (Polyak(self.target_actor, self.actor.net), Polyak(self.target_critics, self.critics))
        self.actor_opt = torch.optim.Adam(self.actor.net.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=cfg.critic_lr)

    def behaviour(self) -> Policy:
        return self.actor

    def policy(self) -> Policy:
        pi = copy.deepcopy(self.actor)
        if isinstance(pi, DeterministicPolicy):
            pi.noise = None
        return pi

    # -- actions as the critic reads them ---------------------------------------------------------
    def _act_train(self, net: torch.nn.Module, obs: torch.Tensor, mask: torch.Tensor, *, sample: bool) -> torch.Tensor:
        """``[B, act_dim]``: Box actions in [-1, 1] units, or one-hot (straight-through Gumbel) for Discrete."""
        logits = net(obs)
        if not self.discrete:
            return torch.tanh(logits)
        logits = masked_logits(logits, mask)
        if not sample:
            return torch.nn.functional.one_hot(logits.argmax(-1), self.act_dim).float()
        u = torch.rand(logits.shape, generator=self.torch_gen).clamp(1e-10, 1 - 1e-10)
        y = torch.softmax((logits - torch.log(-torch.log(u))) / self.config.gumbel_temperature, dim=-1)
        hard = torch.nn.functional.one_hot(y.argmax(-1), self.act_dim).float()
        return hard + y - y.detach()

    def _stored_action(self, action: np.ndarray) -> np.ndarray:
        if self.discrete:
            return np.eye(self.act_dim, dtype=np.float32)[action]
        assert isinstance(self.actor, DeterministicPolicy)
        S, n = action.shape[:2]
        return self.actor.normalise(action.reshape(S * n, -1)).reshape(S, n, -1).astype(np.float32)

    def critic_input(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``[B, n * (obs + act)]`` from ``obs [B, n, d]`` and ``action [B, n, k]``."""
        B = obs.shape[0]
        return torch.cat([obs.reshape(B, -1), action.reshape(B, -1)], dim=1)

    # -- learning ---------------------------------------------------------------------------------
    def _store(self, rows: Trajectories) -> None:
        s = joint_steps(rows, self.seats)
        new = {"obs": s.obs, "next_obs": s.next_obs, "mask": s.legal_mask, "next_mask": s.next_legal_mask,
               "action": self._stored_action(s.action), "reward": s.reward.astype(np.float32),
               "terminated": s.terminated}
        self.buffer = new if not self.buffer else {k: np.concatenate([self.buffer[k], new[k]]) for k in new}
        cap = self.config.buffer_size
        if len(self.buffer["obs"]) > cap:
            self.buffer = {k: v[-cap:] for k, v in self.buffer.items()}

    def train(self, rows: Trajectories, env_steps: int) -> dict[str, float]:
        cfg = self.config
        self.env_steps = int(env_steps)
        self._store(rows)
        size = len(self.buffer["obs"])
        if size < min(cfg.learning_starts, cfg.buffer_size):
            return {"critic_loss": float("nan"), "actor_loss": float("nan")}
        n, closs, aloss = self.n_agents, [], []
        for _ in range(cfg.updates_per_round):
            pick = self.rng.integers(size, size=min(cfg.batch_size, size))
            b = {k: torch.as_tensor(v[pick]) for k, v in self.buffer.items()}
            B = len(pick)
            obs, nobs = b["obs"].float(), b["next_obs"].float()
            with torch.no_grad():
                nact = self._act_train(self.target_actor, nobs.reshape(B * n, -1), b["next_mask"].reshape(B * n, -1),
                                       sample=False).view(B, n, -1)
                nx = self.critic_input(nobs, nact)
                live = (~b["terminated"]).float()
                y = torch.stack([b["reward"][:, i] + cfg.gamma * live[:, i] * self.target_critics[i](nx).squeeze(-1)
                                 for i in range(n)], dim=1)
            x = self.critic_input(obs, b["action"].float())
            q = torch.stack([self.critics[i](x).squeeze(-1) for i in range(n)], dim=1)
            critic_loss = torch.nn.functional.mse_loss(q, y)
            self.critic_opt.zero_grad()
            critic_loss.backward()
            clip_grad_norm(self.critics.parameters(), cfg.max_grad_norm)
            self.critic_opt.step()
            mine = self._act_train(self.actor.net, obs.reshape(B * n, -1), b["mask"].reshape(B * n, -1),
                                   sample=True).view(B, n, -1)
            actor_loss = torch.zeros(())
            for i in range(n):
                acts = torch.cat([b["action"][:, :i].float(), mine[:, i:i + 1], b["action"][:, i + 1:].float()], dim=1)
                actor_loss = actor_loss - self.critics[i](self.critic_input(obs, acts)).mean() / n
            self.actor_opt.zero_grad()
            actor_loss.backward()
            clip_grad_norm(self.actor.net.parameters(), cfg.max_grad_norm)
            self.actor_opt.step()
            self._after_update(())
            closs.append(critic_loss.item())
            aloss.append(actor_loss.item())
        self.actor.version += 1
        return {"critic_loss": float(np.mean(closs)), "actor_loss": float(np.mean(aloss))}

    def _after_update(self, reports: Sequence[tuple[dict[str, float], int]]) -> None:
        """The targets' Polyak step."""
        for polyak in self._polyak:
            polyak(self.config.tau)

    def _weights_loaded(self) -> None:
        self.actor.version += 1

    # -- saving -----------------------------------------------------------------------------------
    def modules(self) -> dict[str, Any]:
        return {"actor": self.actor.net, "target_actor": self.target_actor, "critics": self.critics,
                "target_critics": self.target_critics, "actor_opt": self.actor_opt, "critic_opt": self.critic_opt}

    def load_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        super().load_extra_state(state)
        self.actor.version += 1
