"""n-player meta-games: pure check, Newton-polished dynamics and pygambit, each result naming its method."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbmarl.solvers import MetaSolver
from pbmarl.solvers.gambit import gambit_available
from pbmarl.solvers.inputs import payoff_scale
from pbmarl.solvers.nash import nplayer_nash
from pbmarl.solvers.nashconv import meta_nash_conv
from pbmarl.solvers.nplayer import batch_nash_conv, iterative_nash, newton_polish, pure_equilibria

METHODS = ("pure", "warm-start", "rm-", "prd-", "fp", "gambit-", "uniform")
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
