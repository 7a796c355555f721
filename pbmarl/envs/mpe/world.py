"""What every numpy port of an MPE world shares (`pbmarl.envs.mpe.batch`): mpe2's ``World.step``, batched.

`MPEWorldBatch` holds every copy's agent positions and velocities as ``[N, agents, 2]``
arrays and moves them as mpe2's ``World`` does, in the same order of floating-point
operations: the action force ``u`` (discrete ``0..4``: none, left, right, down, up; or
continuous ``(a2 - a1, a4 - a3)``) times the agent's sensitivity (mpe2's ``accel``, 5
where unset); the soft contact force ``c * d / |d| * k log(1 + exp(-(|d| - dmin) / k))``
between every colliding pair, added pair by pair in mpe2's order (landmarks never
move); ``pos += vel dt``, ``vel = vel (1 - damping) + force dt`` (mass 1), then the
speed limit where an agent has one. Observations are computed once per step.
"""

from __future__ import annotations

import numpy as np


class MPEWorldBatch:
    """What every ported MPE world shares: positions, velocities, controls, integration (mpe2's ``World``)."""

    own_resets = False
    has_state = True
    size = 0.15  # agent size
    dt, damping, contact_force, contact_margin = 0.1, 0.25, 1e2, 1e-3
    num_envs: int
    n: int  # agents
    continuous: bool
    pos: np.ndarray
    vel: np.ndarray
    pairs: list[tuple[int, int]]  # colliding entity pairs in mpe2's order (index >= n: landmark index - n)
    landmarks: np.ndarray
    sizes: tuple[float, ...] = ()  # per agent (default: `size` for all), then per landmark
    sensitivities: np.ndarray | float = 5.0  # per agent ([1, n, 1]): mpe2's accel, 5 where None
    max_speeds: tuple[float | None, ...] = ()  # per agent (default: none)

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
        return u * self.sensitivities

    def _move(self, actions: list[np.ndarray]) -> None:
        """mpe2's ``World.step``: action forces, pairwise contact forces, then integration (mass 1)."""
        self._version += 1
        force = [f + 0.0 for f in np.moveaxis(self._controls(actions), 1, 0)]  # mpe2: u + noise (0.0)
        n, k = self.n, self.contact_margin
        sizes = self.sizes or (self.size,) * n
        for a, b in self.pairs:  # World.apply_environment_force, pair by pair (landmarks do not move)
            pa = self.pos[:, a] if a < n else self.landmarks[:, a - n]
            pb = self.pos[:, b] if b < n else self.landmarks[:, b - n]
            delta = pa - pb
            dist = np.sqrt(np.sum(np.square(delta), axis=1))[:, None]
            dist_min = sizes[a] + sizes[b]
            penetration = np.logaddexp(0, -(dist - dist_min) / k) * k
            f = self.contact_force * delta / dist * penetration
            if a < n:
                force[a] = f + force[a]
            if b < n:
                force[b] = -f + force[b]
        self.pos = self.pos + self.vel * self.dt
        vel = self.vel * (1 - self.damping)
        vel = vel + (np.stack(force, axis=1) / 1.0) * self.dt
        for i, top in enumerate(self.max_speeds):  # World.integrate_state's speed limit
            if top is not None:
                v = vel[:, i]
                speed = np.sqrt(np.square(v[:, 0]) + np.square(v[:, 1]))[:, None]
                with np.errstate(divide="ignore", invalid="ignore"):
                    vel[:, i] = np.where(speed > top, v / speed * top, v)
        self.vel = vel

    @staticmethod
    def _dist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.sqrt(np.sum(np.square(x - y), axis=-1))
