"""Prioritised fictitious self-play (PFSP): pure functions over arrays of win rates.

From the league pseudocode of Vinyals et al. 2019, "Grandmaster level in StarCraft II
using multi-agent reinforcement learning" (Nature 575; supplementary ``pseudocode.py``):
an opponent ``B`` of a learner ``A`` is drawn with probability

    P(B) = f(P[A beats B]) / sum_C f(P[A beats C])

with one of the weightings

    f_hard(x)   = (1 - x)^2         ("squared": focus on the opponents A loses to)
    f_var(x)    = x (1 - x)         ("variance": opponents of about A's level)
    f_linear(x) = 1 - x
    f_capped(x) = min(0.5, 1 - x)   ("linear_capped": the league exploiters' weighting)

Where every weight is 0 (all win rates 1, or rates in {0, 1} under f_var) the
distribution is uniform, as in the pseudocode: never NaN.

Example:
    >>> pfsp([0.2, 0.5, 1.0], weighting="squared")
    array([0.7191..., 0.2808..., 0.        ])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def f_hard(x: np.ndarray) -> np.ndarray:
    """``(1 - x)^2``: weight of an opponent beaten with probability `x` (Vinyals et al. 2019)."""
    return np.square(1.0 - x)


def f_var(x: np.ndarray) -> np.ndarray:
    """``x (1 - x)``: largest for opponents of the learner's own level (Vinyals et al. 2019)."""
    return x * (1.0 - x)


def f_linear(x: np.ndarray) -> np.ndarray:
    """``1 - x``."""
    return 1.0 - x


def f_capped(x: np.ndarray) -> np.ndarray:
    """``min(0.5, 1 - x)``: the league exploiters' weighting (Vinyals et al. 2019)."""
    return np.minimum(0.5, 1.0 - x)


#: weighting name (as in the AlphaStar pseudocode) -> function
WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "squared": f_hard, "variance": f_var, "linear": f_linear, "linear_capped": f_capped,
}


def check_win_rates(win_rates: Sequence[float] | np.ndarray) -> np.ndarray:
    """`win_rates` as a float array, or ValueError naming the first bad entry (NaN, outside [0, 1])."""
    x = np.asarray(win_rates, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"win rates must be a 1-D sequence, got shape {x.shape}")
    bad = ~((x >= 0.0) & (x <= 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"win rates must lie in [0, 1]; entry {i} is {float(x[i])!r}")
    return x


def pfsp(win_rates: Sequence[float] | np.ndarray, *, weighting: str = "squared") -> np.ndarray:
    """The PFSP distribution over opponents with these win rates (see the module doc).

    Args:
        win_rates: ``P[A beats B]`` for each candidate opponent B, in [0, 1].
        weighting: ``"squared"`` (f_hard), ``"variance"`` (f_var), ``"linear"`` or ``"linear_capped"``.

    Returns:
        probabilities summing to 1 (uniform where every weight is below 1e-10).
    """
    fn = WEIGHTINGS.get(weighting)
    if fn is None:
        raise ValueError(f"unknown PFSP weighting {weighting!r}; accepted: {sorted(WEIGHTINGS)}")
    x = check_win_rates(win_rates)
    if len(x) == 0:
        raise ValueError("PFSP needs at least one candidate opponent, got no win rates")
    weights = fn(x)
    norm = float(weights.sum())
    if norm < 1e-10:
        return np.full(len(x), 1.0 / len(x))
    return np.asarray(weights / norm)


def remove_monotonic_suffix(win_rates: Sequence[float] | np.ndarray, items: Sequence[T]) -> tuple[np.ndarray, list[T]]:
    """Drop the longest suffix of snapshots whose win rates never rise (AlphaStar's forgetting check).

    The main agents' verification branch looks for old snapshots of an opponent that
    they have started losing to; the newest snapshots, against which the win rate only
    falls, are not evidence of forgetting. Returns the kept win rates and items (both
    empty when the whole sequence is non-increasing).
    """
    x = np.asarray(win_rates, dtype=float)
    if len(x) != len(items):
        raise ValueError(f"win_rates and items differ in length: {len(x)} vs {len(items)}")
    for i in range(len(x) - 1, 0, -1):
        if x[i - 1] < x[i]:
            return x[: i + 1], list(items[: i + 1])
    return np.zeros(0), []
