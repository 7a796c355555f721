"""TD3: DDPG with twin critics, delayed actor updates and target policy smoothing (Fujimoto et al. 2018).

The three changes to `DDPG`, each one line of the update:

1. twin critics, and the target takes the smaller:
   ``y = r + gamma * (1 - done) * min_i Q'_i(s', a')``;
2. target policy smoothing: ``a' = clip(mu'(s') + clip(eps, -c, c), low, high)``,
   ``eps ~ N(0, target_noise)`` (both as fractions of half the action range);
3. the actor and the targets update once every ``policy_delay`` critic updates.

Example:
    >>> learner = pb.TD3(pb.load_game("gym:Pendulum-v1"), seed=0, budget=20_000)
    >>> records = learner.run()                # to the budget  # doctest: +SKIP
    >>> learner.evaluate(10, deterministic=True).mean[0]   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from pbmarl.config import NON_NEGATIVE, POSITIVE_INT, Rule
from pbmarl.learners.control.ddpg import DDPG, DDPGConfig


@dataclass(frozen=True)
class TD3Config(DDPGConfig):
    """TD3 options (plus DDPG's); defaults follow the paper and Stable-Baselines3."""

    policy_delay: int = 2
    """Critic updates per actor (and target) update."""
    target_noise: float = 0.2
    """Std of the smoothing noise on the target action, as a fraction of half the action range."""
    target_noise_clip: float = 0.5
    """Clip of that noise, same units."""

    checks: ClassVar[dict[str, Rule]] = {
        "policy_delay": POSITIVE_INT, "target_noise": NON_NEGATIVE, "target_noise_clip": NON_NEGATIVE,
    }


class TD3(DDPG):
    """Twin delayed DDPG for Box actions; see the module doc."""

    name = "td3"
    config_class = TD3Config
    config: TD3Config
    num_critics = 2

    def _target(self, next_obs: torch.Tensor, reward: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        half = torch.as_tensor(self.half_range)
        mean = self._target_action(next_obs)
        eps = torch.randn(mean.shape, generator=self.gen) * cfg.target_noise
        eps = eps.clamp(-cfg.target_noise_clip, cfg.target_noise_clip) * half
        next_action = torch.max(torch.min(mean + eps, torch.as_tensor(self.act_high)), torch.as_tensor(self.act_low))
        q_next = self.critics_target(next_obs, next_action).amin(0)
        return reward + cfg.gamma * live * q_next

    def _actor_due(self) -> bool:
        # `updates` counts finished updates; this one is number updates + 1
        return (self.updates + 1) % self.config.policy_delay == 0
