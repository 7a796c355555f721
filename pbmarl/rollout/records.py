"""The runner's shared records: who plays a seat, what a run produced, episode bookkeeping.

Every engine (`tree_engine`, `state_engine`, `parallel_engine`) and the runner's entry
point import these from here, so no engine imports the runner that dispatches to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture, check_distribution
from pbmarl.rollout.trajectories import Trajectories


@dataclass(frozen=True, eq=False)
class Seat:
    """Who plays a seat: one policy, or several with weights (one drawn per episode)."""

    policies: tuple[Policy, ...]
    weights: np.ndarray

    @classmethod
    def of(cls, entry: Policy | Mixture | Seat) -> Seat:
        """A seat from a Policy, a Mixture or a Seat."""
        if isinstance(entry, Seat):
            return entry
        if isinstance(entry, Policy):
            return cls((entry,), np.ones(1))
        if isinstance(entry, Mixture):
            return cls(tuple(entry.policies), np.asarray(entry.weights, dtype=float))
        raise TypeError(f"a seat is played by a Policy or a Mixture, got {type(entry).__name__}: {entry!r}")

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", check_distribution(self.weights, len(self.policies)))

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Member indices for `size` new episodes."""
        if len(self.policies) == 1:
            return np.zeros(size, dtype=np.int64)
        return rng.choice(len(self.policies), size=size, p=self.weights).astype(np.int64)


@dataclass(frozen=True, eq=False)
class RunOutput:
    """What one runner call produced; episodes in the order they were started."""

    returns: np.ndarray  # [E, P]
    lengths: np.ndarray  # [E] decision steps
    steps: int
    trajectories: Trajectories | None = None


class EpisodeBook:
    """Episode bookkeeping shared by the engines: starts, budgets, finished returns."""

    def __init__(self, num_players: int, seats: Sequence[Seat], episodes: int | None, min_learner_steps: int | None) -> None:
        self.seats = seats
        self.episodes = episodes
        self.min_learner_steps = min_learner_steps
        self.started = 0
        self.steps = 0
        self.learner_steps = 0
        self._ids: list[np.ndarray] = []
        self._returns: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self.num_players = num_players

    def slots(self, num_envs: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                            np.ndarray]:
        """``N, active, ret, length, member, episode, last_t``: how many environments step together (at most
        `num_envs`, and no more than the episodes, or learner steps, asked for) and their per-slot bookkeeping,
        all empty: ``active [N]`` False, ``ret [N, P]``, ``length [N]`` and ``member [N, P]`` zero, the slot's
        ``episode [N]`` and last learner step ``last_t [N]`` -1."""
        N = int(max(1, min(num_envs, self.episodes if self.episodes is not None else self.min_learner_steps or 1)))
        P = self.num_players
        return (N, np.zeros(N, dtype=bool), np.zeros((N, P)), np.zeros(N, dtype=np.int64),
                np.zeros((N, P), dtype=np.int64), np.full(N, -1, dtype=np.int64), np.full(N, -1, dtype=np.int64))

    def may_start(self, wanted: int) -> int:
        """How many of `wanted` new episodes may start now."""
        if self.episodes is not None:
            return max(0, min(wanted, self.episodes - self.started))
        assert self.min_learner_steps is not None
        if self.learner_steps >= self.min_learner_steps:
            return 0
        if self.started >= 1_000 + 100 * self.min_learner_steps:
            raise RuntimeError(
                f"the learning seat made {self.learner_steps} decisions in {self.started} episodes, "
                f"short of {self.min_learner_steps}: does it ever act in this game?"
            )
        return wanted

    def start(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Episode ids and drawn members ``[count, P]`` for `count` new episodes."""
        ids = np.arange(self.started, self.started + count)
        self.started += count
        members = np.stack([seat.draw(rng, count) for seat in self.seats], axis=1) if count else np.zeros((0, self.num_players), np.int64)
        return ids, members

    def finish(self, ids: np.ndarray, returns: np.ndarray, lengths: np.ndarray) -> None:
        self._ids.append(np.asarray(ids))
        self._returns.append(np.asarray(returns, dtype=float).reshape(-1, self.num_players))
        self._lengths.append(np.asarray(lengths))

    def results(self) -> tuple[np.ndarray, np.ndarray]:
        """(returns [E, P], lengths [E]) ordered by episode id."""
        if not self._ids:
            return np.zeros((0, self.num_players)), np.zeros(0, np.int64)
        ids = np.concatenate(self._ids)
        order = np.argsort(ids)
        return np.concatenate(self._returns)[order], np.concatenate(self._lengths)[order].astype(np.int64)
