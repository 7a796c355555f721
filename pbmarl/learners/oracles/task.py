"""A learner's task (the best response it trains) and the counters its records keep over its whole life."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from pbmarl.policies.mixture import Mixture

__all__ = ["Life", "Task"]


@dataclass
class Task:
    """The best response being trained: who, against whom, and how far it has got."""

    index: int
    player: int
    opponents: list[Mixture | None]
    budget: int
    round: int = 0
    learner_steps: int = 0
    env_steps: int = 0
    updates: int = 0
    smoothed: float = math.nan
    best: float = -math.inf
    since_best: int = 0
    plateaued: bool = False
    recent: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("opponents")
        return data

    def copy(self) -> Task:
        return dataclasses.replace(self, opponents=list(self.opponents), recent=list(self.recent))


@dataclass
class Life:
    """What the learner's records count over its whole life (every task)."""

    env_steps: int = 0
    episodes: int = 0
    wall_time: float = 0.0
