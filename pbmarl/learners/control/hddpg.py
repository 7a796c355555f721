"""HDDPG: DDPG with a hysteretic critic, Machin's cooperative-team variant.

The critic's TD errors ``delta = y - Q(s, a)`` are scaled by ``q_increase_rate``
where ``delta >= 0`` and by ``q_decrease_rate`` where ``delta < 0``
(`hysteretic_td_loss`). With a smaller decrease rate the critic is optimistic:
a low return caused by a teammate's exploration pulls the estimate down less
than a high return pushes it up (Matignon et al. 2007; Omidshafiei et al. 2017).
With both rates 1 it is DDPG.

Example:
    >>> learner = pb.HDDPG("gym:Pendulum-v1", seed=0, q_increase_rate=1.0, q_decrease_rate=0.1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from pbmarl.config import POSITIVE, Rule
from pbmarl.learners.control.ddpg import DDPG, DDPGConfig
from pbmarl.rl.value_learning import hysteretic_td_loss


@dataclass(frozen=True)
class HDDPGConfig(DDPGConfig):
    """HDDPG options (plus DDPG's)."""

    q_increase_rate: float = 1.0
    """Weight of the critic's positive TD errors (the target is above the estimate)."""
    q_decrease_rate: float = 0.1
    """Weight of its negative TD errors; smaller than `q_increase_rate` makes the critic optimistic."""

    checks: ClassVar[dict[str, Rule]] = {"q_increase_rate": POSITIVE, "q_decrease_rate": POSITIVE}


class HDDPG(DDPG):
    """Hysteretic DDPG for Box actions; see the module doc."""

    name = "hddpg"
    config_class = HDDPGConfig
    config: HDDPGConfig

    def _critic_loss(self, td: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        return hysteretic_td_loss(td, increase_rate=cfg.q_increase_rate, decrease_rate=cfg.q_decrease_rate,
                                  weight=weight)
