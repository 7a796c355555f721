"""Two-player zero-sum (and constant-sum) games by linear programming (HiGHS)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from pbmarl.solvers.inputs import payoff_scale

#: HiGHS feasibility tolerances; tighter than its 1e-7 default so NashConv lands near 1e-10
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def is_constant_sum(U: np.ndarray, *, tol: float = 1e-9) -> bool:
    """Whether a two-player table has ``U[..., 0] + U[..., 1]`` constant within ``tol`` x payoff range.

    Zero-sum is the common case; constant-sum games (win rates summing to 1) have the
    same equilibria as the zero-sum game ``(U0 - U1) / 2`` and are solved the same way.
    """
    if U.shape[-1] != 2:
        return False
    sums = U.sum(axis=-1)
    return bool(np.ptp(sums) <= tol * payoff_scale(U))


def zero_sum_matrix(U: np.ndarray) -> np.ndarray:
    """The row player's payoffs of the equivalent zero-sum game, ``(U0 - U1) / 2``."""
    return 0.5 * (U[..., 0] - U[..., 1])


def solve_zero_sum(M: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Maximin strategies of both players and the game value, for row payoffs `M` (m x n).

    The row player maximises ``v`` subject to ``M^T x >= v``; the column player minimises
    ``w`` subject to ``M y <= w``; both are solved with ``linprog(method="highs")`` on
    the matrix scaled to unit range, so the tolerances mean the same for any payoffs.

    Raises:
        RuntimeError: HiGHS reports a failure (its message and the matrix shape are named).

    Example:
        >>> x, y, v = solve_zero_sum(np.array([[1.0, -1.0], [-1.0, 1.0]]))
        >>> np.round(x, 6).tolist(), round(v, 9)
        ([0.5, 0.5], 0.0)
    """
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.size == 0 or not np.all(np.isfinite(M)):
        raise ValueError(f"M must be a non-empty finite matrix of row payoffs, got shape {M.shape}")
    scale = payoff_scale(M)
    shift = float(M.min())
    S = (M - shift) / scale  # entries in [0, 1]
    x = _maximin(S, "row")
    y = _maximin(-S.T, "column")
    return x, y, float(x @ M @ y)


def _maximin(S: np.ndarray, who: str) -> np.ndarray:
    """Maximin strategy of the player whose payoffs are the rows of `S`: max v s.t. S^T x >= v."""
    m, n = S.shape
    c = np.zeros(m + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-S.T, np.ones((n, 1))])
    A_eq = np.ones((1, m + 1))
    A_eq[0, -1] = 0.0
    bounds = [(0.0, None)] * m + [(None, None)]
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=[1.0], bounds=bounds,
                  method="highs", options=_HIGHS_OPTIONS)
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"the {who} player's LP for a {S.shape} zero-sum game failed: {res.message}")
    x = np.clip(res.x[:m], 0.0, None)
    return x / x.sum()
