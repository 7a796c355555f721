"""Correlated meta-solvers: (coarse) correlated equilibria of an n-player payoff table.

A joint distribution ``sigma`` over profiles ``s = (s_1, ..., s_k)`` of population
members is a **coarse correlated equilibrium** (CCE; Moulin and Vial 1978) when no
player gains by committing to one member ``a'`` before the recommendation:

    for every p and a':   sum_s sigma(s) [U_p(a', s_-p) - U_p(s)] <= epsilon,

and a **correlated equilibrium** (CE; Aumann 1974) when no player gains by
deviating after seeing its recommendation ``a``:

    for every p, a and a' != a:   sum_{s_-p} sigma(a, s_-p) [U_p(a', s_-p) - U_p(a, s_-p)] <= epsilon.

Both sets are polytopes. Following Marris et al. (2021, "Multi-Agent Training beyond
Zero-Sum with Correlated Equilibrium Meta-Solvers", ICML), one point is picked by an
objective:

* maximum welfare (MW(C)CE): ``max_sigma sum_s sigma(s) sum_p U_p(s)``, a linear
  programme, solved with HiGHS (`scipy.optimize.linprog`); not unique in general;
* maximum Gini impurity (MG(C)CE): ``max_sigma 1 - sum_s sigma(s)^2``, i.e. the
  strictly convex QP ``min ||sigma||^2`` over the polytope, so the answer is unique;
  solved with the interior-point QP solver Clarabel (the ``qp`` extra).

Payoffs are scaled to unit range first, so `epsilon` and the solver tolerances mean
the same for any table (`epsilon` is given in the table's own units).

Example:
    >>> U = np.array([[[6, 6], [2, 7]], [[7, 2], [0, 0]]], float)     # chicken
    >>> np.round(solve_correlated(U, kind="ce", objective="welfare"), 4).tolist()
    [[0.5, 0.25], [0.25, 0.0]]
    >>> np.round(solve_correlated(U, kind="ce", objective="gini"), 4).tolist()
    [[0.2647, 0.2941], [0.2941, 0.1471]]
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from pbmarl.solvers.inputs import payoff_scale
from pbmarl.solvers.result import SolverError, SolverResult

Kind = Literal["ce", "cce"]
Objective = Literal["welfare", "gini"]

#: HiGHS primal/dual feasibility tolerances, on unit-range payoffs
_TOL = 1e-10
#: profiles above which the CCE QP uses `cce_factors` (measured crossover: ~3,500 profiles)
_LIFT_ABOVE = 3000


def _moved_index(sizes: tuple[int, ...], player: int) -> np.ndarray:
    """``[n_p, M]``: the flat profile index of (player's member a, others' profile m)."""
    flat = np.arange(int(np.prod(sizes))).reshape(sizes)
    return np.moveaxis(flat, player, 0).reshape(sizes[player], -1)


def _front(U: np.ndarray, player: int) -> np.ndarray:
    """Player p's payoffs as ``[n_p, M]``: its own member first, the others' profile flattened."""
    sizes = U.shape[:-1]
    return np.moveaxis(U[..., player], player, 0).reshape(sizes[player], -1)


def deviation_constraints(U: np.ndarray, kind: Kind) -> sp.csr_matrix:
    """The rows ``G`` of the (C)CE constraints ``G sigma <= epsilon`` over the flat joint (C order).

    CCE: one row per (p, a'), ``G[s] = U_p(a', s_-p) - U_p(s)``. CE: one row per
    (p, a, a' != a), non-zero only where ``s_p = a``: ``U_p(a', s_-p) - U_p(a, s_-p)``.
    """
    _check_kind(kind)
    sizes = U.shape[:-1]
    N = int(np.prod(sizes))
    rows, cols, vals = [], [], []
    row = 0
    for p, n in enumerate(sizes):
        Up, idx = _front(U, p), _moved_index(sizes, p)
        M = Up.shape[1]
        if kind == "cce":
            gain = Up[:, None, :] - Up[None, :, :]  # [a', a, M]
            rows.append(np.repeat(row + np.arange(n), n * M))
            cols.append(np.tile(idx.ravel(), n))
            vals.append(gain.ravel())
            row += n
        else:
            for a in range(n):
                dev = np.array([b for b in range(n) if b != a], dtype=np.int64)
                gain = Up[dev] - Up[a][None, :]  # [n-1, M]
                rows.append(np.repeat(row + np.arange(len(dev)), M))
                cols.append(np.tile(idx[a], len(dev)))
                vals.append(gain.ravel())
                row += len(dev)
    if not rows:
        return sp.csr_matrix((0, N))
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(row, N))


def cce_factors(U: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``(D, K)`` with ``D @ K`` the CCE rows of `deviation_constraints`, ``K`` sparse but for k rows.

    For player p, ``G_p sigma = C_p (S_p sigma) - (u_p . sigma) 1`` where ``S_p`` sums the
    joint over p's own member (the others' marginal, one non-zero per profile), ``u_p`` is
    p's payoff per profile and ``C_p[a', m] = U_p(a', m)``. The QP keeps ``y = K sigma`` as
    variables: a dense row per profile-sized constraint costs an interior-point solver a
    dense block in its factorisation, and this form has k + 1 such rows instead of sum n_p.
    """
    sizes = U.shape[:-1]
    N = int(np.prod(sizes))
    K_blocks, D_blocks = [], []
    for p, n in enumerate(sizes):
        Up, idx = _front(U, p), _moved_index(sizes, p)
        M = Up.shape[1]
        S = sp.csr_matrix((np.ones(N), (np.tile(np.arange(M), n), idx.ravel())), shape=(M, N))
        K_blocks += [S, sp.csr_matrix(U[..., p].reshape(1, N))]
        D_blocks.append(sp.hstack([sp.csr_matrix(Up), sp.csr_matrix(-np.ones((n, 1)))]))
    return sp.block_diag(D_blocks, format="csr"), sp.vstack(K_blocks, format="csr")


