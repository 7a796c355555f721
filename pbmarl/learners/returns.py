"""Returns and advantages over `Trajectories` (numpy, no torch).

Trajectories from `RolloutPool.collect` hold whole episodes, contiguous and in
time order, so one backward pass with resets at ``done`` covers them all; there
is never a truncated episode to bootstrap.

Example:
    >>> adv, ret = gae(traj.reward, traj.done, values, next_values, gamma=1.0, lam=0.95)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from pbmarl.rollout.trajectories import Trajectories


def _check(reward: np.ndarray, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    reward = np.asarray(reward, dtype=float)
    done = np.asarray(done, dtype=bool)
    if reward.shape != done.shape or reward.ndim != 1:
        raise ValueError(f"reward and done must be 1-D of equal length, got shapes {reward.shape} and {done.shape}")
    if len(done) and not done[-1]:
        raise ValueError("the last transition must end its episode (done=True): collect whole episodes")
    return reward, done


def gae(
    reward: np.ndarray,
    done: np.ndarray,
    value: np.ndarray,
    next_value: np.ndarray,
    *,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and value targets ``(advantages, returns)``.

    ``delta_t = r_t + gamma * (1 - done_t) * V(s'_t) - V(s_t)`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``; returns are ``A + V``.
    With ``lam = 1`` the returns are the discounted Monte-Carlo returns.
    """
    reward, done = _check(reward, done)
    value = np.asarray(value, dtype=float)
    next_value = np.asarray(next_value, dtype=float)
    if value.shape != reward.shape or next_value.shape != reward.shape:
        raise ValueError(f"value and next_value must have shape {reward.shape}, got {value.shape} and {next_value.shape}")
    live = 1.0 - done
    delta = reward + gamma * live * next_value - value
    advantages = np.zeros_like(reward)
    running = 0.0
    for t in range(len(reward) - 1, -1, -1):
        running = delta[t] + gamma * lam * live[t] * running
        advantages[t] = running
    return advantages, advantages + value


def discounted_returns(reward: np.ndarray, done: np.ndarray, *, gamma: float) -> np.ndarray:
    """Discounted return from every transition to the end of its episode."""
    reward, done = _check(reward, done)
    zeros = np.zeros_like(reward)
    return gae(reward, done, zeros, zeros, gamma=gamma, lam=1.0)[1]


def learner_returns(traj: Trajectories) -> np.ndarray:
    """The learning seat's return in every collected episode ``[E]``."""
    return np.asarray(traj.episode_returns, dtype=float)[:, traj.player]
