"""Multi-population alpha-rank (Omidshafiei et al. 2019), vectorised.

The Markov chain runs over pure profiles. From profile s, one population k is picked
(each of the ``sum_k (n_k - 1)`` single-population deviations has weight
``eta = 1 / sum_k (n_k - 1)``) and a mutant member r_k of it fixates with the Fermi /
Moran probability

    rho(u) = (1 - exp(-u)) / (1 - exp(-m u)),   u = alpha * (U_k(r) - U_k(s)),

(``1/m`` when u = 0), exactly as `open_spiel.python.egt.alpharank.compute` does for
several populations. The stationary distribution over profiles is then marginalised to
one distribution per player.

Numerics: ``rho`` is computed in log space, so a large ``alpha * payoff gap * m`` gives
tiny but non-zero rates instead of overflow or 0, and each row of the rate matrix is
scaled by its largest rate before solving (which leaves the stationary distribution
unchanged after rescaling back): nearly absorbing profiles then no longer make the
linear system singular. Chains that are still numerically reducible (several groups of
profiles joined only by rates below machine precision, where OpenSpiel reports "Expected
1 stationary distribution") are solved exactly by log-space GTH elimination when small.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from pbmarl.solvers.inputs import as_payoff_array
from pbmarl.solvers.result import SolverError


def alpharank_profiles(U: ArrayLike, *, alpha: float = 100.0, m: int = 50, max_profiles: int = 2_500) -> np.ndarray:
    """Stationary distribution of the alpha-rank chain, shape ``(n_1, ..., n_k)``.

    Args:
        U: checked payoff array ``(n_1, ..., n_k, k)``; payoffs are used as they are
            (not rescaled), so `alpha` is in inverse payoff units, as in OpenSpiel.
        alpha: selection intensity (OpenSpiel's default 100).
        m: population size of each population (OpenSpiel's default 50).
        max_profiles: refuse games with more pure profiles than this (the chain is a
            dense ``profiles x profiles`` matrix).

    Raises:
        ValueError: bad options or too many profiles.
        SolverError: the chain is numerically reducible and has more than 600 profiles
            (lower `alpha` or `m`).
    """
    U = as_payoff_array(U)
    if not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be a finite non-negative number, got {alpha!r}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (the population size) must be a positive integer, got {m!r}")
    sizes = U.shape[:-1]
    count = int(np.prod(sizes))
    if count > max_profiles:
        raise ValueError(
            f"alpharank needs a dense {count}x{count} Markov chain for populations of sizes {sizes}; "
            f"that is more than max_profiles={max_profiles} profiles (raise max_profiles, or use 'nash'/'prd')"
        )
    if count == 1:
        return np.ones(sizes)
    pi, _ = _stationary(_log_rates(U, alpha=alpha, m=m))
    return pi.reshape(sizes)


def solve_alpharank(U: ArrayLike, *, alpha: float = 100.0, m: int = 50, max_profiles: int = 2_500) -> tuple[np.ndarray, ...]:
    """Alpha-rank marginals: player p's distribution sums the profile distribution over the others.

    Example:
        >>> pd = np.array([[[3, 3], [0, 5]], [[5, 0], [1, 1]]], dtype=float)   # prisoner's dilemma
        >>> [np.round(s, 3).tolist() for s in solve_alpharank(pd)]
        [[0.0, 1.0], [0.0, 1.0]]
    """
    U = as_payoff_array(U)
    pi = alpharank_profiles(U, alpha=alpha, m=m, max_profiles=max_profiles)
    k = pi.ndim
    return tuple(pi.sum(axis=tuple(j for j in range(k) if j != p)) for p in range(k))


def _log_rates(U: np.ndarray, *, alpha: float, m: int) -> np.ndarray:
    """Log transition probabilities between distinct profiles (-inf where no single deviation)."""
    sizes = U.shape[:-1]
    k = len(sizes)
    count = int(np.prod(sizes))
    log_eta = -np.log(sum(n - 1 for n in sizes))
    out = np.full((count, count), -np.inf)
    index = np.arange(count).reshape(sizes)
    for p in range(k):
        n = sizes[p]
        if n == 1:
            continue
        pay = np.moveaxis(U[..., p], p, -1)  # (..., n): axis p last
        idx = np.moveaxis(index, p, -1)
        gain = alpha * (pay[..., None, :] - pay[..., :, None])  # [..., a, b]: switching a -> b
        src = np.broadcast_to(idx[..., :, None], gain.shape)
        dst = np.broadcast_to(idx[..., None, :], gain.shape)
        off = ~np.eye(n, dtype=bool)
        out[src[..., off], dst[..., off]] = log_eta + _log_fixation(gain[..., off], m)
    return out


def _log_fixation(u: np.ndarray, m: int) -> np.ndarray:
    """log rho(u) = log((1 - e^-u) / (1 - e^-mu)), stable for any sign and size of u."""
    a = np.abs(u)
    small = a < 1e-12
    safe = np.where(small, 1.0, a)
    # for u < 0: rho = e^{-(m-1)|u|} (1 - e^-|u|) / (1 - e^-m|u|)
    body = np.log(-np.expm1(-safe)) - np.log(-np.expm1(-m * safe)) - (m - 1) * np.where(u < 0, safe, 0.0)
    return np.where(small, -np.log(m), body)


def _stationary(log_rates: np.ndarray, *, gth_limit: int = 600) -> tuple[np.ndarray, str]:
    """Stationary distribution of the chain with off-diagonal log rates `log_rates`, and how it was solved.

    First a dense linear solve on the row-scaled chain (fast). When that chain is still
    numerically reducible (several groups of profiles that leave each other only at rates
    below machine precision), the Grassmann-Taksar-Heyman elimination runs in log space,
    which needs no subtraction and so stays exact; it costs O(profiles^3) Python-level
    work, so it is used up to `gth_limit` profiles.
    """
    pi = _scaled_solve(log_rates)
    if pi is not None:
        return pi, "scaled-solve"
    count = log_rates.shape[0]
    if count > gth_limit:
        raise SolverError(
            f"alpharank: the Markov chain over {count} profiles is numerically reducible (groups of profiles "
            f"leave each other only at rates below machine precision) and is too large for the exact log-space "
            f"elimination (at most {gth_limit} profiles); lower alpha or m"
        )
    pi = np.exp(_log_gth(log_rates))
    return pi / pi.sum(), "log-gth"


def _scaled_solve(log_rates: np.ndarray) -> np.ndarray | None:
    count = log_rates.shape[0]
    row_max = log_rates.max(axis=1)  # finite: every profile has a deviation when count > 1
    scaled = np.exp(log_rates - row_max[:, None])  # each row's largest rate is 1
    generator = scaled - np.diag(scaled.sum(axis=1))
    # pi' G = 0 with sum(pi') = 1, where pi'_s = pi_s * exp(row_max_s) (flows, not masses)
    system = generator.T.copy()
    system[-1, :] = 1.0
    rhs = np.zeros(count)
    rhs[-1] = 1.0
    try:
        flow = np.linalg.solve(system, rhs)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(flow)) or flow.min() < -1e-8 * np.abs(flow).max():
        return None
    if np.abs(flow @ generator).max() > 1e-8:
        return None
    with np.errstate(divide="ignore"):
        log_pi = np.log(np.clip(flow, 0.0, None)) - row_max
    pi = np.exp(log_pi - logsumexp(log_pi))
    return pi / pi.sum()


def _log_gth(log_rates: np.ndarray) -> np.ndarray:
    """Log of the stationary distribution by Grassmann-Taksar-Heyman state reduction in log space."""
    L = log_rates.copy()
    count = L.shape[0]
    for n in range(count - 1, 0, -1):
        exit_rate = logsumexp(L[n, :n])
        L[:n, n] -= exit_rate
        L[:n, :n] = np.logaddexp(L[:n, :n], L[:n, n][:, None] + L[n, :n][None, :])
    log_pi = np.zeros(count)
    for n in range(1, count):
        log_pi[n] = logsumexp(log_pi[:n] + L[:n, n])
    return log_pi - logsumexp(log_pi)
