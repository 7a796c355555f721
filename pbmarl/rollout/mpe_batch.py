"""Numpy ports of mpe2's ``simple_spread_v3``, ``simple_adversary_v3`` and ``simple_reference_v3``: every
copy a worker holds, stepped in one array operation.

mpe2 steps one world at a time in Python (a loop over entity pairs for collisions,
one small array per agent), which costs far more than the policy. `SpreadBatch`
holds the positions and velocities of all copies as ``[N, agents, 2]`` arrays and
does what mpe2's ``SimpleEnv`` / ``World.step`` / ``simple_spread.Scenario`` do, in
the same order of floating-point operations, so that it reproduces mpe2 exactly:

- reset with seed ``s``: mpe2's ``np_random(s)`` draws every agent's position, then
  every landmark's, from ``uniform(-1, 1)``; velocities and communication start at 0;
- a step: discrete actions ``0..4`` (none, left, right, down, up) or continuous ones
  ``u = (a2 - a1, a4 - a3)``, times the sensitivity 5; the soft contact force
  ``c * d / |d| * k log(1 + exp(-(|d| - 2 size) / k))`` between every pair of agents
  (landmarks do not collide), added in mpe2's pair order; damping 0.25, ``dt = 0.1``;
- rewards ``(1 - local_ratio) * global + local_ratio * local`` with ``global = -sum``
  over landmarks of the nearest agent's distance and ``local = -(other agents within
  2 size)``; truncation after ``max_cycles`` steps, termination (with
  ``terminate_on_success``) when every landmark has an agent within 0.1;
- observations ``[vel, pos, landmark - pos, other - pos, other comm]`` (float32) and
  ``state()`` their concatenation over agents.

`AdversaryBatch` does the same for ``simple_adversary_v3`` (no collisions there; the
goal landmark is drawn first at reset, as mpe2 draws it; rewards are mpe2's shaped
ones: the adversary ``-|adversary - goal|``, good agents ``sum |adversary - goal| -
min |good agent - goal|``; observations ``[goal - pos,] landmark - pos, other - pos``).

`ReferenceBatch` ports ``simple_reference_v3``: two agents that move and speak (discrete
actions ``move + 5 * word``, or 5 movement and 10 word values), each told by colour
which landmark its partner must reach (two goals drawn first at reset); rewards mix
``-|partner - goal|`` and its mean over both agents by ``local_ratio``.

`tests/test_env_batch.py` replays the same actions through mpe2 and compares every
observation, reward, flag and global state. Options the port does not cover
(partial observability, curriculum, benchmark data, rendering) fall back to mpe2
itself; ``RolloutPool(..., stepper="instances")`` opts out everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: simple_spread_v3 options the port reproduces, with the values it accepts
PORTED = {"N", "local_ratio", "max_cycles", "continuous_actions", "terminate_on_success", "dynamic_rescaling"}
REFERENCE = {"local_ratio", "max_cycles", "continuous_actions", "dynamic_rescaling"}
ADVERSARY = {"N", "max_cycles", "continuous_actions", "dynamic_rescaling"}
NEUTRAL = {"render_mode": None, "benchmark_data": False, "curriculum": False, "num_agent_neighbors": None,
           "num_landmark_neighbors": None}


class _MPEBatch:
    """What every ported MPE world shares: positions, velocities, controls, integration (mpe2's ``World``)."""

    own_resets = False
    has_state = True
    size = 0.15  # agent size
    dt, damping, contact_force, contact_margin, sensitivity = 0.1, 0.25, 1e2, 1e-3, 5.0
    num_envs: int
    n: int  # agents
    continuous: bool
    pos: np.ndarray
    vel: np.ndarray
    pairs: list[tuple[int, int]]  # colliding agent pairs, in mpe2's order

    _version = 0  # bumped by every reset and step: observations are computed once per version
    _cached: tuple[int, list[np.ndarray]] | None = None

    def observations(self) -> list[np.ndarray]:
        if self._cached is None or self._cached[0] != self._version:
            self._cached = (self._version, self._observe())
        return self._cached[1]

    def _observe(self) -> list[np.ndarray]:
        raise NotImplementedError

    def state(self) -> np.ndarray:
        return np.concatenate(self.observations(), axis=1)

    def _controls(self, actions: list[np.ndarray]) -> np.ndarray:
        B = self.num_envs
        u = np.zeros((B, self.n, 2))
        for i, a in enumerate(actions):
            if self.continuous:
                a = np.asarray(a).reshape(B, -1)
                u[:, i, 0] += a[:, 2] - a[:, 1]
                u[:, i, 1] += a[:, 4] - a[:, 3]
            else:
                a = np.asarray(a).reshape(B)
                u[a == 1, i, 0] = -1.0
                u[a == 2, i, 0] = +1.0
                u[a == 3, i, 1] = -1.0
                u[a == 4, i, 1] = +1.0
        return u * self.sensitivity

    def _move(self, actions: list[np.ndarray]) -> None:
        """mpe2's ``World.step``: action forces, pairwise contact forces, then integration (mass 1)."""
        self._version += 1
        force = [f + 0.0 for f in np.moveaxis(self._controls(actions), 1, 0)]  # mpe2: u + noise (0.0)
        dist_min = self.size + self.size
        k = self.contact_margin
        for a, b in self.pairs:  # World.apply_environment_force, pair by pair
            delta = self.pos[:, a] - self.pos[:, b]
            dist = np.sqrt(np.sum(np.square(delta), axis=1))[:, None]
            penetration = np.logaddexp(0, -(dist - dist_min) / k) * k
            f = self.contact_force * delta / dist * penetration
            force[a] = f + force[a]
            force[b] = -f + force[b]
        self.pos = self.pos + self.vel * self.dt
        vel = self.vel * (1 - self.damping)
        self.vel = vel + (np.stack(force, axis=1) / 1.0) * self.dt

    @staticmethod
    def _dist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.sqrt(np.sum(np.square(x - y), axis=-1))


class SpreadBatch(_MPEBatch):
    """`num_envs` copies of ``simple_spread_v3``; see the module doc."""

    capture = 0.1

    def __init__(self, num_envs: int, *, N: int = 3, local_ratio: float = 0.5, max_cycles: int = 25,
                 continuous_actions: bool = False, terminate_on_success: bool = False) -> None:
        self.num_envs = B = int(num_envs)
        self.n = int(N)
        self.agents = tuple(f"agent_{i}" for i in range(self.n))
        self.local_ratio = float(local_ratio)
        self.max_cycles = int(max_cycles)
        self.continuous = bool(continuous_actions)
        self.terminate_on_success = bool(terminate_on_success)
        self.pos = np.zeros((B, self.n, 2))
        self.vel = np.zeros((B, self.n, 2))
        self.landmarks = np.zeros((B, self.n, 2))
        self.steps = np.zeros(B, dtype=np.int64)
        self.pairs = [(a, b) for a in range(self.n) for b in range(a + 1, self.n)]

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        n = self.n
        for i, seed in zip(np.asarray(index).tolist(), np.asarray(seeds).tolist()):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))  # gymnasium's np_random
            draws = rng.uniform(-1, +1, (2 * n, 2))  # every agent, then every landmark, in order
            self.pos[i], self.landmarks[i] = draws[:n], draws[n:]
            self.vel[i] = 0.0
            self.steps[i] = 0
        self._version += 1

    def _observe(self) -> list[np.ndarray]:
        B, n = self.num_envs, self.n
        comm = np.zeros((B, 2 * (n - 1)))
        out = []
        for i in range(n):
            me = self.pos[:, i]
            rel_lm = (self.landmarks - me[:, None, :]).reshape(B, -1)
            others = [o for o in range(n) if o != i]
            rel_ag = (self.pos[:, others] - me[:, None, :]).reshape(B, -1)
            out.append(np.concatenate([self.vel[:, i], me, rel_lm, rel_ag, comm], axis=1).astype(np.float32))
        return out

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._move(actions)
        rewards = self._rewards()
        self.steps += 1
        trunc = self.steps >= self.max_cycles
        term = ~trunc & self._covered() if self.terminate_on_success else np.zeros(self.num_envs, dtype=bool)
        return rewards, term, trunc

    def _nearest(self) -> np.ndarray:
        """``[N, landmarks]``: each landmark's distance to its nearest agent."""
        d = np.stack([self._dist(self.pos, self.landmarks[:, j][:, None, :]) for j in range(self.n)], axis=1)
        return d.min(axis=2)

    def _covered(self) -> np.ndarray:
        return np.all(self._nearest() < self.capture, axis=1)

    def _rewards(self) -> np.ndarray:
        nearest = self._nearest()
        glob = np.zeros(self.num_envs)
        for j in range(self.n):  # rew -= min(dists), landmark by landmark
            glob = glob - nearest[:, j]
        out = np.zeros((self.num_envs, self.n))
        for i in range(self.n):
            local = np.zeros(self.num_envs)
            for o in range(self.n):
                if o != i:
                    local = local - 1.0 * (self._dist(self.pos[:, o], self.pos[:, i]) < self.size + self.size)
            out[:, i] = glob * (1 - self.local_ratio) + local * self.local_ratio
        return out


