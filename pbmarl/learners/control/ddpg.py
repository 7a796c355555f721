"""DDPG: a deterministic actor, a Q critic, target networks and exploration noise (Lillicrap et al. 2016).

One update, on a replay minibatch (uniform, or prioritised with ``prioritized=True``,
Machin's ``DDPGPer``):

1. critic: minimise ``w * (Q(s, a) - y)^2`` with
   ``y = r + gamma * (1 - done) * Q'(s', mu'(s'))`` (primed: target networks);
2. actor: maximise ``Q(s, mu(s))``;
3. targets: Polyak averaging with rate ``tau`` (`Polyak`, the parameter lists taken once).

Exploration adds Gaussian or Ornstein-Uhlenbeck noise (scaled to half the action
range) to ``mu(s)`` and clips to the Box. `HDDPG` and `TD3` build on this file.

Example:
    >>> learner = pb.DDPG("gym:Pendulum-v1", seed=0, noise="ornstein_uhlenbeck")
    >>> records = learner.run()                # 20,000 env steps  # doctest: +SKIP
    >>> learner.evaluate(10, deterministic=True).mean[0]   # doctest: +SKIP
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import NON_NEGATIVE, POSITIVE, Rule
from pbmarl.learners.common.buffers import Batch
from pbmarl.learners.common.nets import adam, frozen, seeded, to_tensor
from pbmarl.learners.control.base import ControlConfig, ControlLearner, ControlRecord, PrioritizedOptions
from pbmarl.learners.control.critics import Critic, Critics
from pbmarl.policies.continuous import DeterministicPolicy
from pbmarl.policies.noise import Noise, Normal, OrnsteinUhlenbeck
from pbmarl.rl.polyak import Polyak

NOISES = ("normal", "ornstein_uhlenbeck", "none")


@dataclass(frozen=True)
class DDPGConfig(ControlConfig, PrioritizedOptions):
    """DDPG options (plus `ControlConfig`'s, and `PrioritizedOptions`: ``prioritized=True`` is Machin's
    ``DDPGPer``); defaults follow Stable-Baselines3."""

    hidden: tuple[int, ...] = (400, 300)
    """Widths of the hidden layers of the actor and the critic."""
    lr: float = 1e-3
    """Adam learning rate of the critic (and of the actor unless `actor_lr` is given)."""
    actor_lr: float | None = None
    """Adam learning rate of the actor (None: `lr`); a slower actor keeps tanh from saturating early."""
    noise: str = "normal"
    """Exploration noise on the actor's action: ``"normal"``, ``"ornstein_uhlenbeck"`` or ``"none"``."""
    noise_sigma: float = 0.1
    """Noise scale, as a fraction of half the action range (`pb.policies.noise` works in normalised units)."""
    noise_theta: float = 0.15
    """Mean reversion of the Ornstein-Uhlenbeck noise (dt = 1e-2, as in Machin and SB3)."""

    checks: ClassVar[dict[str, Rule]] = {
        "actor_lr": (lambda v: v is None or POSITIVE[0](v), "None or a positive number"),
        "noise": (lambda v: v in NOISES, f"one of {NOISES}"), "noise_sigma": NON_NEGATIVE,
        "noise_theta": NON_NEGATIVE,
    }


@dataclass(frozen=True)
class DDPGRecord(ControlRecord):
    """One DDPG round: ``loss/critic`` (`loss`), ``loss/actor``, then ``q_mean``."""

    actor_loss: float
    """Mean of ``-Q(s, mu(s))`` over the round's updates: ``loss/actor``."""
    q_mean: float
    """Mean Q of the replayed actions."""

    loss_fields: ClassVar[dict[str, str]] = {"actor_loss": "actor"}


