"""Alpha-rank against OpenSpiel's `open_spiel.python.egt.alpharank` on the same tables."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from open_spiel.python.egt import alpharank as os_alpharank
from open_spiel.python.egt import utils as os_utils
from scipy.special import logsumexp

from pbmarl.solvers import MetaSolver, alpharank_profiles, solve_alpharank
from pbmarl.solvers.alpharank import _log_gth, _log_rates, _scaled_solve


def openspiel_alpharank(U: np.ndarray, *, alpha: float, m: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """OpenSpiel's profile distribution (flat, in its own profile ids) and its per-player marginals."""
    tables = [U[..., p] for p in range(U.shape[-1])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its closed form overflows harmlessly for large gaps
        _, _, pi, _, _ = os_alpharank.compute(tables, alpha=alpha, m=m)
    sizes = os_utils.get_num_strats_per_population(tables, False)
    marginals = [np.zeros(n) for n in sizes]
    for profile_id, mass in enumerate(pi):
        profile = os_utils.get_strat_profile_from_id(sizes, profile_id)
        for p, i in enumerate(profile):
            marginals[p][i] += mass
    return pi, marginals


CASES = [
    ((3, 3, 2), 1.0, 5),
    ((4, 2, 2), 10.0, 20),
    ((5, 5, 2), 100.0, 50),
    ((2, 3, 2, 3), 1.0, 10),
    ((3, 3, 3, 3), 5.0, 50),
    ((2, 4, 3, 3), 100.0, 50),
]


@pytest.mark.parametrize(("shape", "alpha", "m"), CASES)
def test_alpharank_matches_openspiel(shape: tuple[int, ...], alpha: float, m: int) -> None:
    U = np.random.default_rng(len(shape) * 100 + int(alpha)).uniform(-1, 1, size=shape)
    pi, marginals = openspiel_alpharank(U, alpha=alpha, m=m)
    ours = alpharank_profiles(U, alpha=alpha, m=m)
    np.testing.assert_allclose(ours.ravel(), pi, atol=1e-9)
    sigma = MetaSolver("alpharank", alpha=alpha, m=m)(U)
    for p, expected in enumerate(marginals):
        np.testing.assert_allclose(sigma[p], expected, atol=1e-9)
    np.testing.assert_allclose(sigma.info["profile_distribution"], ours, atol=1e-12)


def test_alpharank_matches_openspiel_on_a_known_game() -> None:
    # prisoner's dilemma: all mass on (defect, defect)
    pd = np.stack([np.array([[3, 0], [5, 1]]), np.array([[3, 5], [0, 1]])], axis=-1).astype(float)
    pi, _ = openspiel_alpharank(pd, alpha=10.0, m=20)
    np.testing.assert_allclose(alpharank_profiles(pd, alpha=10.0, m=20).ravel(), pi, atol=1e-12)
    assert solve_alpharank(pd, alpha=10.0, m=20)[0][1] == pytest.approx(1.0, abs=1e-6)


def test_log_space_elimination_agrees_with_the_fast_solve_and_openspiel() -> None:
    U = np.random.default_rng(9).uniform(-1, 1, size=(3, 4, 2))
    pi, _ = openspiel_alpharank(U, alpha=10.0, m=20)
    log_rates = _log_rates(U, alpha=10.0, m=20)
    np.testing.assert_allclose(np.exp(_log_gth(log_rates)), pi, atol=1e-12)
    np.testing.assert_allclose(_scaled_solve(log_rates), pi, atol=1e-12)


def test_coordination_game_where_openspiel_finds_two_stationary_distributions() -> None:
    # Two strict equilibria left only at rates ~exp(-alpha * m): OpenSpiel's eigenvector test
    # sees two stationary distributions and raises; by symmetry the answer is half on each.
    U = np.stack([np.eye(2), np.eye(2)], axis=-1)
    with pytest.raises(ValueError, match="Expected 1 stationary distribution"):
        openspiel_alpharank(U, alpha=100.0, m=50)
    pi = alpharank_profiles(U)
    np.testing.assert_allclose(pi, [[0.5, 0.0], [0.0, 0.5]], atol=1e-9)


def test_numerically_reducible_chain_is_solved_not_refused() -> None:
    # a game whose row-scaled chain splits into closed groups (found by search, seed fixed)
    rng = np.random.default_rng(0)
    for _ in range(200):
        U = rng.uniform(-10, 10, size=(5, 5, 2))
        if _scaled_solve(_log_rates(U, alpha=100.0, m=50)) is None:
            break
    else:
        pytest.fail("no numerically reducible example found")
    pi = alpharank_profiles(U).ravel()
    assert np.all(pi >= 0) and pi.sum() == pytest.approx(1.0)
    # global balance in log space, where even masses like exp(-27000) are kept: for every
    # profile, the mass flowing out equals the mass flowing in
    log_rates = _log_rates(U, alpha=100.0, m=50)
    log_pi = _log_gth(log_rates)
    np.testing.assert_allclose(np.exp(log_pi), pi, atol=1e-12)
    out_flow = log_pi + logsumexp(log_rates, axis=1)
    in_flow = logsumexp(log_pi[:, None] + log_rates, axis=0)
    np.testing.assert_allclose(out_flow, in_flow, rtol=1e-9)
    assert np.ptp(log_pi) > 745  # masses span more than float64 can hold: the fast path could not


def test_too_many_profiles_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match=r"dense 2601x2601 Markov chain.*max_profiles=2500"):
        alpharank_profiles(np.zeros((51, 51, 2)))
