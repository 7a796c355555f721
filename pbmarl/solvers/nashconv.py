"""Meta-game NashConv: how much each player gains by deviating from a mixed profile.

All functions take a checked payoff array ``U`` of shape ``(n_1, ..., n_k, k)`` and
work for any number of players through tensor contractions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pbmarl.solvers.inputs import DistributionsLike, as_payoff_array, check_distributions

#: maps one distribution per player to each player's payoff per pure strategy
DeviationFn = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


def deviation_function(U: np.ndarray) -> DeviationFn:
    """A fast ``sigma -> [v_0, ..., v_{k-1}]`` for repeated use (dynamics call it every step).

    ``v_p[i]`` is player p's expected payoff for playing member i while every other
    player j plays ``sigma[j]``. The per-player payoff tensors are laid out once, so
    each call is k contractions over contiguous memory; two players use matrix-vector
    products.
    """
    k = U.shape[-1]
    if k == 2:
        row = np.ascontiguousarray(U[..., 0])
        col_t = np.ascontiguousarray(U[..., 1].T)

        def two(sigma: Sequence[np.ndarray]) -> list[np.ndarray]:
            return [row @ sigma[1], col_t @ sigma[0]]

        return two
    tensors = [np.ascontiguousarray(U[..., p]) for p in range(k)]

    def many(sigma: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = []
        for p, tensor in enumerate(tensors):
            # contract the highest axes first so the remaining axes keep their positions
            for j in range(k - 1, -1, -1):
                if j != p:
                    tensor = np.tensordot(tensor, sigma[j], axes=([j], [0]))
            out.append(tensor)
        return out

    return many


def deviation_payoffs(U: Any, sigma: DistributionsLike) -> tuple[np.ndarray, ...]:
    """Each player's payoff for each of its members against the others' mixtures.

    Example:
        >>> rps = [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]
        >>> deviation_payoffs(rps, [[1, 0, 0], [1, 0, 0]])[0]
        array([ 0.,  1., -1.])
    """
    U = as_payoff_array(U)
    sigma = check_distributions(sigma, U.shape[:-1])
    return tuple(deviation_function(U)(sigma))


def regrets_from_values(values: Sequence[np.ndarray], sigma: Sequence[np.ndarray]) -> np.ndarray:
    """Per-player regret ``max_i v_p[i] - sigma_p . v_p`` (clipped at 0 against round-off)."""
    return np.array([max(float(v.max() - v @ s), 0.0) for v, s in zip(values, sigma)])


def meta_regrets(U: Any, sigma: DistributionsLike) -> np.ndarray:
    """Per-player regret of the mixed profile `sigma`: best pure response minus current payoff.

    Example:
        >>> meta_regrets([[0, 1], [1, 0]], [[1, 0], [1, 0]])   # row would switch, column is happy
        array([1., 0.])
    """
    U = as_payoff_array(U)
    sigma = check_distributions(sigma, U.shape[:-1])
    return regrets_from_values(deviation_function(U)(sigma), sigma)


def meta_nash_conv(U: Any, sigma: DistributionsLike) -> float:
    """Meta-game NashConv: the sum over players of their regrets (0 exactly at a Nash equilibrium).

    `U` is a payoff array ``(n_1, ..., n_k, k)`` (or a 2-D zero-sum matrix); `sigma` is
    one distribution per player, e.g. a `MetaStrategy`.

    Example:
        >>> rps = [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]
        >>> round(meta_nash_conv(rps, [[1/3] * 3, [1/3] * 3]), 12)
        0.0
    """
    return float(meta_regrets(U, sigma).sum())


def expected_payoffs(U: Any, sigma: DistributionsLike) -> np.ndarray:
    """Each player's expected payoff under the mixed profile `sigma`, shape ``(k,)``."""
    U = as_payoff_array(U)
    sigma = check_distributions(sigma, U.shape[:-1])
    values = deviation_function(U)(sigma)
    return np.array([float(v @ s) for v, s in zip(values, sigma)])