class AdversaryBatch(_MPEBatch):
    """`num_envs` copies of ``simple_adversary_v3`` (one adversary, `N` good agents, `N` landmarks); see the module doc."""

    def __init__(self, num_envs: int, *, N: int = 2, max_cycles: int = 25, continuous_actions: bool = False) -> None:
        self.num_envs = B = int(num_envs)
        self.n = int(N) + 1
        self.agents = ("adversary_0",) + tuple(f"agent_{i}" for i in range(int(N)))
        self.max_cycles = int(max_cycles)
        self.continuous = bool(continuous_actions)
        self.pos = np.zeros((B, self.n, 2))
        self.vel = np.zeros((B, self.n, 2))
        self.landmarks = np.zeros((B, int(N), 2))
        self.goal = np.zeros(B, dtype=np.int64)
        self.steps = np.zeros(B, dtype=np.int64)
        self.pairs = []  # nothing collides in simple_adversary

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        n, m = self.n, self.landmarks.shape[1]
        for i, seed in zip(np.asarray(index).tolist(), np.asarray(seeds).tolist()):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))  # gymnasium's np_random
            self.goal[i] = int(rng.integers(m))  # the goal first, then every agent, then every landmark
            draws = rng.uniform(-1, +1, (n + m, 2))
            self.pos[i], self.landmarks[i] = draws[:n], draws[n:]
            self.vel[i] = 0.0
            self.steps[i] = 0
        self._version += 1

    def _goal(self) -> np.ndarray:
        return self.landmarks[np.arange(self.num_envs), self.goal]

    def _observe(self) -> list[np.ndarray]:
        B, n = self.num_envs, self.n
        goal = self._goal()
        out = []
        for i in range(n):
            me = self.pos[:, i]
            rel_lm = (self.landmarks - me[:, None, :]).reshape(B, -1)
            rel_ag = (self.pos[:, [o for o in range(n) if o != i]] - me[:, None, :]).reshape(B, -1)
            parts = [rel_lm, rel_ag] if i == 0 else [goal - me, rel_lm, rel_ag]
            out.append(np.concatenate(parts, axis=1).astype(np.float32))
        return out

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._move(actions)
        goal = self._goal()
        d = self._dist(self.pos, goal[:, None, :])  # [N, agents]: each agent's distance to the goal
        adv = 0 + d[:, 0]  # sum over the (one) adversary, as Python's sum starts from 0
        good = -d[:, 1:].min(axis=1)
        rewards = np.empty((self.num_envs, self.n))
        rewards[:, 0] = -d[:, 0]
        rewards[:, 1:] = (good + adv)[:, None]
        self.steps += 1
        return rewards, np.zeros(self.num_envs, dtype=bool), self.steps >= self.max_cycles