class DDPG(ControlLearner):
    """Deep deterministic policy gradient for Box actions; see the module doc.

    Args:
        game: a one-player game with Box actions (or its name).
        config: a `DDPGConfig`; keyword options override its fields.
        seed: seeds networks, noise, replay sampling and episode resets.
    """

    name = "ddpg"
    config_class = DDPGConfig
    record_class: ClassVar[type[ControlRecord]] = DDPGRecord
    spaces = ("box",)
    config: DDPGConfig
    #: critics trained side by side (TD3: 2)
    num_critics: ClassVar[int] = 1

    def _build(self) -> None:
        cfg = self.config
        self.actor = DeterministicPolicy(self.game, cfg.hidden, noise=self._make_noise(), seed=self._seeded())
        self.critics = Critics([seeded(self._seeded(), lambda: Critic(self.obs_dim, self.act_dim, cfg.hidden))
                                for _ in range(self.num_critics)])
        self.actor_target = copy.deepcopy(self.actor.net)
        self.critics_target = copy.deepcopy(self.critics)
        self._polyak = (Polyak(self.actor_target, self.actor.net), Polyak(self.critics_target, self.critics))
        self._critic_params = list(self.critics.parameters())
        self.actor_opt = adam(self.actor.net.parameters(), lr=cfg.lr if cfg.actor_lr is None else cfg.actor_lr)
        self.critic_opt = adam(self.critics.parameters(), lr=cfg.lr)
        self.half_range = (self.act_high - self.act_low) / 2

    def _make_noise(self) -> Noise | None:
        cfg = self.config
        if cfg.noise == "normal":
            return Normal(cfg.noise_sigma)
        if cfg.noise == "ornstein_uhlenbeck":
            return OrnsteinUhlenbeck(cfg.noise_sigma, cfg.noise_theta)
        return None

    # -- acting ----------------------------------------------------------------------------
    def _act(self, obs: torch.Tensor, *, deterministic: bool) -> np.ndarray:
        return self.actor.act(obs.numpy(), rng=self.rng, deterministic=deterministic).action[0]

    def _target_action(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``mu'(s')``: the target actor's action."""
        return self.actor.rescale(torch.tanh(self.actor_target(next_obs)))

    def _store(self, obs: np.ndarray, action: Any, reward: float, terminated: bool, next_obs: np.ndarray,
               episode_end: bool) -> None:
        super()._store(obs, action, reward, terminated, next_obs, episode_end)
        if episode_end:
            self.actor.reset_noise()  # OU noise restarts with every episode

    # -- learning --------------------------------------------------------------------------
    def _target(self, next_obs: torch.Tensor, reward: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """``y = r + gamma * live * Q'(s', mu'(s'))``."""
        q_next = self.critics_target.member(0, next_obs, self._target_action(next_obs))
        return reward + self.config.gamma * live * q_next

    def _critic_loss(self, td: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Weighted squared TD error ``mean(w * (y - Q)^2)``; `HDDPG` makes it hysteretic."""
        return (weight * td.pow(2)).mean()

    def _actor_due(self) -> bool:
        """Whether this update also trains the actor (TD3 delays it)."""
        return True

    def _update(self, batch: Batch) -> dict[str, float]:
        obs, next_obs = to_tensor(batch.obs), to_tensor(batch.next_obs)
        action = to_tensor(batch.action)
        with torch.no_grad():
            y = self._target(next_obs, to_tensor(batch.reward), 1.0 - to_tensor(batch.done))
        weight = to_tensor(batch.weight)
        qs = self.critics(obs, action)  # (critics, B)
        tds = y - qs
        critic_loss = torch.stack([self._critic_loss(td, weight) for td in tds]).sum()
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        self.replay.update_priorities(batch.index, tds[0].detach().numpy())
        stats = {"loss": float(critic_loss.detach()), "q_mean": float(qs[0].detach().mean())}
        if self._actor_due():
            with frozen(self._critic_params):
                actor_loss = -self.critics.member(0, obs, self.actor.forward(obs)).mean()
            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()
            stats["actor_loss"] = float(actor_loss.detach())
        self._after_update()
        return stats

    def _after_update(self) -> None:
        if self._actor_due():  # the targets move with the actor (TD3: every `policy_delay` updates)
            for polyak in self._polyak:
                polyak(self.config.tau)

    # -- state -----------------------------------------------------------------------------
    def _modules(self) -> dict[str, Any]:
        return {"actor": self.actor.net, "critics": self.critics, "actor_target": self.actor_target,
                "critics_target": self.critics_target, "actor_opt": self.actor_opt, "critic_opt": self.critic_opt}

    def _extra_names(self) -> tuple[str, ...]:
        noise = self.actor.noise
        return tuple(f"noise_{k}" for k in noise.arrays()) if noise is not None else ()

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        noise = self.actor.noise
        return {f"noise_{k}": v for k, v in noise.arrays().items()} if noise is not None else {}

    def _load_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        if self.actor.noise is not None:
            self.actor.noise.load_arrays({k[len("noise_"):]: v for k, v in arrays.items() if k.startswith("noise_")})

    def _policy(self) -> DeterministicPolicy:
        """A copy of the actor: a `DeterministicPolicy` (with its exploration noise; ``deterministic=True`` is mu)."""
        policy = copy.deepcopy(self.actor)
        policy.version = self.updates
        return policy

