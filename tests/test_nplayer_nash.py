"""n-player meta-games: pure check, the logit path, sub-tables, Newton polishing and pygambit, each result naming its method."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbmarl.solvers import MetaSolver
from pbmarl.solvers.gambit import gambit_available
from pbmarl.solvers.inputs import payoff_scale
from pbmarl.solvers.logit_path import logit_path_nash
from pbmarl.solvers.nash import nplayer_nash
from pbmarl.solvers.nashconv import meta_nash_conv
from pbmarl.solvers.nplayer import batch_nash_conv, iterative_nash, newton_polish, pure_equilibria
from pbmarl.solvers.subgame import subgame_nash

METHODS = ("pure", "warm-start", "logit-path", "subgame-logit-path", "rm-", "prd-", "fp", "gambit-", "uniform")
needs_gambit = pytest.mark.skipif(not gambit_available(), reason="pygambit (pbmarl[gambit]) is not installed")


def _table(draw: st.DrawFn, players: int) -> np.ndarray:
    sizes = tuple(draw(st.integers(2, 3)) for _ in range(players))
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).normal(size=sizes + (players,))


@st.composite
def tables(draw: st.DrawFn) -> np.ndarray:
    return _table(draw, draw(st.sampled_from([3, 4, 5])))


@needs_gambit
@settings(max_examples=8, deadline=None)
@given(tables())
def test_random_tables_are_solved_below_the_tolerance_and_name_the_method(U: np.ndarray) -> None:
    tol = 1e-6
    res = nplayer_nash(U, tol=tol)
    assert res.method.startswith(METHODS)
    reached = meta_nash_conv(U, res.distributions)
    assert reached <= tol * payoff_scale(U)
    assert res.info["converged"] and res.info["nash_conv"] == pytest.approx(reached, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(tables())
def test_own_solver_reaches_the_tolerance_on_random_tables_and_names_the_method(U: np.ndarray) -> None:
    tol = 1e-6
    res = nplayer_nash(U, tol=tol, gambit=False)
    assert res.method.startswith(METHODS) and not res.method.startswith(("gambit-", "uniform"))
    reached = meta_nash_conv(U, res.distributions)
    assert reached <= tol * payoff_scale(U), res.method
    assert res.info["converged"] and res.info["nash_conv"] == pytest.approx(reached, abs=1e-12)


@pytest.mark.parametrize("shape", [(5, 5, 5), (8, 8, 8), (4, 4, 4, 4), (3, 3, 3, 3, 3)])
@pytest.mark.parametrize("seed", range(3))
def test_own_solver_is_reliable_on_larger_tables_without_pure_equilibria(shape: tuple[int, ...], seed: int) -> None:
    # the first seeds from `seed` on whose table has no pure equilibrium: only a mixed search can solve it
    rng_seed = next(s for s in range(1000 * seed, 1000 * seed + 1000)
                    if not pure_equilibria(np.random.default_rng(s).normal(size=shape + (len(shape),))).size)
    U = np.random.default_rng(rng_seed).normal(size=shape + (len(shape),))
    res = nplayer_nash(U, gambit=False)
    assert res.method.startswith("logit-path")
    assert meta_nash_conv(U, res.distributions) <= 1e-6 * payoff_scale(U)


def test_logit_path_starts_uniform_and_ends_at_an_equilibrium() -> None:
    U = np.random.default_rng(7).normal(size=(3, 4, 2, 3))
    sigma, score, info = logit_path_nash(U, target=1e-9 * payoff_scale(U))
    assert score == pytest.approx(meta_nash_conv(U, sigma), abs=1e-12) and score <= 1e-9 * payoff_scale(U)
    assert info["steps"] > 0 and info["lambda"] > 0
    # a table where every member pays the same: uniform play is already an equilibrium, at lam = 0
    flat, flat_score, _ = logit_path_nash(np.ones((2, 3, 2, 3)), target=1e-9)
    assert flat_score == 0.0 and all(np.allclose(s, 1.0 / len(s)) for s in flat)


def test_subgame_search_grows_the_warm_start_support_and_checks_the_full_table() -> None:
    rng = np.random.default_rng(3)
    U = rng.normal(size=(12, 12, 12, 3))
    small = nplayer_nash(U[:10, :10, :10], gambit=False)
    init = [np.concatenate([s, np.zeros(2)]) for s in small.distributions]
    target = 1e-6 * payoff_scale(U)
    sigma, score, info = subgame_nash(U, target=target, init=init)
    assert score <= target and meta_nash_conv(U, sigma) == pytest.approx(score, abs=1e-12)
    assert info["rounds"] >= 1 and all(n <= 12 for n in info["support_sizes"])  # type: ignore[attr-defined]
    res = nplayer_nash(U, init=init, gambit=False)
    assert res.info["converged"] and res.method.startswith(METHODS)


@settings(max_examples=6, deadline=None)
@given(tables())
def test_own_solver_reports_honestly_what_it_reached(U: np.ndarray) -> None:
    res = nplayer_nash(U, gambit=False, iterations=300)
    assert res.method.startswith(METHODS)
    reached = meta_nash_conv(U, res.distributions)
    assert res.info["nash_conv"] == pytest.approx(reached, abs=1e-12)
    assert res.info["converged"] == (reached <= 1e-6 * payoff_scale(U))
    for s in res.distributions:
        assert np.all(s >= 0) and s.sum() == pytest.approx(1.0)


def test_pure_equilibria_are_found_in_one_pass() -> None:
    U = np.zeros((2, 2, 2, 3))
    U[1, 0, 1] = [1.0, 1.0, 1.0]  # the only cell where nobody gains by moving
    U[0, 0, 0] = [0.0, 2.0, 0.0]
    found = pure_equilibria(U)
    assert [tuple(c) for c in found] == [(1, 0, 1)] or (1, 0, 1) in [tuple(c) for c in found]
    assert iterative_nash(U).method == "pure"


def test_newton_polish_reaches_machine_precision_from_a_rough_guess() -> None:
    # the first random 2x2x2 game without a pure equilibrium: every equilibrium is mixed
    seed = next(s for s in range(100) if not pure_equilibria(np.random.default_rng(s).normal(size=(2, 2, 2, 3))).size)
    U = np.random.default_rng(seed).normal(size=(2, 2, 2, 3))
    res = nplayer_nash(U, gambit=False)
    assert res.info["converged"] and "newton" in res.method
    # perturb each distribution on its own support: Newton then has the right equations to solve
    rough = tuple(0.8 * s + 0.2 * (s > 0) / (s > 0).sum() for s in res.distributions)
    assert meta_nash_conv(U, rough) > 1e-3
    polished = newton_polish(U, rough)
    assert polished is not None and meta_nash_conv(U, polished) < 1e-12


def test_batch_nash_conv_matches_one_at_a_time() -> None:
    rng = np.random.default_rng(0)
    U = rng.normal(size=(3, 4, 2, 5, 4))
    profiles = [tuple(rng.dirichlet(np.ones(n)) for n in U.shape[:-1]) for _ in range(5)]
    np.testing.assert_allclose(batch_nash_conv(U, profiles), [meta_nash_conv(U, p) for p in profiles], atol=1e-12)


def test_metasolver_warm_starts_from_the_previous_answer_and_still_checks() -> None:
    rng = np.random.default_rng(1)
    U = rng.normal(size=(3, 3, 3, 3))
    solver = MetaSolver("nash", gambit=False)
    first = solver(U[:2, :2, :2])
    second = solver(U)
    assert first.method and second.method.startswith(METHODS)
    assert second.nash_conv == pytest.approx(meta_nash_conv(U, second), abs=1e-12)


def test_gambit_is_never_imported_unless_asked() -> None:
    code = ("import sys, numpy as np; from pbmarl.solvers import MetaSolver; "
            "U = np.random.default_rng(0).normal(size=(2, 2, 2, 3)); "
            "print(MetaSolver('nash', gambit=False)(U).method); print('pygambit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[-1] == "False"


def test_bad_gambit_option_is_named() -> None:
    with pytest.raises(ValueError, match="gambit must be True, False or 'auto'"):
        nplayer_nash(np.zeros((2, 2, 2, 3)), gambit="yes")


def test_a_saved_three_player_run_resumes_with_the_same_warm_started_meta_strategy(tmp_path: Path) -> None:
    import pbmarl as pb

    psro = pb.PSRO("kuhn_poker(players=3)", solver=MetaSolver("nash", gambit=False), save_dir=tmp_path / "run")
    psro.run(5, progress=False)
    assert psro.meta_strategy.method.startswith(METHODS)
    resumed = pb.PSRO.load(tmp_path / "run", solver=MetaSolver("nash", gambit=False))
    for p in range(3):
        np.testing.assert_allclose(resumed.meta_strategy[p], psro.meta_strategy[p], atol=1e-9)
    record = resumed.step()
    assert record.iteration == 6 and record.meta_nash_conv is not None and record.meta_nash_conv < 1e-5


def test_a_player_with_one_member_does_not_stop_the_logit_path() -> None:
    pennies = np.array([[1.0, -1.0], [-1.0, 1.0]])
    U = np.zeros((2, 1, 2, 3))  # player 1 has one member; players 0 and 2 play matching pennies
    U[:, 0, :, 0], U[:, 0, :, 2] = pennies, -pennies
    res = nplayer_nash(U, gambit=False)
    assert res.method.startswith("logit-path") and res.info["converged"]
    np.testing.assert_allclose(res.distributions[0], [0.5, 0.5], atol=1e-9)
    np.testing.assert_allclose(res.distributions[2], [0.5, 0.5], atol=1e-9)
