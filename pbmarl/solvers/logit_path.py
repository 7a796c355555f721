"""Nash equilibria of games with any number of players by following the logit (QRE) path.

The logit equilibria of a game at precision ``lam`` solve, for every player p and member i,

    log x_p(i) - log x_p(0) = lam * (u_p(i, x_{-p}) - u_p(0, x_{-p})),     sum_i x_p(i) = 1,

with ``u_p(i, x_{-p})`` player p's payoff for member i against the others' mixtures. At
``lam = 0`` the only solution is uniform play; for almost every game the solutions form one
smooth curve from there whose end as ``lam -> inf`` is a Nash equilibrium (McKelvey & Palfrey
1995, "Quantal response equilibria for normal form games"; Turocy 2005, "A dynamic homotopy
interpretation of the logistic quantal response equilibrium correspondence"). This is the
method behind Gambit's ``logit_solve``.

The curve is followed in ``z = (log x, lam)`` by predictor-corrector continuation with a
pseudo-arclength corrector (Allgower & Georg 1990, "Numerical continuation methods", ch. 2),
so turning points where ``lam`` falls for a while are passed; a step whose end changes the sign
of ``det [J; t]`` (the orientation, constant along the path) is retried shorter, so the tracker
never jumps onto a leg of the path that runs back. From ``lam = 16`` on, each time ``lam``
doubles, the current point and its polish by Newton's method on its support (`newton_polish`,
for a few support thresholds) are scored; the search stops as soon as one meets the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.linalg

from pbmarl.solvers.dynamics import Profile
from pbmarl.solvers.nplayer import batch_nash_conv, newton_polish

#: step control (Allgower & Georg 1990, sec. 6.1): the corrector's first step and its contraction
#: rate are kept near their nominal values; beyond the maxima the step is retried at half length
_NOMINAL_DISTANCE, _MAX_DISTANCE = 0.5, 1.5
_NOMINAL_CONTRACTION, _MAX_CONTRACTION = 0.2, 0.6
#: the angle (radians) between successive tangents: nominal and largest accepted
_NOMINAL_ANGLE, _MAX_ANGLE = 0.2, 0.7
#: the most a step may grow over the last one
_MAX_GROWTH = 8.0
#: the path's point is polished each time lam grows by this factor, on the supports
#: {i: x_p(i) >= tol * max x_p} for each of these tolerances
_FIRST_CHECK, _CHECK_GROWTH = 16.0, 2.0
_SUPPORT_TOLS = (1e-2, 1e-4, 1e-6)
#: a support where Newton failed is tried again only once lam has grown this much
_RETRY_GROWTH = 4.0
#: the corrector stops when its step is below this, relative to 1 + lam (the polish makes the end exact)
_CORRECTOR_TOL = 1e-8


class _LogitSystem:
    """The path's equations ``H(z) = 0`` and their Jacobian ``dH/dz`` (``N x (N + 1)``)."""

    def __init__(self, U: np.ndarray) -> None:
        k = U.shape[-1]
        low, span = float(U.min()), float(np.ptp(U))
        scaled = (U - low) / (span if span > 0 else 1.0)  # precision is then in units of the payoff range
        self.k = k
        self.sizes = U.shape[:-1]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.n = int(self.offsets[-1])
        # for each ordered pair (p, q): p's payoffs with axes (p, q) first and the others flattened, minus
        # the row of p's member 0, so that contracting the others is one matrix-vector product with
        # their mixtures' outer product and gives u_p(i, j, .) - u_p(0, j, .) for i >= 1 directly
        self.diffs: dict[tuple[int, int], np.ndarray] = {}
        self.rest: dict[tuple[int, int], list[int]] = {}
        for p in range(k):
            for q in range(k):
                if q != p:
                    rest = [j for j in range(k) if j not in (p, q)]
                    cells = int(np.prod([self.sizes[j] for j in rest]))
                    moved = np.transpose(scaled[..., p], [p, q] + rest).reshape(self.sizes[p], self.sizes[q], cells)
                    diff = moved[1:] - moved[:1]  # empty for a player with one member
                    self.diffs[p, q] = np.ascontiguousarray(diff.reshape((self.sizes[p] - 1) * self.sizes[q], cells))
                    self.rest[p, q] = rest

        # the parts of J that do not depend on z: d/dl_p(i) (l_p(i) - l_p(0)) = 1, d/dl_p(0) = -1
        self.base = np.zeros((self.n, self.n + 1))
        for p in range(k):
            o, e = self.offsets[p], self.offsets[p + 1]
            rows = np.arange(o + 1, e)
            self.base[rows, rows] = 1.0
            self.base[rows, o] = -1.0

    def split(self, z: np.ndarray) -> list[np.ndarray]:
        return [np.exp(z[self.offsets[p]:self.offsets[p + 1]]) for p in range(self.k)]

    def _block(self, p: int, q: int, x: Sequence[np.ndarray], kron: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
        """``D[i - 1, j] = u_p(i, j, x_{-p,-q}) - u_p(0, j, x_{-p,-q})`` for p's members i >= 1."""
        key = (p, q) if p < q else (q, p)
        rest = kron.get(key)
        if rest is None:
            players = self.rest[p, q]
            rest = x[players[0]] if len(players) == 1 else np.ones(1)
            if len(players) > 1:
                for j in players:
                    rest = np.multiply.outer(rest, x[j]).ravel()
            kron[key] = rest
        return (self.diffs[p, q] @ rest).reshape(self.sizes[p] - 1, self.sizes[q])

    def evaluate(self, z: np.ndarray, jacobian: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """``(H [N], J [N, N + 1])`` at `z` (J is None when not asked for)."""
        x = self.split(z)
        lam = z[-1]
        kron: dict[tuple[int, int], np.ndarray] = {}
        H = np.empty(self.n)
        J = self.base.copy() if jacobian else None
        for p in range(self.k):
            o, e = self.offsets[p], self.offsets[p + 1]
            H[o] = x[p].sum() - 1.0
            if J is not None:
                J[o, o:e] = x[p]
            if e - o == 1:
                continue
            first = (p + 1) % self.k
            D = self._block(p, first, x, kron)
            du = D @ x[first]  # u_p(i) - u_p(0), i >= 1
            H[o + 1:e] = z[o + 1:e] - z[o] - lam * du
            if J is None:
                continue
            for q in range(self.k):
                if q != p:
                    Dq = D if q == first else self._block(p, q, x, kron)
                    J[o + 1:e, self.offsets[q]:self.offsets[q + 1]] = (-lam) * Dq * x[q]
            J[o + 1:e, self.n] = -du
        return H, J


def _orientation(J: np.ndarray, t: np.ndarray) -> float:
    """The sign of ``det [J; t]``: constant along a path followed in one direction."""
    return float(np.linalg.slogdet(np.vstack([J, t]))[0])


def _tangent(J: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """The unit null vector of `J`, oriented along `previous` (or with lam increasing)."""
    q, _ = np.linalg.qr(J.T, mode="complete")
    t = q[:, -1]
    sign = t[-1] if previous is None else float(t @ previous)
    return -t if sign < 0 else t


def logit_path_nash(
    U: np.ndarray,
    *,
    target: float,
    score: Callable[[Profile], float] | None = None,
    max_steps: int = 5_000,
    max_lambda: float = 1e8,
) -> tuple[Profile, float, dict[str, float | bool]]:
    """Follow the logit path of `U` ``(n_1, ..., n_k, k)`` until a polished point's NashConv is at most `target`.

    Args:
        U: payoff array.
        target: stop once the NashConv (by `score`) is at most this, in `U`'s own units.
        score: NashConv of a profile; default: in `U` itself (a caller solving a sub-table of a
            larger game passes the larger game's score).
        max_steps: most predictor-corrector steps.
        max_lambda: stop the path at this precision (in units of the payoff range).

    Returns:
        ``(profile, nash_conv, info)``: the best profile seen, its score, and ``steps``,
        ``lambda`` (where the path stopped) and ``polished`` (whether Newton's method produced
        the profile, rather than the path's point itself). The caller checks the score.
    """
    system = _LogitSystem(U)
    if score is None:
        def score(sigma: Profile) -> float:
            return float(batch_nash_conv(U, [sigma])[0])
    z = np.concatenate([np.full(n, -np.log(n)) for n in system.sizes] + [np.zeros(1)])
    J = system.evaluate(z)[1]
    assert J is not None
    t = _tangent(J, None)
    orientation = _orientation(J, t)
    best: Profile = tuple(np.full(n, 1.0 / n) for n in system.sizes)
    best_score = score(best)
    h, check_at, steps = 0.3, _FIRST_CHECK, 0
    tried: dict[tuple[bytes, ...], float] = {}  # support -> lam where Newton last started from it
    polished = False
    while best_score > target and steps < max_steps and z[-1] < max_lambda:
        steps += 1
        point, J, ratio = _correct(system, z + h * t, t)
        t_new = _tangent(J, t) if ratio > 0 else t
        angle = float(np.arccos(np.clip(t_new @ t, -1.0, 1.0)))
        # the corrector failed, the path bends sharply, or the step left the branch: lam never returns
        # to 0 on it (the only solution there is the start), and det [J; t] keeps its sign along it
        # (Allgower & Georg, sec. 2.1): a change means the corrector landed on a leg of the path that
        # runs the other way. Shorter steps then.
        if ratio <= 0 or angle > _MAX_ANGLE or point[-1] <= 0.0 or _orientation(J, t_new) != orientation:
            h *= 0.5
            if h < 1e-10:
                break
            continue
        z, t = point, t_new
        # Allgower & Georg's step control: aim at a nominal corrector distance, contraction and bend
        h /= float(np.clip(max(ratio, angle / _NOMINAL_ANGLE), 1.0 / _MAX_GROWTH, 2.0))
        if z[-1] >= check_at:
            check_at = _CHECK_GROWTH * z[-1]
            x = tuple(s / s.sum() for s in system.split(z))
            value = score(x)  # far along the path the point itself is close: regret about n / (e lam)
            if value < best_score:
                best, best_score, polished = x, value, False
            for support_tol in _SUPPORT_TOLS:  # which members are in the support is not known yet
                signature = tuple(np.packbits(s >= support_tol * s.max()).tobytes() for s in x)
                if tried.get(signature, -np.inf) * _RETRY_GROWTH > z[-1]:
                    continue  # Newton failed on this support recently: wait until the path is closer
                tried[signature] = z[-1]
                candidate = newton_polish(U, x, support_tol=support_tol, clip=True)
                value = score(candidate) if candidate is not None else np.inf
                if candidate is not None and value < best_score:
                    best, best_score, polished = candidate, value, True
                if best_score <= target:
                    break
    return best, best_score, {"steps": steps, "lambda": float(z[-1]), "polished": polished}


def _correct(system: _LogitSystem, z: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Newton's method on ``H(z) = 0`` with steps orthogonal to the tangent `t` (chord variant:
    the Jacobian of the predicted point is factored once and reused).

    Returns ``(z, J at z, ratio)``: ``ratio`` > 0 is how the first correction and the worst
    contraction compare with their nominal sizes (1: as intended); 0 means the corrector failed.
    """
    H, J = system.evaluate(z)
    assert J is not None
    try:
        lu = scipy.linalg.lu_factor(np.vstack([J, t]), check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return z, J, 0.0
    first, previous, worst = 0.0, np.inf, 0.0
    for i in range(12):
        dz = scipy.linalg.lu_solve(lu, np.concatenate([-H, [0.0]]), check_finite=False)
        size = float(np.linalg.norm(dz))
        if not np.isfinite(size):
            return z, J, 0.0
        if i == 0:
            first = size
            if size > _MAX_DISTANCE:
                return z, J, 0.0
        else:
            worst = max(worst, size / previous)
            if worst > _MAX_CONTRACTION:
                return z, J, 0.0
        z = z + dz
        previous = max(size, 1e-300)
        if size <= _CORRECTOR_TOL * (1.0 + abs(z[-1])):
            # the predicted point's Jacobian serves for the next tangent: it is within one step of z
            ratio = max(np.sqrt(first / _NOMINAL_DISTANCE), np.sqrt(worst / _NOMINAL_CONTRACTION), 1e-3)
            return z, J, float(ratio)
        H = system.evaluate(z, jacobian=False)[0]
    return z, J, 0.0
