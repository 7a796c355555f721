"""Replay buffers over `Trajectories` transitions: uniform and proportional-prioritised.

Both are numpy ring buffers that sample with the caller's `np.random.Generator`
and serialise to plain arrays (`state_arrays` / `load_state_arrays`), so a saved
learner resumes with exactly the same buffer.

Example:
    >>> buf = ReplayBuffer(50_000, game.observation_shape, game.num_actions)
    >>> buf.add(trajectories)  # doctest: +SKIP
    >>> batch = buf.sample(128, rng)          # batch.obs, batch.action, ..., batch.weight, batch.index  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pbmarl.rollout.trajectories import Trajectories

#: the per-transition arrays a buffer keeps
FIELDS = ("obs", "legal_mask", "action", "reward", "done", "next_obs", "next_legal_mask")


@dataclass(frozen=True)
class Batch:
    """A sampled minibatch; `weight` are importance weights (ones for uniform replay)."""

    obs: np.ndarray
    legal_mask: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    next_obs: np.ndarray
    next_legal_mask: np.ndarray
    weight: np.ndarray
    index: np.ndarray


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
        for name in FIELDS:
            getattr(self, name)[slots] = getattr(traj, name)[keep]
        self.pos = int((self.pos + n) % self.capacity)
        self.size = int(min(self.size + n, self.capacity))
        return slots

    def append(self, obs: np.ndarray, action: np.ndarray | int, reward: float, done: bool, next_obs: np.ndarray,
               legal_mask: np.ndarray | bool = True, next_legal_mask: np.ndarray | bool = True) -> int:
        """Store one transition (the step-by-step path of the control learners); returns its slot."""
        slot = self.pos
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
