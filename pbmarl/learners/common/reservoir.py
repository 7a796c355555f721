"""`ReservoirBuffer`: a uniform sample of everything ever offered, in fixed memory (Vitter's Algorithm R).

NFSP's average policy is fit by supervised learning to the agent's own best-response
behaviour; a reservoir keeps every (observation, legal mask, action) offered so far with
equal probability, ``capacity / n`` after ``n`` offers (Vitter 1985, "Random sampling
with a reservoir", ACM TOMS 11(1), Algorithm R; Heinrich & Silver 2016, §4):

    item n (0-based) goes to slot n while n < capacity;
    afterwards it replaces slot j ~ U{0..n} if j < capacity, else it is dropped.

Example:
    >>> buf = ReservoirBuffer(1000, game.observation_shape, game.num_actions)
    >>> buf.add(obs, mask, action, rng)  # doctest: +SKIP
    >>> obs, mask, action = buf.sample(128, rng)  # doctest: +SKIP

An all-or-nothing step undoes what it offered with a `ReservoirJournal` (`mark` / `rollback`), as
`ReplayBuffer` does: while the journal the last `mark` returned is alive, the old contents of every slot
an offer overwrites are kept, so a rollback puts back those rows, not a copy of the whole reservoir.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class ReservoirJournal:
    """What offers changed since `ReservoirBuffer.mark`: the offers seen then, and the old (slot, obs, legal
    mask, action) of every kept row overwritten since, in write order. Recording stops when the journal is
    dropped (the reservoir holds it weakly)."""

    seen: int
    rows: list[tuple[int, np.ndarray, np.ndarray, int]] = field(default_factory=list)


class ReservoirBuffer:
    """A reservoir of (observation, legal mask, action) triples; see the module doc.

    Args:
        capacity: most items kept.
        obs_shape: shape of one observation.
        num_actions: width of the legal masks.
    """

    def __init__(self, capacity: int, obs_shape: Sequence[int], num_actions: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = int(capacity)
        start = min(self.capacity, 4096)  # storage doubles as it fills, so a 2M reservoir costs what it holds
        self.obs = np.zeros((start, *obs_shape), np.float32)
        self.legal_mask = np.zeros((start, num_actions), bool)
        self.action = np.zeros(start, np.int64)
        self.seen = 0
        """How many items have been offered in total."""
        self._journal: weakref.ref[ReservoirJournal] | None = None

    def __len__(self) -> int:
        return min(self.seen, self.capacity)

    def add(self, obs: np.ndarray, legal_mask: np.ndarray, action: int, rng: np.random.Generator) -> int | None:
        """Offer one item; returns the slot it went to, or None if it was dropped."""
        if self.seen < self.capacity:
            slot: int | None = self.seen
        else:
            j = int(rng.integers(self.seen + 1))
            slot = j if j < self.capacity else None
        self.seen += 1
        if slot is not None:
            if slot >= len(self.action):
                self._grow()
            journal = self._journal() if self._journal is not None else None
            if journal is not None and slot < min(journal.seen, self.capacity):  # a row the mark's reservoir held
                journal.rows.append((slot, self.obs[slot].copy(), self.legal_mask[slot].copy(), int(self.action[slot])))
            self.obs[slot] = obs
            self.legal_mask[slot] = legal_mask
            self.action[slot] = action
        return slot

    def mark(self) -> ReservoirJournal:
        """Start recording what offers change; `rollback` with the returned journal undoes them."""
        journal = ReservoirJournal(self.seen)
        self._journal = weakref.ref(journal)
        return journal

    def rollback(self, journal: ReservoirJournal) -> None:
        """Put the reservoir back as it was when `journal` was made (its last `mark`)."""
        if self._journal is None or self._journal() is not journal:
            raise ValueError("this journal is not the reservoir's latest mark: a later mark stopped its recording, "
                             "so it cannot undo the offers since")
        for slot, obs, legal_mask, action in reversed(journal.rows):
            self.obs[slot], self.legal_mask[slot], self.action[slot] = obs, legal_mask, action
        self.seen = journal.seen
        journal.rows.clear()

    def _grow(self) -> None:
        size = min(2 * len(self.action), self.capacity)
        for name in ("obs", "legal_mask", "action"):
            old = getattr(self, name)
            new = np.zeros((size, *old.shape[1:]), old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(obs, legal_mask, action)`` of `batch_size` items drawn uniformly with replacement."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty reservoir")
        idx = rng.integers(len(self), size=batch_size)
        return self.obs[idx], self.legal_mask[idx], self.action[idx]

    def state_arrays(self) -> dict[str, np.ndarray]:
        n = len(self)
        return {"obs": self.obs[:n], "legal_mask": self.legal_mask[:n], "action": self.action[:n],
                "seen": np.array([self.seen], np.int64)}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.seen = int(arrays["seen"][0])
        n = len(self)
        while len(self.action) < n:
            self._grow()
        self.obs[:n], self.legal_mask[:n], self.action[:n] = arrays["obs"], arrays["legal_mask"], arrays["action"]
