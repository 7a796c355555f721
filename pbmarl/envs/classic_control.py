"""Numpy ports of Gymnasium's classic control environments that have no vectorised version.

`PendulumBatch` steps every copy of ``Pendulum-v1`` in one array operation with
Gymnasium's own equations, in the same order and the same dtypes (the torque is
float32, as the action space gives it), so each copy's observations, rewards and
flags equal those of ``gymnasium.make("Pendulum-v1")`` bit for bit; a copy reset with
seed ``s`` starts where ``env.reset(seed=s)`` does (Gymnasium's ``np_random(s)``).
`tests/test_env_batch.py` checks this against Gymnasium itself. ``RolloutPool(...,
stepper="instances")`` opts out (Gymnasium's own environments, one per copy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class PendulumBatch:
    """`num_envs` copies of Gymnasium's ``Pendulum-v1`` (its ``TimeLimit`` included).

    Dynamics (Gymnasium's ``PendulumEnv.step``): with torque ``u`` clipped to
    ``[-max_torque, max_torque]``, cost ``norm(th)^2 + 0.1 thdot^2 + 0.001 u^2``,
    ``thdot' = clip(thdot + (3g/(2l) sin th + 3/(m l^2) u) dt, -max_speed, max_speed)``,
    ``th' = th + thdot' dt``; observation ``[cos th, sin th, thdot]`` (float32); reward
    ``-cost``; never terminates; truncates after ``max_episode_steps``.
    """

    own_resets = False
    has_state = False

    def __init__(self, num_envs: int, *, g: float, m: float, l: float, dt: float, max_speed: float,
                 max_torque: float, max_episode_steps: int | None, agent: str) -> None:
        self.num_envs = int(num_envs)
        self.agents = (agent,)
        self.g, self.m, self.l, self.dt = g, m, l, dt
        self.max_speed, self.max_torque = max_speed, max_torque
        self.limit = max_episode_steps
        self.th = np.zeros(self.num_envs)
        self.thdot = np.zeros(self.num_envs)
        self.steps = np.zeros(self.num_envs, dtype=np.int64)

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        high = np.array([np.pi, 1.0])  # Gymnasium's DEFAULT_X, DEFAULT_Y
        for i, seed in zip(np.asarray(index).tolist(), np.asarray(seeds).tolist()):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))
            self.th[i], self.thdot[i] = rng.uniform(low=-high, high=high)
            self.steps[i] = 0

    def observations(self) -> list[np.ndarray]:
        return [np.stack([np.cos(self.th), np.sin(self.th), self.thdot], axis=1).astype(np.float32)]

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        th, thdot = self.th, self.thdot
        g, m, l, dt = self.g, self.m, self.l, self.dt
        u = np.clip(np.asarray(actions[0], dtype=np.float32).reshape(self.num_envs, -1), -self.max_torque,
                    self.max_torque)[:, 0]
        costs = (((th + np.pi) % (2 * np.pi)) - np.pi) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
        newthdot = thdot + (3 * g / (2 * l) * np.sin(th) + 3.0 / (m * l**2) * u) * dt
        newthdot = np.clip(newthdot, -self.max_speed, self.max_speed)
        self.th = th + newthdot * dt
        self.thdot = newthdot
        self.steps += 1
        trunc = self.steps >= self.limit if self.limit is not None else np.zeros(self.num_envs, dtype=bool)
        return (-costs).reshape(-1, 1), np.zeros(self.num_envs, dtype=bool), trunc

    def state(self) -> np.ndarray:
        raise ValueError("Gymnasium environments have no global state apart from the observation")


def pendulum_port(game: Any) -> Callable[[int], PendulumBatch] | None:
    """A `PendulumBatch` factory for a ``gym:Pendulum-v1`` game made exactly as Gymnasium makes it, else None."""
    if game.env_id != "Pendulum-v1" or not set(game.env_kwargs) <= {"g", "max_episode_steps"}:
        return None
    from gymnasium.envs.classic_control.pendulum import PendulumEnv

    env = game.make_env()
    base = env.unwrapped
    if type(base) is not PendulumEnv:
        return None
    params: dict[str, Any] = dict(g=base.g, m=base.m, l=base.l, dt=base.dt, max_speed=base.max_speed,
                                  max_torque=base.max_torque, max_episode_steps=game.max_episode_steps,
                                  agent=game.agents[0])
    env.close()
    return lambda num_envs: PendulumBatch(num_envs, **params)
