"""Whole episodes out of per-step replay rows, for recurrent agent networks.

`episode_grid` lays sampled rows out as ``[E, T]`` (episodes by time) so a GRU can be
unrolled from each episode's first step; `unroll_q` runs an agent network over the
grid, with each episode's last ``next_obs`` appended so that every step also gets the
Q-values of the step after it (what the TD target needs).

Example:
    >>> import numpy as np
    >>> order, grid, valid = episode_grid(np.array([5, 3, 5, 3, 3]), np.array([1, 0, 0, 2, 1]))
    >>> order.tolist(), grid.tolist(), valid.tolist()
    ([1, 4, 3, 2, 0], [[0, 1, 2], [3, 4, 0]], [[True, True, True], [True, True, False]])
"""

from __future__ import annotations

import numpy as np
import torch

from pbmarl.policies.recurrent import RecurrentQNet


def episode_grid(episode: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, grid, valid)``: rows sorted by (episode, time); ``grid [E, T]`` indexes that order, ``valid`` where.

    Raises:
        ValueError: an episode whose steps are not 0, 1, ..., L-1 (a partial episode cannot start a GRU).
    """
    order = np.lexsort((time, episode))
    ep, t = episode[order], time[order]
    _, lengths = np.unique(ep, return_counts=True)
    T = int(lengths.max()) if len(lengths) else 0
    valid = np.arange(T)[None, :] < lengths[:, None]
    if not np.array_equal(t, np.nonzero(valid)[1]):
        raise ValueError("replayed episodes must hold every step from t = 0 (a recurrent agent starts each from zero)")
    grid = np.zeros(valid.shape, dtype=np.int64)
    grid[valid] = np.arange(len(order))
    return order, grid, valid


def unroll_q(net: RecurrentQNet, obs: torch.Tensor, next_obs: torch.Tensor, grid: np.ndarray,
             valid: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, q_next)``, each ``[S, n, A]`` in grid order: Q at each step, and at the step after it.

    `obs`/`next_obs` ``[S, n, d]`` are already sorted by (episode, time) (the `order` of `episode_grid`).
    """
    E, T = grid.shape
    S, n, d = obs.shape
    lengths = valid.sum(axis=1)
    seq = torch.zeros(E, T + 1, n, d)
    g, v = torch.as_tensor(grid), torch.as_tensor(valid)
    seq[:, :T][v] = obs[g[v]]
    last = torch.as_tensor(grid[np.arange(E), lengths - 1])
    seq[torch.arange(E), torch.as_tensor(lengths)] = next_obs[last]
    q_seq = net.unroll(seq.permute(1, 0, 2, 3).reshape(T + 1, E * n, d)).view(T + 1, E, n, -1).permute(1, 0, 2, 3)
    return q_seq[:, :T][v], q_seq[:, 1:][v]
