"""Rectified Nash (Balduzzi et al. 2019): whom each supported member should train against.

PSRO-rN trains one new policy per member of the Nash support, against the Nash mixture
of the opponents that member beats or ties. "Beats or ties" is OpenSpiel's rule
(`psro_v2.strategy_selectors.rectified_selector`): member i of player p beats or ties
opponent j when ``U_p(i, j) >= U_{-p}(i, j)``, i.e. when p's payoff is at least the
average of the two players' payoffs. In a zero-sum game that is ``U_p(i, j) >= 0``,
Balduzzi et al.'s ``phi(i, j) >= 0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from pbmarl.solvers.inputs import as_payoff_array, payoff_scale
from pbmarl.solvers.nash import NashOptions, nash_equilibrium
from pbmarl.solvers.result import SolverResult

if TYPE_CHECKING:
    from typing_extensions import Unpack


def rectified_opponents(
    U: np.ndarray, sigma: tuple[np.ndarray, np.ndarray], *, support_tol: float = 1e-9, tie_tol: float = 1e-9
) -> tuple[tuple[dict[int, np.ndarray], ...], list[tuple[int, int]]]:
    """Per player, ``{member: opponent distribution}`` for every member in its Nash support.

    Args:
        U: two-player payoff array ``(n_0, n_1, 2)``.
        sigma: the Nash distributions of both players.
        support_tol: members with more probability than this are in the support.
        tie_tol: payoff differences within ``tie_tol`` x payoff range count as ties.

    Returns:
        The rectified distributions, and the (player, member) pairs that beat or tie no
        opponent in the support. Those get the plain Nash mixture of the opponent, as in
        OpenSpiel, and are listed so the fallback is never silent.

    Raises:
        ValueError: a game that does not have exactly two players.

    Example:
        >>> rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
        >>> U = np.stack([rps, -rps], axis=-1)
        >>> third = np.full(3, 1 / 3)
        >>> rect, _ = rectified_opponents(U, (third, third))
        >>> np.round(rect[0][0], 3).tolist()   # rock beats or ties rock and scissors
        [0.5, 0.0, 0.5]
    """
    if U.ndim != 3 or U.shape[-1] != 2:
        raise ValueError(
            f"rectified Nash is defined for two-player games only, got payoffs of shape {U.shape} "
            f"({U.shape[-1]} players); use 'nash' for more players"
        )
    ties = tie_tol * payoff_scale(U)
    out: list[dict[int, np.ndarray]] = []
    unrectified: list[tuple[int, int]] = []
    for p in range(2):
        q = 1 - p
        # mine[i, j]: p's payoff with p on member i and the opponent on member j
        mine = U[..., p] if p == 0 else U[..., p].T
        theirs = U[..., q] if p == 0 else U[..., q].T
        rect: dict[int, np.ndarray] = {}
        for i in np.flatnonzero(sigma[p] > support_tol):
            w = sigma[q] * (mine[i] >= theirs[i] - ties)
            total = w.sum()
            if total > support_tol:
                w = w / total
            else:
                w = sigma[q].copy()
                unrectified.append((p, int(i)))
            w.setflags(write=False)
            rect[int(i)] = w
        out.append(rect)
    return tuple(out), unrectified


def rectified_nash(
    U: ArrayLike, *, support_tol: float = 1e-9, tie_tol: float = 1e-9, **options: Unpack[NashOptions]
) -> tuple[SolverResult, tuple[dict[int, np.ndarray], ...]]:
    """The Nash equilibrium (as `nash_equilibrium`, with its `options`) and its rectified opponent distributions.

    The result's info lists under ``"unrectified"`` the (player, member) pairs that beat
    or tie no supported opponent and so train against the plain Nash mixture.

    Raises:
        ValueError: a game that does not have exactly two players.
    """
    U = as_payoff_array(U)
    if U.shape[-1] != 2:
        raise ValueError(
            f"rectified Nash is defined for two-player games only, got payoffs of shape {U.shape} "
            f"({U.shape[-1]} players); use 'nash' for more players"
        )
    result = nash_equilibrium(U, **options)
    x, y = result.distributions
    rect, unrectified = rectified_opponents(U, (x, y), support_tol=support_tol, tie_tol=tie_tol)
    info = {**result.info, "unrectified": unrectified}
    return SolverResult(result.distributions, result.method, info), rect
