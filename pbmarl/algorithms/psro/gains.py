"""Sampled progress of an outer loop: how much each new best response gains over the meta-strategy.

For the meta-strategy σ that an iteration's oracles answered, and a new member
``i`` of player ``p`` (a best response to σ₋ₚ), the gain read from the payoff table is

    g_p = u_p(i, σ₋ₚ) − u_p(σ),     u_p(i, σ₋ₚ) = Σ_{c₋ₚ} σ₋ₚ(c₋ₚ) U_p[i, c₋ₚ],   u_p(σ) = Σ_c σ(c) U_p[c],

over the members σ was defined on. Σ_p g_p is a sampled estimate of σ's NashConv
restricted to the responses found (a lower bound when the oracle is exact; an
estimate when it learns), the progress measure of PSRO for games too large to
measure exactly (Lanctot et al., 2017, "A Unified Game-Theoretic Approach to
Multiagent Reinforcement Learning", §3). The standard error propagates the cells'
standard errors, cells being independent samples:
``se(g_p)² = Σ σ₋ₚ² se[i, ·]² + Σ σ² se[·]²``.

Example:
    >>> import numpy as np
    >>> U = np.array([[[0., 0.], [-1., 1.]], [[2., -2.], [0., 0.]]])   # (2, 2, 2) payoffs
    >>> gains, se = br_gains(U, np.zeros_like(U), ([1.0], [1.0]), [(0, 1), (1, 1)])
    >>> [float(g) for g in gains], [float(s) for s in se]
    ([2.0, 1.0], [0.0, 0.0])
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np


def _outer(weights: Sequence[np.ndarray]) -> np.ndarray:
    return functools.reduce(np.multiply.outer, weights, np.array(1.0))


def br_gains(values: np.ndarray, stderr: np.ndarray, sigma: Sequence[Sequence[float]],
             new_members: Sequence[tuple[int, int]]) -> tuple[list[float], list[float]]:
    """Per new member ``(player, index)``: its gain over `sigma` and that gain's standard error.

    Args:
        values: payoffs ``[n_0, ..., n_{k-1}, k]`` (NaN where not evaluated).
        stderr: their standard errors, same shape (0 where exact, NaN with < 2 samples).
        sigma: the meta-strategy that was answered, one distribution per player over its first members.
        new_members: ``(player, index)`` of each new best response.
    """
    sig = [np.asarray(s, dtype=float) for s in sigma]
    sizes = [len(s) for s in sig]
    old = tuple(slice(0, n) for n in sizes)
    W = _outer(sig)
    gains, errors = [], []
    for p, i in new_members:
        row = tuple(i if q == p else slice(0, n) for q, n in enumerate(sizes))
        w = _outer([s for q, s in enumerate(sig) if q != p])
        u_new = float(np.sum(w * values[row][..., p]))
        u_meta = float(np.sum(W * values[old][..., p]))
        var = float(np.sum(w**2 * stderr[row][..., p] ** 2) + np.sum(W**2 * stderr[old][..., p] ** 2))
        gains.append(u_new - u_meta)
        errors.append(float(np.sqrt(var)))
    return gains, errors
