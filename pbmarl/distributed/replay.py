"""Ape-X's central replay: a (prioritised) `ReplayBuffer` hosted in a Ray actor, or in-process locally.

`ReplayProcess` is the actor's body: it owns the buffer. `RemoteReplay` is what the
learner holds in place of its buffer: it has the buffer's interface (`add`, `sample`,
`update_priorities`, `len`, `state_arrays` / `load_state_arrays`), so DQN's own update
runs unchanged against it. Nothing but `sample` and the state calls waits: `add` is sent
without waiting, and priority updates are held and travel with the next call (a sample
request or an add), so an update costs no call of its own. One caller's calls run in
order, so a draw always sees every add and priority update sent before it: the local and
the Ray backend draw the same minibatches. Once the learner announces its next draws
(`expect`), they come in groups of `prefetch`, and the next group is requested as soon as
one is handed out, so it is drawn while the learner trains on the one before (one group
behind on priorities, as Ape-X's prefetching learner is). Each draw takes its seed from
the learner's generator, so runs stay reproducible. Single transitions (`append`, the
control learners' path: Ape-X DDPG) are held here and sent together before the next call
that reads the replay.

An all-or-nothing round marks the replay (`mark`): the host journals what the round's writes
change, and `rollback` puts that back together with what this side held.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from pbmarl.hosting.hosted import Hosted
from pbmarl.protocols import ReplayStore
from pbmarl.rollout.trajectories import Trajectories

__all__ = ["RemoteReplay", "ReplayProcess"]

#: priority updates held by a `RemoteReplay`: (slots, TD errors) in the order they were made
Priorities = Sequence[tuple[np.ndarray, np.ndarray]]


class ReplayProcess:
    """Owns the buffer (the replay actor's body)."""

    def __init__(self, buffer: ReplayStore) -> None:
        self.buffer = copy.deepcopy(buffer)  # writable arrays (a Ray actor receives read-only ones)

    def add(self, traj: Trajectories) -> int:
        self.buffer.add(traj)
        return len(self.buffer)

    def append_rows(self, rows: list[tuple[Any, ...]]) -> int:
        for row in rows:
            self.buffer.append(*row)
        return len(self.buffer)

    def sample(self, batch_size: int, seed: int, priorities: Priorities = ()) -> Any:
        """One minibatch, drawn after applying the held `priorities`."""
        self._apply(priorities)
        return self.buffer.sample(batch_size, np.random.default_rng(seed))

    def sample_many(self, batch_size: int, seeds: list[int], priorities: Priorities = ()) -> list[Any]:
        """One minibatch per seed, all drawn at the priorities left by applying `priorities`."""
        self._apply(priorities)
        return [self.buffer.sample(batch_size, np.random.default_rng(s)) for s in seeds]

    def update_priorities_many(self, priorities: Priorities) -> None:
        """Apply priority updates in the order they were made."""
        self._apply(priorities)

    def _apply(self, priorities: Priorities) -> None:
        for index, td_error in priorities:
            self.buffer.update_priorities(index, td_error)

    def size(self) -> int:
        return len(self.buffer)

    def mark(self) -> None:
        """Start journalling the buffer's changes (`ReplayBuffer.mark`); the journal lives until the next mark."""
        self._journal = self.buffer.mark()

    def rollback(self) -> int:
        """Undo every change since the last `mark`."""
        self.buffer.rollback(self._journal)
        self._journal = self.buffer.mark()
        return len(self.buffer)

    def state_arrays(self) -> dict[str, np.ndarray]:
        return self.buffer.state_arrays()

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> int:
        self.buffer.load_state_arrays(arrays)
        return len(self.buffer)


class RemoteReplay:
    """A replay whose storage lives in a `ReplayProcess` (a Ray actor when ``backend="ray"``).

    It answers `pbmarl.protocols.ReplayStore`, so it stands where DQN and DDPG expect their buffer;
    it keeps no arrays of its own.

    Args:
        buffer: the (empty or filled) buffer to host; copied into the host.
        backend: "local" or "ray".
        prefetch: minibatches fetched per round trip to the replay, once the learner announces its
            next samples (`expect`): `sample` then hands out groups of up to `prefetch` minibatches
            drawn together, and requests the next group when it hands out the first minibatch of
            one. Group ``k + 1`` is thus drawn while the learner trains on group ``k``, at the
            priorities left by the updates up to group ``k - 1`` (as Ape-X's learner prefetches); a
            Ray replay costs one round trip per group instead of one per update, and the learner
            rarely waits for it. Both backends draw the same groups.
    """

    def __init__(self, buffer: ReplayStore, *, backend: str, prefetch: int = 1) -> None:  # no local storage
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be a positive int (minibatches per round trip), got {prefetch!r}")
        self.capacity = buffer.capacity
        self.size = len(buffer)
        self.host = Hosted(ReplayProcess, (buffer,), backend=backend, name="replay")
        self._rows: list[tuple[Any, ...]] = []  # appended transitions not sent yet
        self._priorities: list[tuple[np.ndarray, np.ndarray]] = []  # priority updates not sent yet
        self.prefetch = prefetch
        self._ready: list[Any] = []  # a fetched group's minibatches not handed out yet
        self._ready_size = 0
        self._next: tuple[int, Any] | None = None  # (batch size, future) of the group requested ahead
        self._unrequested = 0  # announced minibatches (`expect`) not requested from the replay yet

    def _flush_rows(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self.host.send("append_rows", rows)

    def _flush(self) -> None:
        """Send held transitions and priority updates, in the order they were made (`append` keeps the
        held priority updates younger than the held transitions)."""
        self._flush_rows()
        if self._priorities:
            self.host.send("update_priorities_many", self._take_priorities())

    def _take_priorities(self) -> list[tuple[np.ndarray, np.ndarray]]:
        held, self._priorities = self._priorities, []
        return held

    def __len__(self) -> int:
        return self.size

    def add(self, traj: Trajectories) -> np.ndarray:
        """Send `traj` to the replay (not waited for); returns no slots (they are the replay's business)."""
        self._flush()
        self.host.send("add", traj)
        self.size = min(self.size + min(len(traj), self.capacity), self.capacity)
        return np.zeros(0, np.int64)

    def append(self, obs: np.ndarray, action: np.ndarray | int, reward: float, done: bool, next_obs: np.ndarray,
               legal_mask: np.ndarray | bool = True, next_legal_mask: np.ndarray | bool = True) -> int:
        """Hold one transition; it reaches the replay before the next sample (returns -1: no slot known here)."""
        if self._priorities:  # keep the order: priority updates made before this transition go first
            self._flush()
        self._rows.append((obs, action, reward, done, next_obs, legal_mask, next_legal_mask))
        self.size = min(self.size + 1, self.capacity)
        return -1

    def _request(self, batch_size: int, rng: np.random.Generator) -> Any:
        """Ask for the next group of announced minibatches (its future), with the held priority updates."""
        k = min(self.prefetch, self._unrequested)
        self._unrequested -= k
        self._flush_rows()
        seeds = [int(x) for x in rng.integers(2**63 - 1, size=k)]
        return self.host.send("sample_many", int(batch_size), seeds, self._take_priorities())

    def sample(self, batch_size: int, rng: np.random.Generator) -> Any:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if not self._ready or self._ready_size != batch_size:
            if self._next is not None and self._next[0] == batch_size:
                future, self._next = self._next[1], None
            elif self._unrequested > 0:
                self._next = None
                future = self._request(batch_size, rng)
            else:  # nothing announced: one minibatch per round trip
                self._next, self._ready = None, []
                self._flush_rows()
                return self.host.call("sample", int(batch_size), int(rng.integers(2**63 - 1)), self._take_priorities())
            self._ready, self._ready_size = list(self.host.get(future)), batch_size
            if self._unrequested > 0:  # the next group is drawn while this one trains
                self._next = (batch_size, self._request(batch_size, rng))
        return self._ready.pop(0)

    def expect(self, n: int) -> None:
        """The learner samples `n` minibatches next: they are fetched in groups of up to `prefetch`, and no
        group reaches past them (so a checkpoint between rounds never leaves a fetched group unused)."""
        self._ready, self._next, self._unrequested = [], None, int(n)

    def mark(self) -> Any:
        """The host journals from here on; returns what this side holds, for `rollback`."""
        self.host.call("mark")
        return (self.size, list(self._rows), list(self._priorities), list(self._ready), self._ready_size, self._next,
                self._unrequested)

    def rollback(self, journal: Any) -> None:
        """Put the replay back as it was at the `mark` that returned `journal` (host and held writes)."""
        self.host.call("rollback")
        size, rows, priorities, ready, self._ready_size, self._next, self._unrequested = journal
        self.size, self._rows, self._priorities, self._ready = size, list(rows), list(priorities), list(ready)

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Hold a priority update; it travels with the next call to the replay."""
        self._priorities.append((np.asarray(index), np.asarray(td_error)))

    def state_arrays(self) -> dict[str, np.ndarray]:
        self._flush()
        return self.host.call("state_arrays")

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self._rows, self._priorities, self._ready, self._next = [], [], [], None
        self.size = int(self.host.call("load_state_arrays", arrays))

    def close(self) -> None:
        """Stop the replay actor."""
        self.host.close()