def cce_gaps(U: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Per player, ``max(0, max_a' sum_s sigma(s) [U_p(a', s_-p) - U_p(s)])``: ``[k]``.

    The summed CCE gap is ``cce_gaps(U, joint).sum()``; zero exactly at a CCE.
    """
    joint = _check_joint(U, joint)
    out = np.empty(U.shape[-1])
    for p in range(U.shape[-1]):
        Up, sig = _front(U, p), np.moveaxis(joint, p, 0).reshape(U.shape[p], -1)
        others = sig.sum(axis=0)  # the others' joint marginal
        out[p] = max(0.0, float((Up @ others).max() - (Up * sig).sum()))
    return out


def ce_gaps(U: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Per player, ``sum_a max(0, max_a' sum_{s_-p} sigma(a, s_-p) [U_p(a', s_-p) - U_p(a, s_-p)])``: ``[k]``."""
    joint = _check_joint(U, joint)
    out = np.empty(U.shape[-1])
    for p in range(U.shape[-1]):
        Up, sig = _front(U, p), np.moveaxis(joint, p, 0).reshape(U.shape[p], -1)
        dev = sig @ Up.T  # [a, a']: recommended a, deviate to a'
        own = (sig * Up).sum(axis=1)
        out[p] = float(np.clip(dev.max(axis=1) - own, 0.0, None).sum())
    return out


def solve_correlated(U: np.ndarray, *, kind: Kind = "cce", objective: Objective = "gini",
                     epsilon: float = 0.0) -> np.ndarray:
    """The maximum-welfare or maximum-Gini (C)CE of payoffs `U` ``(n_1, ..., n_k, k)``: a joint ``sizes``.

    See the module doc for the constraints and objectives.

    Raises:
        ValueError: an unknown `kind` or `objective`, a negative `epsilon`.
        SolverError: HiGHS fails (its status is named).
        ImportError: ``objective="gini"`` without `clarabel` (``pip install pbmarl[qp]``).
    """
    _check_kind(kind)
    if objective not in ("welfare", "gini"):
        raise ValueError(f"objective must be 'welfare' or 'gini', got {objective!r}")
    if not (isinstance(epsilon, (int, float, np.floating)) and epsilon >= 0):
        raise ValueError(f"epsilon must be a non-negative number (the allowed deviation gain), got {epsilon!r}")
    U = np.asarray(U, dtype=float)
    sizes = U.shape[:-1]
    scale = payoff_scale(U)
    Us = U / scale
    G = deviation_constraints(Us, kind)
    eps = float(epsilon) / scale
    if objective == "welfare":
        x = _welfare_lp(G, Us.sum(axis=-1).ravel(), eps, kind)
    else:
        lifted = kind == "cce" and G.shape[1] > _LIFT_ABOVE
        x = _gini_qp(cce_factors(Us) if lifted else (G, None), eps, kind)
    x = np.clip(x, 0.0, None)
    return (x / x.sum()).reshape(sizes)


