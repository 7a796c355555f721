"""The two solvers that ignore payoffs: uniform (fictitious play) and last (self-play)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pbmarl.solvers.inputs import as_payoff_array


def solve_uniform(U: ArrayLike) -> tuple[np.ndarray, ...]:
    """Equal weight on every member of every population (PSRO with it is fictitious play).

    Example:
        >>> solve_uniform(np.zeros((2, 4, 2)))[1]
        array([0.25, 0.25, 0.25, 0.25])
    """
    U = as_payoff_array(U)
    return tuple(np.full(n, 1.0 / n) for n in U.shape[:-1])


def solve_last(U: ArrayLike) -> tuple[np.ndarray, ...]:
    """All mass on each player's newest member (PSRO with it is self-play).

    Example:
        >>> solve_last(np.zeros((2, 3, 2)))[1]
        array([0., 0., 1.])
    """
    U = as_payoff_array(U)
    out = []
    for n in U.shape[:-1]:
        w = np.zeros(n)
        w[-1] = 1.0
        out.append(w)
    return tuple(out)