class ReferenceBatch(_MPEBatch):
    """`num_envs` copies of ``simple_reference_v3``: two speaking agents, three landmarks; see the module doc."""

    colors = np.array([[0.75, 0.25, 0.25], [0.25, 0.75, 0.25], [0.25, 0.25, 0.75]])  # the landmarks' colours
    dim_c = 10

    def __init__(self, num_envs: int, *, local_ratio: float = 0.5, max_cycles: int = 25,
                 continuous_actions: bool = False) -> None:
        self.num_envs = B = int(num_envs)
        self.n = 2
        self.agents = ("agent_0", "agent_1")
        self.local_ratio = float(local_ratio)
        self.max_cycles = int(max_cycles)
        self.continuous = bool(continuous_actions)
        self.pos = np.zeros((B, 2, 2))
        self.vel = np.zeros((B, 2, 2))
        self.comm = np.zeros((B, 2, self.dim_c))
        self.landmarks = np.zeros((B, 3, 2))
        self.goal = np.zeros((B, 2), dtype=np.int64)  # each agent's goal_b: the landmark its partner must reach
        self.steps = np.zeros(B, dtype=np.int64)
        self.pairs = []  # nothing collides in simple_reference

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        for i, seed in zip(np.asarray(index).tolist(), np.asarray(seeds).tolist()):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))  # gymnasium's np_random
            self.goal[i] = [int(rng.integers(3)), int(rng.integers(3))]  # both goals, then agents, then landmarks
            draws = rng.uniform(-1, +1, (5, 2))
            self.pos[i], self.landmarks[i] = draws[:2], draws[2:]
            self.vel[i] = 0.0
            self.comm[i] = 0.0
            self.steps[i] = 0
        self._version += 1

    def _observe(self) -> list[np.ndarray]:
        B = self.num_envs
        out = []
        for i in range(2):
            rel_lm = (self.landmarks - self.pos[:, i][:, None, :]).reshape(B, -1)
            color = self.colors[self.goal[:, i]]
            out.append(np.concatenate([self.vel[:, i], rel_lm, color, self.comm[:, 1 - i]], axis=1).astype(np.float32))
        return out

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        B = self.num_envs
        if self.continuous:
            acts = [np.asarray(a).reshape(B, -1) for a in actions]
            self._move(acts)
            self.comm = np.stack([a[:, 5:] + 0.0 for a in acts], axis=1).astype(float)
        else:
            words = [np.asarray(a).reshape(B) for a in actions]
            self._move([a % 5 for a in words])
            self.comm = np.zeros((B, 2, self.dim_c))
            for i, a in enumerate(words):
                self.comm[np.arange(B), i, a // 5] = 1.0
        targets = self.landmarks[np.arange(B)[:, None], self.goal]  # [N, 2, 2]: each agent's goal_b
        own = -self._dist(self.pos[:, ::-1], targets)  # agent i: -|partner - its goal_b|
        glob = (0 + own[:, 0] + own[:, 1]) / 2
        rewards = glob[:, None] * (1 - self.local_ratio) + own * self.local_ratio
        self.steps += 1
        return rewards, np.zeros(B, dtype=bool), self.steps >= self.max_cycles


def reference_port(game: Any) -> Callable[[int], ReferenceBatch] | None:
    """A `ReferenceBatch` factory for a ``pettingzoo:simple_reference_v3`` Parallel game the port covers, else None."""
    if game.env_name != "simple_reference_v3" or game.api != "parallel":
        return None
    kwargs = dict(game.env_kwargs)
    if kwargs.get("render_mode") is not None or kwargs.get("benchmark_data", False) \
            or not set(kwargs) <= REFERENCE | {"render_mode", "benchmark_data"}:
        return None
    options = {k: v for k, v in kwargs.items() if k in REFERENCE - {"dynamic_rescaling"}}
    return lambda num_envs: ReferenceBatch(num_envs, **options)


def adversary_port(game: Any) -> Callable[[int], AdversaryBatch] | None:
    """An `AdversaryBatch` factory for a ``pettingzoo:simple_adversary_v3`` Parallel game the port covers, else None."""
    if game.env_name != "simple_adversary_v3" or game.api != "parallel":
        return None
    kwargs = dict(game.env_kwargs)
    neutral = {k: v for k, v in NEUTRAL.items() if k != "curriculum"}
    if any(kwargs.get(k, v) != v for k, v in neutral.items()) or not set(kwargs) <= ADVERSARY | set(neutral):
        return None
    options = {k: v for k, v in kwargs.items() if k in ADVERSARY - {"dynamic_rescaling"}}
    return lambda num_envs: AdversaryBatch(num_envs, **options)


def spread_port(game: Any) -> Callable[[int], SpreadBatch] | None:
    """A `SpreadBatch` factory for a ``pettingzoo:simple_spread_v3`` Parallel game the port covers, else None."""
    if game.env_name != "simple_spread_v3" or game.api != "parallel":
        return None
    kwargs = dict(game.env_kwargs)
    if any(kwargs.get(k, v) != v for k, v in NEUTRAL.items()) or not set(kwargs) <= PORTED | set(NEUTRAL):
        return None
    options = {k: v for k, v in kwargs.items() if k in PORTED - {"dynamic_rescaling"}}  # rendering only
    return lambda num_envs: SpreadBatch(num_envs, **options)
