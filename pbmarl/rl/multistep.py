"""Multi-step returns: GAE, discounted returns, n-step targets (rlax style: ``rlax/_src/multistep.py``).

Pure numpy functions over one flat batch of transitions, episodes contiguous and in time order,
each with its equation, its source and shape checks on entry; tested on their own
(tests/test_rl_multistep.py). `gae` and `discounted_returns` take whole episodes (the last
transition ends its episode), as `RolloutPool.collect` hands them; `nstep_targets` also takes
windows cut by a time limit or by the end of the data (`end`).

Example:
    >>> import numpy as np

__all__ = ["discounted_returns", "gae", "nstep_targets"]
    >>> discounted_returns(np.array([1.0, 1.0, 1.0]), np.array([False, False, True]), gamma=0.5)
    array([1.75, 1.5 , 1.  ])
    >>> nstep_targets(np.array([1.0, 1.0, 1.0]), np.array([False, False, True]), n=2, gamma=0.5)[0]
    array([1.5, 1.5, 1. ])
"""

from __future__ import annotations

import numpy as np


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
    """Generalised advantage estimates and value targets ``(advantages, returns)`` (Schulman et al. 2016, eq. 16).

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
    """Discounted return ``G_t = sum_k gamma^k r_{t+k}`` from every transition to the end of its episode
    (Sutton & Barto 2018, eq. 3.8); ``[T]`` in, ``[T]`` out."""
    reward, done = _check(reward, done)
    zeros = np.zeros_like(reward)
    return gae(reward, done, zeros, zeros, gamma=gamma, lam=1.0)[1]


def nstep_targets(reward: np.ndarray, done: np.ndarray, *, n: int, gamma: float,
                  end: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns over contiguous episodes: ``(returns, discounts, next_index)``.

    ``G_t = sum_{k<m} gamma^k r_{t+k}`` with ``m = min(n, steps until the episode
    stops)``; the bootstrap discount is ``gamma^m`` if the episode goes on after
    ``t+m-1`` and 0 if it terminated there; ``next_index = t+m-1`` names the
    transition whose next observation the target bootstraps from (Sutton & Barto
    2018, eq. 7.1; Hessel et al. 2018, Rainbow's multi-step loss).

    Args:
        reward: ``[T]`` rewards, episodes contiguous and in time order.
        done: ``[T]`` True where the episode terminated after this transition
            (no bootstrap).
        n: steps to look ahead (1: the one-step target).
        gamma: discount in [0, 1].
        end: ``[T]`` True where a window must stop without terminating (a time-limit
            truncation, or the last transition collected so far); `done` implies it.
    """
    reward = np.asarray(reward, dtype=float)
    done = np.asarray(done, dtype=bool)
    if reward.ndim != 1 or reward.shape != done.shape:
        raise ValueError(f"reward and done must be 1-D of equal length, got {reward.shape} and {done.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    stop = done.copy() if end is None else (np.asarray(end, dtype=bool) | done)
    T = len(reward)
    returns = np.zeros(T)
    discount = np.zeros(T)
    nxt = np.arange(T)
    alive = np.ones(T, bool)  # window of t still open
    scale = np.ones(T)
    for k in range(n):
        idx = np.arange(T) + k
        ok = alive & (idx < T)
        j = idx[ok]
        returns[ok] += scale[ok] * reward[j]
        nxt[ok] = j
        scale[ok] *= gamma
        closed = np.zeros(T, bool)
        closed[ok] = stop[j]
        alive = ok & ~closed
    discount = np.where(done[nxt], 0.0, scale)
    return returns, discount, nxt
