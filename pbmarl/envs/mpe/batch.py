"""Numpy ports of mpe2's ``simple_spread_v3``, ``simple_adversary_v3``, ``simple_reference_v3`` and
``simple_tag_v3``: every copy a worker holds, stepped in one array operation.

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

`TagBatch` ports ``simple_tag_v3``: everything collides (agents and obstacles, each with
its own size), adversaries accelerate by 3 up to speed 1, good agents by 4 up to 1.3
(mpe2's speed limit, applied after integration); adversaries share +10 per catch,
a good agent loses 10 per catch and its ``bound()`` penalty for leaving the arena.

`tests/test_env_batch.py` replays the same actions through mpe2 and compares every
observation, reward, flag and global state. Options the port does not cover
(partial observability, curriculum, benchmark data, rendering) fall back to mpe2
itself; ``RolloutPool(..., stepper="instances")`` opts out everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar

import numpy as np

from pbmarl.envs.mpe.world import MPEWorldBatch

B = TypeVar("B", bound=MPEWorldBatch)

#: simple_spread_v3 options the port reproduces, with the values it accepts
PORTED = {"N", "local_ratio", "max_cycles", "continuous_actions", "terminate_on_success", "dynamic_rescaling"}
TAG = {"num_good", "num_adversaries", "num_obstacles", "max_cycles", "continuous_actions", "terminate_on_success",
       "dynamic_rescaling"}
REFERENCE = {"local_ratio", "max_cycles", "continuous_actions", "dynamic_rescaling"}
ADVERSARY = {"N", "max_cycles", "continuous_actions", "dynamic_rescaling"}
NEUTRAL = {"render_mode": None, "benchmark_data": False, "curriculum": False, "num_agent_neighbors": None,
           "num_landmark_neighbors": None}


class SpreadBatch(MPEWorldBatch):
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


class AdversaryBatch(MPEWorldBatch):
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


class ReferenceBatch(MPEWorldBatch):
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


class TagBatch(MPEWorldBatch):
    """`num_envs` copies of ``simple_tag_v3``: adversaries chase good agents among obstacles; see the module doc."""

    def __init__(self, num_envs: int, *, num_good: int = 1, num_adversaries: int = 3, num_obstacles: int = 2,
                 max_cycles: int = 25, continuous_actions: bool = False, terminate_on_success: bool = False) -> None:
        self.num_envs = B = int(num_envs)
        self.adv, good, m = int(num_adversaries), int(num_good), int(num_obstacles)
        self.n = n = self.adv + good
        self.agents = tuple(f"adversary_{i}" for i in range(self.adv)) + tuple(f"agent_{i}" for i in range(good))
        self.max_cycles = int(max_cycles)
        self.continuous = bool(continuous_actions)
        self.terminate_on_success = bool(terminate_on_success)
        self.sizes = (0.075,) * self.adv + (0.05,) * good + (0.2,) * m
        self.sensitivities = np.array([3.0] * self.adv + [4.0] * good).reshape(1, n, 1)
        self.max_speeds = (1.0,) * self.adv + (1.3,) * good
        self.pairs = [(a, b) for a in range(n + m) for b in range(a + 1, n + m)]  # everything collides
        self.pos = np.zeros((B, n, 2))
        self.vel = np.zeros((B, n, 2))
        self.landmarks = np.zeros((B, m, 2))
        self.steps = np.zeros(B, dtype=np.int64)

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        n, m = self.n, self.landmarks.shape[1]
        for i, seed in zip(np.asarray(index).tolist(), np.asarray(seeds).tolist()):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))  # gymnasium's np_random
            self.pos[i] = rng.uniform(-1, +1, (n, 2))  # every agent, then every obstacle (within 0.9)
            self.landmarks[i] = rng.uniform(-0.9, +0.9, (m, 2))
            self.vel[i] = 0.0
            self.steps[i] = 0
        self._version += 1

    def _observe(self) -> list[np.ndarray]:
        B, n = self.num_envs, self.n
        out = []
        for i in range(n):
            me = self.pos[:, i]
            others = [o for o in range(n) if o != i]
            rel_lm = (self.landmarks - me[:, None, :]).reshape(B, -1)
            rel_ag = (self.pos[:, others] - me[:, None, :]).reshape(B, -1)
            good_vel = self.vel[:, [o for o in others if o >= self.adv]].reshape(B, -1)
            out.append(np.concatenate([self.vel[:, i], me, rel_lm, rel_ag, good_vel], axis=1).astype(np.float32))
        return out

    def _caught(self) -> np.ndarray:
        """``[N, good, adversaries]``: which good agent touches which adversary (mpe2's ``is_collision``)."""
        good, adv = self.pos[:, self.adv:], self.pos[:, : self.adv]
        return self._dist(good[:, :, None, :], adv[:, None, :, :]) < 0.05 + 0.075

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._move(actions)
        caught = self._caught()
        rewards = np.empty((self.num_envs, self.n))
        rewards[:, : self.adv] = (10 * caught.sum(axis=(1, 2)))[:, None]  # every adversary: +10 per catch
        for g in range(self.n - self.adv):
            rew = -10.0 * caught[:, g].sum(axis=1)
            for p in range(2):  # mpe2's bound(): leaving the arena costs
                x = np.abs(self.pos[:, self.adv + g, p])
                with np.errstate(over="ignore"):
                    far = np.minimum(np.exp(2 * x - 2), 10)
                rew = rew - np.where(x < 0.9, 0.0, np.where(x < 1.0, (x - 0.9) * 10, far))
            rewards[:, self.adv + g] = rew
        self.steps += 1
        trunc = self.steps >= self.max_cycles
        everyone_caught = np.all(np.any(caught, axis=2), axis=1)
        term = ~trunc & everyone_caught if self.terminate_on_success else np.zeros(self.num_envs, dtype=bool)
        return rewards, term, trunc


def _port(game: Any, env_name: str, cls: Callable[..., B], covered: set[str], neutral: Collection[str]
          ) -> Callable[[int], B] | None:
    """A factory of `cls` batches for a Parallel `env_name` game whose options are all `covered` or at
    their `neutral` values (`NEUTRAL`'s), else None (the game then steps through mpe2 itself)."""
    if game.env_name != env_name or game.api != "parallel":
        return None
    kwargs = dict(game.env_kwargs)
    defaults = {k: NEUTRAL[k] for k in neutral}
    if any(kwargs.get(k, v) != v for k, v in defaults.items()) or not set(kwargs) <= covered | set(defaults):
        return None
    options = {k: v for k, v in kwargs.items() if k in covered - {"dynamic_rescaling"}}  # rendering only
    return lambda num_envs: cls(num_envs, **options)


def tag_port(game: Any) -> Callable[[int], TagBatch] | None:
    """A `TagBatch` factory for a ``pettingzoo:simple_tag_v3`` Parallel game the port covers, else None."""
    return _port(game, "simple_tag_v3", TagBatch, TAG, NEUTRAL)


def reference_port(game: Any) -> Callable[[int], ReferenceBatch] | None:
    """A `ReferenceBatch` factory for a ``pettingzoo:simple_reference_v3`` Parallel game the port covers, else None."""
    return _port(game, "simple_reference_v3", ReferenceBatch, REFERENCE, ("render_mode", "benchmark_data"))


def adversary_port(game: Any) -> Callable[[int], AdversaryBatch] | None:
    """An `AdversaryBatch` factory for a ``pettingzoo:simple_adversary_v3`` Parallel game the port covers, else None."""
    return _port(game, "simple_adversary_v3", AdversaryBatch, ADVERSARY, set(NEUTRAL) - {"curriculum"})


def spread_port(game: Any) -> Callable[[int], SpreadBatch] | None:
    """A `SpreadBatch` factory for a ``pettingzoo:simple_spread_v3`` Parallel game the port covers, else None."""
    return _port(game, "simple_spread_v3", SpreadBatch, PORTED, NEUTRAL)