def _welfare_lp(G: sp.csr_matrix, welfare: np.ndarray, eps: float, kind: str) -> np.ndarray:
    N = G.shape[1]
    res = linprog(-welfare, A_ub=G, b_ub=np.full(G.shape[0], eps), A_eq=np.ones((1, N)), b_eq=[1.0],
                  bounds=(0.0, None), method="highs",
                  options={"primal_feasibility_tolerance": _TOL, "dual_feasibility_tolerance": _TOL})
    if res.status != 0 or res.x is None:
        raise SolverError(f"HiGHS could not solve the maximum-welfare {kind.upper()} LP over {N} profiles: {res.message}")
    return np.asarray(res.x)


def _gini_qp(constraints: tuple[sp.csr_matrix, sp.csr_matrix | None], eps: float, kind: str) -> np.ndarray:
    """``min 1/2 x^T (2 I) x`` s.t. ``D K x <= eps``, ``1^T x = 1``, ``x >= 0`` with Clarabel.

    `constraints` is ``(D, K)`` (`cce_factors`; ``y = K x`` becomes variables) or ``(G, None)``.
    Clarabel (Goulart and Chen 2024) is an interior-point solver for convex QPs and cone
    programmes with sparse factorisations; its cost grows gently with the number of
    profiles, where an active-set QP (HiGHS's) must handle a support of thousands of profiles.
    """
    try:
        import clarabel  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError("the maximum-Gini (C)CE needs the Clarabel QP solver: pip install clarabel "
                          "(or pbmarl[qp]); the maximum-welfare solvers 'mwcce'/'mwce' need only scipy") from None
    D, K = constraints
    N = D.shape[1] if K is None else K.shape[1]
    r = 0 if K is None else K.shape[0]
    m = D.shape[0]
    P = sp.diags(np.concatenate([np.full(N, 2.0), np.zeros(r)]), format="csc")
    ones = sp.hstack([sp.csr_matrix(np.ones((1, N))), sp.csr_matrix((1, r))])
    nonneg = sp.hstack([-sp.eye(N, format="csr"), sp.csr_matrix((N, r))])
    if K is None:
        rows = [ones, D, nonneg]
    else:
        rows = [ones, sp.hstack([K, -sp.eye(r, format="csr")]), sp.hstack([sp.csr_matrix((m, N)), D]), nonneg]
    A = sp.vstack(rows).tocsc()
    b = np.concatenate([[1.0], np.zeros(r), np.full(m, eps), np.zeros(N)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = _TOL
    settings.tol_ktratio = 1e-8
    cones = [clarabel.ZeroConeT(1 + r), clarabel.NonnegativeConeT(m + N)]
    solution = clarabel.DefaultSolver(P, np.zeros(N + r), A, b, cones, settings).solve()
    if solution.status not in (clarabel.SolverStatus.Solved, clarabel.SolverStatus.AlmostSolved):
        raise SolverError(f"Clarabel could not solve the maximum-Gini {kind.upper()} QP over {N} profiles: "
                          f"{solution.status}")
    return np.asarray(solution.x)[:N]


def marginals(joint: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each player's marginal of a joint distribution ``sizes``."""
    k = joint.ndim
    return tuple(joint.sum(axis=tuple(j for j in range(k) if j != p)) for p in range(k))


def correlated_result(U: np.ndarray, *, kind: Kind, objective: Objective, epsilon: float = 0.0) -> SolverResult:
    """`solve_correlated` as a `SolverResult`: marginals, with the joint and the gaps in `info`."""
    joint = solve_correlated(U, kind=kind, objective=objective, epsilon=epsilon)
    gaps = cce_gaps(U, joint) if kind == "cce" else ce_gaps(U, joint)
    method = ("mg" if objective == "gini" else "mw") + kind
    joint.setflags(write=False)
    return SolverResult(marginals(joint), method, {"joint": joint, f"{kind}_gaps": tuple(float(g) for g in gaps),
                                                   "solver": "clarabel-qp" if objective == "gini" else "highs-lp"})


def _check_kind(kind: str) -> None:
    if kind not in ("ce", "cce"):
        raise ValueError(f"kind must be 'ce' (correlated) or 'cce' (coarse correlated), got {kind!r}")


def _check_joint(U: np.ndarray, joint: np.ndarray) -> np.ndarray:
    joint = np.asarray(joint, dtype=float)
    if joint.shape != U.shape[:-1]:
        raise ValueError(f"the joint distribution must have shape {U.shape[:-1]} (population sizes), got {joint.shape}")
    if np.any(joint < -1e-9) or abs(joint.sum() - 1.0) > 1e-6:
        raise ValueError(f"the joint distribution must be non-negative and sum to 1, got sum {joint.sum():.6g}")
    return joint
