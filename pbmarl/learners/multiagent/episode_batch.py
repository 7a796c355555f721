"""Whole episodes out of per-step replay rows, for recurrent agent networks.

`episode_grid` lays sampled rows out as ``[E, T]`` (episodes by time) so a GRU can be
unrolled from each episode's first step; `unroll_q` runs an agent network over the
grid, with each episode's last ``next_obs`` appended so that every step also gets the
Q-values of the step after it (what the TD target needs). For recurrent MAPPO, `sequence_grid`
lays each agent's episode out as one sequence and `unroll` runs a GRU along them.

Example:
    >>> import numpy as np
    >>> order, grid, valid = episode_grid(np.array([5, 3, 5, 3, 3]), np.array([1, 0, 0, 2, 1]))
    >>> order.tolist(), grid.tolist(), valid.tolist()
    ([1, 4, 3, 2, 0], [[0, 1, 2], [3, 4, 0]], [[True, True, True], [True, True, False]])
"""

from __future__ import annotations

import numpy as np
import torch

from pbmarl.policies.recurrent import RecurrentNet, RecurrentQNet
from pbmarl.rollout.trajectories import Trajectories


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


def sequence_grid(rows: Trajectories) -> tuple[np.ndarray, np.ndarray]:
    """``(grid [S, L], valid [S, L])``: each agent's episode as one sequence, ``grid`` holding its rows in time order.

    Raises:
        ValueError: rows without agent and time columns, or an agent's episode that does not start at t = 0.
    """
    if rows.agent is None or rows.time is None:
        raise ValueError("a recurrent MAPPO trains on multi-agent rows (agent and time columns), got rows without them")
    key = rows.episode.astype(np.int64) * (int(rows.agent.max(initial=0)) + 1) + rows.agent
    order, grid, valid = episode_grid(key, rows.time)
    return order[grid], valid


def unroll(net: RecurrentNet, x: torch.Tensor, grid: np.ndarray,
           valid: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """``(out [K, o], states [K, H], rows [K])``: `net` run along the sequences of `grid` from zero states, one entry
    per valid slot (row-major), with the row of `x` it belongs to."""
    v = torch.as_tensor(valid)
    k = grid[valid]
    seq = x.new_zeros(*grid.shape, x.shape[1])
    seq[v] = x[torch.as_tensor(k)]
    out, states = net(seq, net.initial(len(grid)))
    return out[v], states[v], k
