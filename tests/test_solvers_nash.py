"""Nash: zero-sum LP against an independent LP, Lemke-Howson against nashpy, n players, rectified."""

from __future__ import annotations

import signal
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from pbmarl.solvers import (
    MetaSolver,
    SolverError,
    bimatrix_nash,
    iterative_nash,
    lemke_howson,
    meta_nash_conv,
    meta_regrets,
    nash_equilibrium,
    rectified_opponents,
    solve_nash,
)


def reference_value(M: np.ndarray) -> float:
    """Value of the zero-sum game M by the textbook positive-shift LP, with HiGHS interior point.

    With M' = M - min(M) + 1 > 0: min 1.u s.t. M'^T u >= 1, u >= 0 gives value(M') = 1 / sum(u).
    A different formulation and algorithm from pbmarl's (which maximises v with a free variable
    using HiGHS' default), so the two agreeing says something.
    """
    shift = M.min() - 1.0
    Mp = M - shift
    m, n = M.shape
    res = linprog(np.ones(m), A_ub=-Mp.T, b_ub=-np.ones(n), bounds=[(0, None)] * m, method="highs-ipm",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0, res.message
    return 1.0 / res.x.sum() + shift


@pytest.mark.parametrize("shape", [(1, 1), (1, 4), (5, 1), (2, 3), (7, 7), (30, 50), (120, 80), (200, 200)])
def test_zero_sum_matches_an_independent_lp(shape: tuple[int, int]) -> None:
    M = np.random.default_rng(sum(shape)).normal(size=shape)
    res = nash_equilibrium(M)
    x, y = res.distributions
    assert res.method == "lp"
    reference = reference_value(M)
    assert float(x @ M @ y) == pytest.approx(reference, abs=1e-7)
    assert res.info["value"] == pytest.approx(reference, abs=1e-7)
    assert meta_nash_conv(M, (x, y)) < 1e-7


@pytest.mark.parametrize("scale", [1e-3, 1e3])
def test_zero_sum_tolerances_follow_the_payoff_scale(scale: float) -> None:
    M = np.random.default_rng(1).normal(size=(60, 40)) * scale
    x, y = solve_nash(M)
    assert float(x @ M @ y) == pytest.approx(reference_value(M), abs=1e-7 * scale)
    assert meta_nash_conv(M, (x, y)) < 1e-7 * scale


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_zero_sum_random_sizes(m: int, n: int, seed: int) -> None:
    M = np.random.default_rng(seed).uniform(-1, 1, size=(m, n))
    x, y = solve_nash(M)
    assert float(x @ M @ y) == pytest.approx(reference_value(M), abs=1e-7)
    assert meta_nash_conv(M, (x, y)) < 1e-7


def test_constant_sum_games_use_the_lp() -> None:
    rng = np.random.default_rng(3)
    win = rng.uniform(0, 1, size=(6, 4))  # win rates: the two payoffs sum to 1
    U = np.stack([win, 1 - win], axis=-1)
    res = nash_equilibrium(U)
    assert res.method == "lp"
    assert meta_nash_conv(U, res.distributions) < 1e-9
    assert res.info["value"] == pytest.approx(reference_value(win), abs=1e-7)


def test_known_general_sum_mixed_equilibrium() -> None:
    # Row: 2*y0 = y1 -> y = (1/3, 2/3); column: x1 = x0 -> x = (1/2, 1/2); no pure equilibrium.
    A = np.array([[2.0, 0.0], [0.0, 1.0]])
    B = np.array([[0.0, 1.0], [1.0, 0.0]])
    res = nash_equilibrium(np.stack([A, B], axis=-1))
    assert res.method == "lemke_howson"
    np.testing.assert_allclose(res.distributions[0], [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(res.distributions[1], [1 / 3, 2 / 3], atol=1e-12)


@pytest.mark.parametrize("n", [10, 50, 200])
def test_random_general_sum_games_by_lemke_howson(n: int) -> None:
    rng = np.random.default_rng(n)
    U = rng.normal(size=(n, n + 3, 2))
    sigma = MetaSolver("nash")(U)
    assert sigma.method == "lemke_howson"
    assert sigma.nash_conv < 1e-9
    assert sigma.nash_conv == pytest.approx(meta_nash_conv(U, sigma), abs=1e-15)


def test_degenerate_integer_games_always_get_an_equilibrium() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        m, n = rng.integers(1, 6, size=2)
        U = rng.integers(-1, 2, size=(m, n, 2)).astype(float)
        res = nash_equilibrium(U)
        assert max(meta_regrets(U, res.distributions)) <= 1e-6 * max(np.ptp(U), 1.0)


class _Timeout(Exception):
    pass


def _nashpy_lemke_howson(A: np.ndarray, B: np.ndarray, label: int) -> tuple[np.ndarray, np.ndarray] | None:
    """nashpy's answer, or None when it fails, returns garbage or runs over a second (it can loop)."""
    import nashpy

    def on_alarm(*_: object) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x, y = nashpy.Game(A, B).lemke_howson(initial_dropped_label=label)
    except (_Timeout, ValueError, KeyError, IndexError, ZeroDivisionError):
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if x.shape != (A.shape[0],) or y.shape != (A.shape[1],) or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    return x, y


def test_lemke_howson_agrees_with_nashpy_where_nashpy_is_right() -> None:
    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(40):
        m, n = rng.integers(2, 6, size=2)
        A, B = rng.normal(size=(m, n)), rng.normal(size=(m, n))
        U = np.stack([A, B], axis=-1)
        for label in range(m + n):
            x, y = lemke_howson(A, B, initial_dropped_label=label)
            assert meta_nash_conv(U, (x, y)) < 1e-10
            theirs = _nashpy_lemke_howson(A, B, label)
            if theirs is None or meta_nash_conv(U, theirs) > 1e-8:
                continue  # nashpy failed or returned a non-equilibrium: nothing to compare
            compared += 1
            # Lemke-Howson is deterministic given the dropped label: same path, same end
            np.testing.assert_allclose(x, theirs[0], atol=1e-8)
            np.testing.assert_allclose(y, theirs[1], atol=1e-8)
    assert compared > 100


def test_labels_cut_off_by_the_short_budget_get_the_long_one() -> None:
    # label 0 of this 30x30 game needs 824 pivots, more than the first budget of 10 * (m + n) = 600
    rng = np.random.default_rng(260)
    A, B = rng.normal(size=(30, 30)), rng.normal(size=(30, 30))
    res = bimatrix_nash(A, B, max_labels=1)
    assert res.method == "lemke_howson"
    assert res.info == {"label": 0, "attempts": 2, "max_pivots": 6000}
    assert meta_nash_conv(np.stack([A, B], axis=-1), res.distributions) < 1e-10
    # cut off at 600 pivots, label 0 fails; the fallback's check of pure profiles finds this game's pure equilibrium
    fallback = bimatrix_nash(A, B, max_labels=1, max_pivots=600, iterations=100)
    assert fallback.method == "pure-fallback" and "label 0" in fallback.info["lemke_howson_failures"][0]


def test_lemke_howson_rejects_bad_labels() -> None:
    with pytest.raises(ValueError, match=r"initial_dropped_label must be in 0..3"):
        lemke_howson(np.zeros((2, 2)), np.zeros((2, 2)), initial_dropped_label=4)


def test_failure_of_every_label_and_fallback_raises_naming_shape_and_nash_conv() -> None:
    A = np.array([[2.0, 0.0], [0.0, 1.0]])
    B = np.array([[0.0, 1.0], [1.0, 0.0]])
    # one pivot is not enough for any label; the short dynamics cannot reach 1e-6 on this mixed game
    with pytest.raises(SolverError, match=r"2x2 general-sum game \(payoffs of shape \(2, 2, 2\)\).*best NashConv reached"):
        bimatrix_nash(A, B, max_pivots=1, iterations=50)


def test_fallback_is_recorded_when_it_passes_the_check() -> None:
    # With no pivots allowed Lemke-Howson fails; the game has a strict pure equilibrium the dynamics find.
    A = np.array([[3.0, 0.0], [5.0, 1.0]])
    res = bimatrix_nash(A, A.T, max_pivots=1, iterations=200)
    assert res.method.endswith("-fallback")
    assert len(res.info["lemke_howson_failures"]) == 4
    assert len(bimatrix_nash(A, A.T, max_pivots=1, iterations=200, max_labels=2).info["lemke_howson_failures"]) == 2
    np.testing.assert_allclose(res.distributions[0], [0.0, 1.0])


# -- three or more players --------------------------------------------------------------
def test_three_players_strictly_dominant_profile() -> None:
    rng = np.random.default_rng(2)
    U = rng.normal(size=(3, 4, 2, 3))
    for p, best in enumerate((1, 3, 0)):
        index: list[slice | int] = [slice(None)] * 3
        index[p] = best
        U[tuple(index) + (p,)] += 10.0  # member `best` strictly dominates for player p
    sigma = MetaSolver("nash")(U)
    for p, best in enumerate((1, 3, 0)):
        assert sigma[p][best] == pytest.approx(1.0)
    assert sigma.nash_conv == 0.0
    assert sigma.info["converged"]


def _zero_sum_polymatrix(n: int, seed: int) -> np.ndarray:
    """Three players on a triangle, each edge a zero-sum matrix game: no-regret averages approach Nash."""
    rng = np.random.default_rng(seed)
    M01, M12, M20 = (rng.normal(size=(n, n)) for _ in range(3))
    i0, i1, i2 = np.ix_(range(n), range(n), range(n))
    U = np.zeros((n, n, n, 3))
    U[..., 0] = M01[i0, i1] - M20[i2, i0]
    U[..., 1] = -M01[i0, i1] + M12[i1, i2]
    U[..., 2] = -M12[i1, i2] + M20[i2, i0]
    return U


def test_three_players_iterative_method_reaches_small_nash_conv() -> None:
    U = _zero_sum_polymatrix(4, seed=0)
    sigma = MetaSolver("nash", iterations=4000)(U)
    assert sigma.nash_conv == pytest.approx(meta_nash_conv(U, sigma), abs=1e-12)
    assert sigma.nash_conv == pytest.approx(sigma.info["nash_conv"], abs=1e-12)
    assert sigma.nash_conv < 0.05 * np.ptp(U)
    # better than the uniform profile it starts from
    assert sigma.nash_conv < meta_nash_conv(U, [np.full(4, 0.25)] * 3)


def test_iterative_nash_reports_what_it_reached_on_random_games() -> None:
    rng = np.random.default_rng(5)
    for _ in range(3):
        U = rng.normal(size=(3, 3, 3, 3))
        res = iterative_nash(U, iterations=500)
        reached = meta_nash_conv(U, res.distributions)
        assert res.info["nash_conv"] == pytest.approx(reached, abs=1e-12)
        assert res.info["converged"] == (reached <= 1e-6 * np.ptp(U))


def test_iterative_nash_refuses_unknown_dynamics() -> None:
    with pytest.raises(ValueError, match=r"dynamics must be a non-empty subset of \('prd', 'rm', 'fp'\)"):
        iterative_nash(np.zeros((2, 2, 2, 3)), dynamics=("cfr",))


# -- rectified Nash -----------------------------------------------------------------------
def test_rectified_rock_paper_scissors() -> None:
    sigma = MetaSolver("rectified_nash")(np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float))
    # rock (0) beats scissors (2) and ties rock: the Nash weights on {rock, scissors}, renormalised
    np.testing.assert_allclose(sigma.rectified[0][0], [0.5, 0.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(sigma.rectified[0][1], [0.5, 0.5, 0.0], atol=1e-9)
    np.testing.assert_allclose(sigma.rectified[1][2], [0.0, 0.5, 0.5], atol=1e-9)
    assert sorted(sigma.rectified[0]) == [0, 1, 2]
    assert sigma.info["unrectified"] == []


def test_rectified_general_sum_uses_own_payoff_against_opponents() -> None:
    A = np.array([[2.0, 0.0], [0.0, 1.0]])
    B = np.array([[0.0, 1.0], [1.0, 0.0]])
    U = np.stack([A, B], axis=-1)
    sigma = MetaSolver("rectified_nash")(U)
    x, y = sigma[0], sigma[1]
    # row member 0 gets (2, 0) vs column's (0, 1): beats-or-ties only column member 0
    np.testing.assert_allclose(sigma.rectified[0][0], [1.0, 0.0])
    # row member 1 gets (0, 1) vs (1, 0): only column member 1
    np.testing.assert_allclose(sigma.rectified[0][1], [0.0, 1.0])
    # column member 0 gets (0, 1) vs row's (2, 0): only row member 1
    np.testing.assert_allclose(sigma.rectified[1][0], [0.0, 1.0])
    assert x.sum() == pytest.approx(1.0) and y.sum() == pytest.approx(1.0)


def test_rectified_falls_back_to_nash_visibly_when_a_member_beats_no_one() -> None:
    # a game where every cell favours the column player: row members beat nobody
    U = np.stack([np.zeros((2, 2)), np.array([[1.0, 2.0], [2.0, 1.0]])], axis=-1)
    sigma = MetaSolver("rectified_nash")(U)
    row_support = np.flatnonzero(sigma[0] > 1e-9)
    assert sorted(p for p, _ in sigma.info["unrectified"] if p == 0) == [0] * len(row_support)
    for i in row_support:
        np.testing.assert_allclose(sigma.rectified[0][int(i)], sigma[1])


def test_rectified_opponents_only_for_two_players() -> None:
    with pytest.raises(ValueError, match="two-player"):
        rectified_opponents(np.zeros((2, 2, 2, 3)), (np.ones(2) / 2, np.ones(2) / 2))
