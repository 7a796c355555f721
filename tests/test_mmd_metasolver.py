"""MMD as PSRO's meta-solver (``solver="mmd"``): magnetic mirror descent on the simplex, checked against an LP
solved here with scipy, the logit-QRE fixed point, and PSRO on Kuhn."""

import numpy as np
import pytest
from scipy.optimize import linprog

import pbmarl as pb
from pbmarl.solvers import MetaSolver, magnetic_mirror_descent, meta_nash_conv, solve_mmd


def _lp_value(A: np.ndarray) -> float:
    """The row player's value of the zero-sum matrix game `A`: max_x min_j (x A)_j, as one LP."""
    m, n = A.shape
    c = np.r_[np.zeros(m), -1.0]                        # maximise v
    A_ub = np.c_[-A.T, np.ones(n)]                       # v - (x A)_j <= 0 for every column j
    A_eq = np.r_[np.ones(m), 0.0][None]
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=[1.0], bounds=[(0, None)] * m + [(None, None)])
    assert res.success
    return float(-res.fun)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_last_iterate_reaches_the_value_of_a_random_zero_sum_game(seed):
    A = np.random.default_rng(seed).normal(size=(6, 8))
    U = np.stack([A, -A], axis=-1)
    sigma = MetaSolver("mmd")(U)
    scale = float(np.ptp(A))
    assert sigma[0] @ A @ sigma[1] == pytest.approx(_lp_value(A), abs=1e-3 * scale)
    assert sigma.nash_conv <= 1e-2 * scale
    assert sigma.method == "mmd"


def test_biased_rock_paper_scissors():
    """Winning with rock pays 2: the equilibrium is (1/4, 1/2, 1/4) for both, value 0."""
    A = np.array([[0.0, -1.0, 2.0], [1.0, 0.0, -1.0], [-2.0, 1.0, 0.0]])
    sigma = MetaSolver("mmd", iterations=4000)(np.stack([A, -A], axis=-1))
    for p in range(2):
        np.testing.assert_allclose(sigma[p], [0.25, 0.5, 0.25], atol=1e-4)
    assert _lp_value(A) == pytest.approx(0.0, abs=1e-9)


def test_a_fixed_magnet_converges_to_the_logit_qre():
    """magnet_every=0: the uniform magnet stays, and the fixed point is x_i proportional to exp(v_i / alpha)
    (v the payoffs divided by the table's range, against the other's mixture): the logit QRE of temperature
    alpha."""
    A = np.random.default_rng(3).normal(size=(4, 5))
    U = np.stack([A, -A], axis=-1)
    scale = float(U.max() - U.min())  # the range of the whole table, as every dynamic divides by
    alpha = 0.2
    sigma = solve_mmd(U, iterations=3000, alpha=alpha, magnet_every=0)
    v0, v1 = (A / scale) @ sigma[1], -(sigma[0] @ (A / scale))
    for x, v in ((sigma[0], v0), (sigma[1], v1)):
        qre = np.exp((v - v.max()) / alpha)
        np.testing.assert_allclose(x, qre / qre.sum(), atol=1e-8)


def test_three_players_stay_on_the_simplex():
    U = np.random.default_rng(4).normal(size=(2, 3, 2, 3))
    sigma = MetaSolver("mmd", iterations=200)(U)
    assert [s.shape for s in sigma] == [(2,), (3,), (2,)]
    assert all(abs(s.sum() - 1) < 1e-12 and (s >= 0).all() for s in sigma)
    assert sigma.nash_conv == pytest.approx(meta_nash_conv(U, sigma), abs=1e-12)


@pytest.mark.parametrize("options, message", [
    ({"alpha": 0.0}, "alpha must be a positive number, got 0.0"),
    ({"stepsize": -1.0}, "stepsize must be a positive number, got -1.0"),
    ({"magnet_every": -1}, "magnet_every must be a non-negative integer"),
])
def test_bad_options_are_refused_by_name(options, message):
    U = np.zeros((2, 2, 2))
    with pytest.raises(ValueError, match=message):
        next(magnetic_mirror_descent(U, **options))
    with pytest.raises(ValueError, match=message):
        MetaSolver("mmd", **options)(U)


def test_psro_with_the_mmd_meta_solver_on_kuhn():
    psro = pb.PSRO("kuhn_poker", solver="mmd", stop_exploitability=1e-3, max_iterations=20)
    psro.run(progress=False)
    assert psro.records[-1].exploitability <= 1e-3
    assert psro.solver.name == "mmd"
