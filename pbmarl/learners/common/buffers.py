"""Replay buffers over `Trajectories` transitions: uniform and proportional-prioritised.

Both are numpy ring buffers that sample with the caller's `np.random.Generator`
and serialise to plain arrays (`state_arrays` / `load_state_arrays`), so a saved
learner resumes with exactly the same buffer.

An all-or-nothing step undoes what it wrote with a `Journal` (`mark` / `rollback`): while the
journal the last `mark` returned is alive, every row a write overwrites (and every priority it
changes) is kept, so a rollback puts back exactly those rows, not a copy of the whole buffer.

Example:
    >>> buf = ReplayBuffer(50_000, game.observation_shape, game.num_actions)
    >>> buf.add(trajectories)  # doctest: +SKIP
    >>> batch = buf.sample(128, rng)          # batch.obs, batch.action, ..., batch.weight, batch.index  # doctest: +SKIP
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pbmarl.rollout.trajectories import Trajectories

#: the per-transition arrays a buffer keeps
FIELDS = ("obs", "legal_mask", "action", "reward", "done", "next_obs", "next_legal_mask")


@dataclass(frozen=True)
class Transitions:
    """The per-transition arrays a buffer keeps (`FIELDS`): what `ReplayBuffer.add` reads, for transitions
    gathered one at a time (NFSP's), and the first fields of a sampled `Batch`."""

    obs: np.ndarray
    legal_mask: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    next_obs: np.ndarray
    next_legal_mask: np.ndarray

    def __len__(self) -> int:
        return len(self.action)


@dataclass(frozen=True)
class Batch(Transitions):
    """A sampled minibatch; `weight` are importance weights (ones for uniform replay)."""

    weight: np.ndarray
    index: np.ndarray


def check_memory(capacity: int, obs_dim: int, action_dim: int, *, who: str) -> None:
    """Refuse a replay of `capacity` rows that would not fit in this machine's memory (it is allocated whole),
    naming ``buffer_size`` and `who`."""
    need = capacity * (8 * obs_dim + 8 * max(action_dim, 1) + 11)  # obs, next_obs, action, reward, flags
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - platforms without sysconf
        return
    if need > have:
        raise ValueError(f"buffer_size={capacity:,} needs about {need / 2**30:.1f} GiB for {who}, more than this "
                         f"machine's {have / 2**30:.1f} GiB: lower buffer_size")


@dataclass(eq=False)
class Journal:
    """What writes changed since `ReplayBuffer.mark`: the buffer's position, size and top priority then,
    the old contents of every row overwritten since (in write order), and the old priorities and tree leaves
    of every slot whose priority changed. Recording stops when the journal is dropped (the buffer holds
    it weakly), so a buffer written outside a step keeps nothing."""

    pos: int
    size: int
    max_priority: float
    rows: list[tuple[int, tuple[np.ndarray, ...]]] = field(default_factory=list)
    priorities: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    written: int = 0


class ReplayBuffer:
    """A fixed-capacity ring buffer of transitions, sampled uniformly.

    Args:
        capacity: most transitions kept; the oldest are overwritten first.
        obs_shape: shape of one observation.
        num_actions: width of the legal masks.
        action_shape: shape of one action: ``()`` for a discrete index, ``(d,)`` for a Box action.
        action_dtype: int64 for discrete actions, float32 for Box actions.
    """

    def __init__(self, capacity: int, obs_shape: Sequence[int], num_actions: int, *,
                 action_shape: Sequence[int] = (), action_dtype: type = np.int64) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = int(capacity)
        shape = (self.capacity,) + tuple(obs_shape)
        self.obs = np.zeros(shape, np.float32)
        self.next_obs = np.zeros(shape, np.float32)
        self.legal_mask = np.zeros((self.capacity, num_actions), bool)
        self.next_legal_mask = np.zeros((self.capacity, num_actions), bool)
        self.action: np.ndarray = np.zeros((self.capacity, *action_shape), action_dtype)
        self.reward = np.zeros(self.capacity, np.float64)
        self.done = np.zeros(self.capacity, bool)
        self.size = 0
        self.pos = 0
        #: per-slot arrays an owner keeps beside the rows (Rainbow's n-step discounts): a rollback restores them too
        self.columns: dict[str, np.ndarray] = {}
        self._journal: weakref.ref[Journal] | None = None

    def __len__(self) -> int:
        return self.size

    def add(self, traj: Trajectories) -> np.ndarray:
        """Append every transition of `traj`; returns the slots they went to."""
        n = len(traj)
        if n > self.capacity:  # only the newest `capacity` transitions can be kept
            keep = slice(n - self.capacity, n)
            n = self.capacity
        else:
            keep = slice(0, n)
        slots = (self.pos + np.arange(n)) % self.capacity
        journal = self._journal() if self._journal is not None else None
        if journal is not None:
            for slot in slots:
                self._keep(journal, int(slot))
        for name in FIELDS:
            getattr(self, name)[slots] = getattr(traj, name)[keep]
        self.pos = int((self.pos + n) % self.capacity)
        self.size = int(min(self.size + n, self.capacity))
        return slots

    def append(self, obs: np.ndarray, action: np.ndarray | int, reward: float, done: bool, next_obs: np.ndarray,
               legal_mask: np.ndarray | bool = True, next_legal_mask: np.ndarray | bool = True) -> int:
        """Store one transition (the step-by-step path of the control learners); returns its slot."""
        slot = self.pos
        if self._journal is not None:
            journal = self._journal()
            if journal is not None:
                self._keep(journal, slot)
        self.obs[slot] = obs
        self.action[slot] = action
        self.reward[slot] = reward
        self.done[slot] = done
        self.next_obs[slot] = next_obs
        self.legal_mask[slot] = legal_mask
        self.next_legal_mask[slot] = next_legal_mask
        self.pos = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return slot

    # -- undoing a step's writes ---------------------------------------------
    def mark(self) -> Journal:
        """Start recording what writes change; `rollback` with the returned journal undoes them (see the module doc)."""
        journal = Journal(self.pos, self.size, float(getattr(self, "max_priority", 0.0)))
        self._journal = weakref.ref(journal)
        return journal

    def _row_arrays(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in FIELDS] + list(self.columns.values())

    def _keep(self, journal: Journal, slot: int) -> None:
        """Before `slot` is written: keep its old row if it holds one a rollback must bring back."""
        journal.written += 1
        if slot < journal.size and journal.written <= self.capacity:  # later writes only overwrite rows kept already
            journal.rows.append((slot, tuple(a[slot].copy() for a in self._row_arrays())))

    def rollback(self, journal: Journal) -> None:
        """Put the buffer back as it was when `journal` was made."""
        arrays = self._row_arrays()
        for slot, row in reversed(journal.rows):
            for array, value in zip(arrays, row):
                array[slot] = value
        self.pos, self.size = journal.pos, journal.size
        journal.rows.clear()
        journal.written = 0

    def _gather(self, index: np.ndarray, weight: np.ndarray) -> Batch:
        return Batch(**{name: getattr(self, name)[index] for name in FIELDS}, weight=weight, index=index)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """`batch_size` transitions drawn uniformly with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = rng.integers(self.size, size=batch_size)
        return self._gather(index, np.ones(batch_size))

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Uniform replay ignores priorities (prioritised replay overrides this)."""

    # -- save / load -------------------------------------------------------
    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to rebuild the buffer exactly, as arrays."""
        arrays = {name: getattr(self, name)[: self.size] for name in FIELDS}
        arrays["position"] = np.array([self.pos, self.size], np.int64)
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.pos, self.size = (int(x) for x in arrays["position"])
        if self.size > self.capacity:
            raise ValueError(f"saved buffer holds {self.size} transitions, more than this capacity {self.capacity}")
        for name in FIELDS:
            getattr(self, name)[: self.size] = arrays[name]


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritised replay (Schaul et al. 2016).

    Transition i is drawn with probability ``p_i^alpha / sum_j p_j^alpha`` where
    ``p_i = |td_error_i| + eps``; new transitions get the largest priority seen so
    far. Importance weights ``(N * P(i))^-beta``, normalised by their maximum,
    correct the bias. The ``p^alpha`` live in a sum tree (the paper's), so drawing a
    minibatch and updating its priorities cost O(batch * log capacity), not O(capacity).
    """

    def __init__(self, capacity: int, obs_shape: Sequence[int], num_actions: int, *, alpha: float = 0.6,
                 beta: float = 0.4, eps: float = 1e-3, action_shape: Sequence[int] = (),
                 action_dtype: type = np.int64) -> None:
        super().__init__(capacity, obs_shape, num_actions, action_shape=action_shape, action_dtype=action_dtype)
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta!r}")
        self.alpha, self.beta, self.eps = float(alpha), float(beta), float(eps)
        self.priority = np.zeros(self.capacity, np.float64)
        self.max_priority = 1.0
        #: leaves of the sum tree (a power of two >= capacity); node k's children are 2k and 2k + 1
        self._leaves = 1 << max(0, (self.capacity - 1).bit_length())
        self._tree = np.zeros(2 * self._leaves, np.float64)

    def _set(self, slots: np.ndarray, priority: np.ndarray | float) -> None:
        """Write raw priorities into `slots` and their ``p^alpha`` up the tree."""
        if self._journal is not None:
            journal = self._journal()
            if journal is not None:
                index = np.array(slots, dtype=np.int64).reshape(-1)
                journal.priorities.append((index, self.priority[index].copy(), self._tree[index + self._leaves].copy()))
        self.priority[slots] = priority
        tree = self._tree
        if np.ndim(slots) == 0 or len(slots) == 1:  # one transition (the step-by-step path): a scalar climb
            i = int(np.reshape(slots, -1)[0])
            node = i + self._leaves
            tree[node] = self.priority[i] ** self.alpha
            node >>= 1
            while node:
                tree[node] = tree[2 * node] + tree[2 * node + 1]
                node >>= 1
            return
        nodes = np.asarray(slots, dtype=np.int64) + self._leaves  # repeats write the same value: harmless
        tree[nodes] = self.priority[nodes - self._leaves] ** self.alpha
        while nodes[0] > 1:
            nodes >>= 1
            tree[nodes] = tree[2 * nodes] + tree[2 * nodes + 1]

    def add(self, traj: Trajectories) -> np.ndarray:
        slots = super().add(traj)
        if len(slots):
            self._set(slots, self.max_priority)
        return slots

    def append(self, obs: np.ndarray, action: np.ndarray | int, reward: float, done: bool, next_obs: np.ndarray,
               legal_mask: np.ndarray | bool = True, next_legal_mask: np.ndarray | bool = True) -> int:
        slot = super().append(obs, action, reward, done, next_obs, legal_mask, next_legal_mask)
        self._set(np.array([slot]), self.max_priority)
        return slot

    def rollback(self, journal: Journal) -> None:
        """Rows as `ReplayBuffer.rollback`; priorities and tree leaves back in reverse order, then the sums
        above them recomputed (each is its children's sum, so the tree is as it was, bit for bit)."""
        super().rollback(journal)
        if journal.priorities:
            for index, priority, leaf in reversed(journal.priorities):
                self.priority[index] = priority
                self._tree[index + self._leaves] = leaf
            nodes = np.unique(np.concatenate([i for i, _, _ in journal.priorities])) + self._leaves
            while len(nodes) and nodes[0] > 1:
                nodes = np.unique(nodes >> 1)
                self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]
            journal.priorities.clear()
        self.max_priority = journal.max_priority

    def probabilities(self) -> np.ndarray:
        """``P(i) = p_i^alpha / sum_j p_j^alpha`` over the stored transitions ``[size]``."""
        scaled = self.priority[: self.size] ** self.alpha
        return scaled / scaled.sum()

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        tree, total = self._tree, self._tree[1]
        u = rng.random(batch_size) * total
        node = np.ones(batch_size, np.int64)
        while node[0] < self._leaves:  # descend: right where u passes the left subtree's mass
            left = tree[2 * node]
            right = u >= left
            u = np.where(right, u - left, u)
            node = 2 * node + right
        index = np.minimum(node - self._leaves, self.size - 1)  # (rounding can only overshoot to the end)
        prob = tree[index + self._leaves] / total
        weight = (self.size * prob) ** -self.beta
        return self._gather(index, weight / weight.max())

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        p = np.abs(np.asarray(td_error, dtype=float)) + self.eps
        self._set(np.asarray(index), p)
        self.max_priority = max(self.max_priority, float(p.max()))

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = super().state_arrays()
        arrays["priority"] = self.priority[: self.size]
        arrays["max_priority"] = np.array([self.max_priority])
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        super().load_state_arrays(arrays)
        self.priority[:] = 0.0
        self._tree[:] = 0.0
        if self.size:
            self._set(np.arange(self.size), arrays["priority"])
        self.max_priority = float(arrays["max_priority"][0])
