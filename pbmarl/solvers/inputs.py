"""Reading and checking what the meta-solvers take: payoff arrays, tables and distributions.

Every solver works on one float array ``U`` of shape ``(n_1, ..., n_k, k)``:
``U[i_1, ..., i_k, p]`` is player p's payoff when player j plays its member ``i_j``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pbmarl.games.matrix import numeric_payoffs, short_repr

#: how many offending cells an error message lists before "..."
_LISTED = 5


@runtime_checkable
class PayoffLike(Protocol):
    """Anything with ``.values`` (payoffs, NaN where never evaluated) and ``.ids`` (per player).

    `pbmarl.PayoffTable` is one; the solvers need nothing else from it.
    """

    values: Any
    ids: Any


class DistributionsLike(Protocol):
    """One distribution per player, indexable by player: a list of arrays or a `MetaStrategy`."""

    def __len__(self) -> int: ...

    def __getitem__(self, player: int, /) -> Any: ...


def default_ids(sizes: Sequence[int]) -> tuple[tuple[str, ...], ...]:
    """Policy ids ``"p{player}/{index}"``, the same scheme `Population` uses."""
    return tuple(tuple(f"p{p}/{i}" for i in range(n)) for p, n in enumerate(sizes))


def as_payoff_array(payoffs: Any, *, ids: Sequence[Sequence[str]] | None = None) -> np.ndarray:
    """Return `payoffs` as a float array of shape ``(n_1, ..., n_k, k)``, checked.

    A 2-D matrix is a zero-sum game given by the row player's payoffs ``M`` and becomes
    ``stack([M, -M], axis=-1)``. The input is never modified; the result is a new array.

    Raises:
        ValueError: ragged input, fewer than two dimensions, a last axis that does not
            hold one payoff per player, a player without members, missing (NaN) cells
            (named by policy id) or other non-finite payoffs.
        TypeError: non-numeric input.

    Example:
        >>> as_payoff_array([[0, 1], [1, 0]]).shape
        (2, 2, 2)
    """
    array = numeric_payoffs(payoffs)
    if array.ndim == 2:
        array = np.stack([array, -array], axis=-1)
    if array.ndim < 3:
        raise ValueError(
            f"payoffs of shape {array.shape} are not accepted: give a 2-D matrix (zero-sum, row player's "
            "payoffs) or an array of shape (n_1, ..., n_k, k) with k >= 2 players"
        )
    k = array.ndim - 1
    if array.shape[-1] != k:
        raise ValueError(
            f"payoffs of shape {array.shape} have {k} player axes but {array.shape[-1]} payoffs per cell; "
            f"the last axis must hold one payoff per player (expected shape {array.shape[:-1] + (k,)})"
        )
    sizes = array.shape[:-1]
    if min(sizes) == 0:
        raise ValueError(f"every player needs at least one policy, got population sizes {sizes}")
    if ids is not None:
        check_ids(ids, sizes)
    if not np.isfinite(array).all():  # one flat pass; the per-cell work only on the error path
        names = check_ids(ids, sizes) if ids is not None else default_ids(sizes)
        missing = np.isnan(array).any(axis=-1)
        if missing.any():
            cells = np.argwhere(missing)
            raise ValueError(
                f"payoffs missing for {len(cells)} cell{'s' if len(cells) != 1 else ''}: "
                f"{_cells(cells, names)}; evaluate them first (e.g. ExactEvaluator.fill or RolloutPool.fill)"
            )
        cells = np.argwhere(~np.isfinite(array).all(axis=-1))
        raise ValueError(f"payoffs must be finite, got infinite values in {len(cells)} cells: {_cells(cells, names)}")
    return array


def read_table(table: Any) -> tuple[np.ndarray, tuple[tuple[str, ...], ...]]:
    """Payoff array and policy ids from a `PayoffLike` table or a plain array.

    Plain arrays get ids ``"p{player}/{index}"``. See `as_payoff_array` for the checks.
    """
    if isinstance(table, PayoffLike) and not isinstance(table, np.ndarray):
        values = table.values  # read once: a PayoffTable builds a fresh copy per access
        ids = check_ids(table.ids, np.shape(values)[:-1])
        return as_payoff_array(values, ids=ids), ids
    U = as_payoff_array(table)
    return U, default_ids(U.shape[:-1])


def check_ids(ids: Any, sizes: Sequence[int]) -> tuple[tuple[str, ...], ...]:
    """`ids` as a tuple (one per player) of tuples of strings, matching `sizes`."""
    try:
        out = tuple(tuple(str(i) for i in player_ids) for player_ids in ids)
    except TypeError:
        raise TypeError(f"ids must be one sequence of policy ids per player, got {ids!r}") from None
    if tuple(len(i) for i in out) != tuple(sizes):
        raise ValueError(
            f"ids give population sizes {tuple(len(i) for i in out)} but the payoffs have sizes {tuple(sizes)}"
        )
    return out


def check_distributions(sigma: DistributionsLike, sizes: Sequence[int], *, atol: float = 1e-6) -> tuple[np.ndarray, ...]:
    """One float distribution per player, each on the simplex and as long as that population.

    Tiny negative entries (down to ``-atol``) are clipped and each distribution is
    renormalised.

    Raises:
        ValueError: wrong number of distributions, wrong lengths, or off the simplex.
    """
    try:
        count = len(sigma)
    except TypeError:
        raise TypeError(f"sigma must be one distribution per player, got {sigma!r}") from None
    if count != len(sizes):
        raise ValueError(f"expected {len(sizes)} distributions (one per player), got {count}")
    out = []
    for p, n in enumerate(sizes):
        w = np.asarray(sigma[p], dtype=float)
        if w.shape != (n,):
            raise ValueError(f"player {p}'s distribution must have {n} entries, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < -atol) or abs(w.sum() - 1.0) > atol:
            raise ValueError(
                f"player {p}'s distribution must lie on the simplex (non-negative, summing to 1), "
                f"got {short_repr(w.tolist())} (sum {w.sum():.6g})"
            )
        w = np.clip(w, 0.0, None)
        out.append(w / w.sum())
    return tuple(out)


def payoff_scale(U: np.ndarray) -> float:
    """The payoff range (max - min), or 1.0 for a constant table: tolerances are relative to it."""
    span = float(np.ptp(U)) if U.size else 0.0
    return span if span > 0.0 else 1.0


def _cells(cells: np.ndarray, ids: tuple[tuple[str, ...], ...]) -> str:
    named = ["(" + ", ".join(ids[p][i] for p, i in enumerate(cell)) + ")" for cell in cells[:_LISTED]]
    return ", ".join(named) + (", ..." if len(cells) > _LISTED else "")
