"""Work units: the pieces a pool call is split into, each seeded on its own.

A unit names its seats by policy *tokens* (the pool ships the policies behind them
to workers once per version), the number of episodes (or learner steps) to play,
and a seed derived from ``(call seed, unit key)`` with `np.random.SeedSequence`,
so a unit gives the same result whichever worker runs it, whenever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pbmarl.rollout.trajectories import Trajectories

#: unit kinds, first entry of every key
EVAL, FILL, COLLECT, COLLECT_GROUPS = 0, 1, 2, 3


@dataclass(frozen=True)
class SeatRef:
    """A seat by reference: member tokens and their weights (one member -> a plain policy)."""

    tokens: tuple[str, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class GroupsRef:
    """A multi-agent unit's dispatch: the mapping (as its spec), each group's seat, the learning groups."""

    assignment: tuple[tuple[str, str], ...]
    agent_id: bool
    pad: bool
    seats: tuple[tuple[str, SeatRef], ...]
    learning: tuple[str, ...]
    stepper: str = "auto"  # which route steps the copies (`pbmarl.envs.batch`)
    whole_episodes: bool = True  # False: exactly the unit's steps, running episodes cut there

    def mapping_spec(self) -> dict[str, Any]:
        return {"assignment": dict(self.assignment), "agent_id": self.agent_id, "pad": self.pad}


@dataclass(frozen=True)
class WorkUnit:
    """One independently seeded piece of a pool call.

    `key` is a tuple of non-negative ints, unique within the call (e.g.
    ``(FILL, round, i0, i1, chunk)``); with the call's `entropy` it seeds the unit.
    """

    key: tuple[int, ...]
    entropy: int
    seats: tuple[SeatRef, ...]
    episodes: int | None = None
    learner: int | None = None
    min_learner_steps: int | None = None
    call: int = 0
    groups: GroupsRef | None = None

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(entropy=self.entropy, spawn_key=self.key))

    @property
    def tokens(self) -> set[str]:
        seats = list(self.seats) + ([ref for _, ref in self.groups.seats] if self.groups is not None else [])
        return {t for seat in seats for t in seat.tokens}


@dataclass(frozen=True, eq=False)
class UnitResult:
    """What a worker sends back for one unit."""

    key: tuple[int, ...]
    returns: np.ndarray  # [E, P]
    lengths: np.ndarray  # [E]
    steps: int
    trajectories: Trajectories | None = None
    worker: Any = None
    groups: dict[str, Trajectories] | None = None


def chunks(total: int, size: int) -> list[int]:
    """Split `total` into pieces of at most `size` (all full but the last)."""
    if total <= 0:
        return []
    full, rest = divmod(int(total), int(size))
    return [int(size)] * full + ([rest] if rest else [])
