"""MetaSolver and MetaStrategy: every solver on the simplex, simple known answers, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pbmarl.solvers import MetaSolver, MetaStrategy, meta_nash_conv, meta_regrets

RPS = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
PENNIES = np.array([[1, -1], [-1, 1]], dtype=float)
#: prisoner's dilemma, strategy 0 = cooperate, 1 = defect
PD = np.stack([np.array([[3, 0], [5, 1]]), np.array([[3, 5], [0, 1]])], axis=-1).astype(float)

#: small budgets so the property tests stay fast; the defaults are exercised elsewhere
FAST = {
    "uniform": {},
    "last": {},
    "nash": {"iterations": 300},
    "prd": {"iterations": 300},
    "rm": {"iterations": 300},
    "mmd": {"iterations": 300},
    "alpharank": {},
    "rectified_nash": {"iterations": 300},
    **{name: {} for name in ("ce", "cce", "mgce", "mgcce", "mwce", "mwcce")},
}


class Table:
    """A stand-in for pbmarl.PayoffTable: only `.values` and `.ids`."""

    def __init__(self, values: np.ndarray, ids: tuple[tuple[str, ...], ...]) -> None:
        self.values = values
        self.ids = ids


@st.composite
def payoff_arrays(draw: st.DrawFn, players: int) -> np.ndarray:
    sizes = tuple(draw(st.integers(1, 5 if players == 2 else 3)) for _ in range(players))
    values = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=32)
    # a few distinct values make ties and degenerate games common
    small_ints = st.integers(-2, 2).map(float)
    return draw(arrays(np.float64, sizes + (players,), elements=st.one_of(values, small_ints)))


def _assert_on_simplex(sigma: MetaStrategy, sizes: tuple[int, ...]) -> None:
    assert len(sigma) == len(sizes)
    for p, n in enumerate(sizes):
        w = sigma[p]
        assert w.shape == (n,)
        assert np.all(w >= 0.0)
        assert abs(w.sum() - 1.0) < 1e-9


@pytest.mark.parametrize("name", MetaSolver.names)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(U=payoff_arrays(2))
def test_every_solver_lies_on_the_simplex_two_players(name: str, U: np.ndarray) -> None:
    sigma = MetaSolver(name, **FAST[name])(U)
    _assert_on_simplex(sigma, U.shape[:-1])
    assert sigma.nash_conv == pytest.approx(meta_nash_conv(U, sigma), abs=1e-12)
    assert sigma.nash_conv >= 0.0


@pytest.mark.parametrize("name", [n for n in MetaSolver.names if n != "rectified_nash"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(U=payoff_arrays(3))
def test_every_solver_lies_on_the_simplex_three_players(name: str, U: np.ndarray) -> None:
    sigma = MetaSolver(name, **FAST[name])(U)
    _assert_on_simplex(sigma, U.shape[:-1])
    assert sigma.nash_conv == pytest.approx(meta_nash_conv(U, sigma), abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(U=payoff_arrays(2))
def test_two_player_nash_is_an_equilibrium(U: np.ndarray) -> None:
    sigma = MetaSolver("nash")(U)
    span = max(float(np.ptp(U)), 1.0)
    assert max(meta_regrets(U, sigma)) <= 1e-6 * span
    assert sigma.method in ("lp", "lemke_howson") or sigma.method.endswith("-fallback")


# -- known answers ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["nash", "rectified_nash", "prd", "rm", "alpharank"])
def test_rock_paper_scissors_is_uniform(name: str) -> None:
    sigma = MetaSolver(name)(RPS)
    for p in range(2):
        np.testing.assert_allclose(sigma[p], np.full(3, 1 / 3), atol=1e-6)


def test_matching_pennies_is_half_half() -> None:
    sigma = MetaSolver("nash")(PENNIES)
    assert sigma.method == "lp"
    for p in range(2):
        np.testing.assert_allclose(sigma[p], [0.5, 0.5], atol=1e-9)
    assert sigma.nash_conv < 1e-9


@pytest.mark.parametrize("name", ["nash", "prd", "rm", "alpharank"])
def test_prisoners_dilemma_is_defect_defect(name: str) -> None:
    sigma = MetaSolver(name)(PD)
    for p in range(2):
        np.testing.assert_allclose(sigma[p], [0.0, 1.0], atol=1e-3)


def test_uniform_is_uniform_and_last_is_last() -> None:
    U = np.random.default_rng(0).normal(size=(3, 5, 2, 3))
    uniform = MetaSolver("uniform")(U)
    last = MetaSolver("last")(U)
    for p, n in enumerate(U.shape[:-1]):
        np.testing.assert_allclose(uniform[p], np.full(n, 1 / n))
        expected = np.zeros(n)
        expected[-1] = 1.0
        np.testing.assert_array_equal(last[p], expected)
    assert last.nash_conv == pytest.approx(meta_nash_conv(U, last))


# -- tables, ids and MetaStrategy ----------------------------------------------------
def test_payoff_table_like_objects_carry_their_ids() -> None:
    ids = (("a/0", "a/1", "a/2"), ("b/0", "b/1", "b/2"))
    sigma = MetaSolver("nash")(Table(np.stack([RPS, -RPS], axis=-1), ids))
    assert sigma.ids == ids
    frame = sigma.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["player", "policy", "probability"]
    assert frame["policy"].tolist() == list(ids[0] + ids[1])
    assert frame.groupby("player")["probability"].sum().tolist() == pytest.approx([1.0, 1.0])
    assert "a/1" in repr(sigma) and "nash_conv" in repr(sigma)
    assert "<table" in sigma._repr_html_()


def test_real_payoff_table_is_accepted() -> None:
    from pbmarl.payoffs import PayoffTable

    table = PayoffTable.from_array(np.stack([RPS, -RPS], axis=-1))
    sigma = MetaSolver("nash")(table)
    assert sigma.ids == table.ids
    np.testing.assert_allclose(sigma[1], np.full(3, 1 / 3), atol=1e-9)


def test_meta_strategy_is_a_read_only_sequence() -> None:
    sigma = MetaSolver("rectified_nash")(RPS)
    assert len(sigma) == 2 and sigma.num_players == 2 and sigma.sizes == (3, 3)
    assert [w.shape for w in sigma] == [(3,), (3,)]
    with pytest.raises(ValueError):
        sigma[0][0] = 1.0
    with pytest.raises(ValueError):
        sigma.rectified[0][0][0] = 1.0
    with pytest.raises(TypeError):
        sigma.info["method"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        sigma.solver = "other"  # type: ignore[misc]
    with pytest.raises(IndexError, match="0..1"):
        sigma[2]


def test_meta_strategy_refuses_distributions_off_the_simplex() -> None:
    with pytest.raises(ValueError, match="player 1's distribution"):
        MetaStrategy((np.array([0.5, 0.5]), np.array([0.7, 0.7])), solver="manual")
    with pytest.raises(ValueError, match="population sizes"):
        MetaStrategy((np.array([0.5, 0.5]), np.array([1.0])), solver="manual", ids=(("a", "b"), ("c", "d")))


def test_solver_options_are_recorded_and_used() -> None:
    solver = MetaSolver("prd", iterations=50, dt=0.1)
    assert dict(solver.options) == {"iterations": 50, "dt": 0.1}
    assert repr(solver) == "MetaSolver('prd', iterations=50, dt=0.1)"
    sigma = solver(RPS)
    assert sigma.info["options"] == {"iterations": 50, "dt": 0.1}
    assert MetaSolver.defaults("rm") == {"iterations": 10_000, "plus": False}


def test_nash_conv_helper_matches_the_function() -> None:
    U = np.random.default_rng(1).normal(size=(3, 4, 2))
    sigma = ([0.2, 0.3, 0.5], [0.25] * 4)
    assert MetaSolver("nash").nash_conv(U, sigma) == pytest.approx(meta_nash_conv(U, sigma))
    # NashConv is the sum of regrets; at a pure profile each regret is the best gain
    pure = ([1, 0, 0], [1, 0, 0, 0])
    expected = (U[:, 0, 0].max() - U[0, 0, 0]) + (U[0, :, 1].max() - U[0, 0, 1])
    assert meta_nash_conv(U, pure) == pytest.approx(expected)


# -- bad input ------------------------------------------------------------------------
def test_missing_cells_are_named_by_policy_id_and_nothing_changes() -> None:
    values = np.stack([RPS, -RPS], axis=-1)
    values[0, 2] = np.nan
    values[1, 0, 1] = np.nan
    before = values.copy()
    table = Table(values, (("p0/0", "p0/1", "p0/2"), ("p1/0", "p1/1", "p1/2")))
    for name in MetaSolver.names:
        with pytest.raises(ValueError, match=r"payoffs missing for 2 cells: \(p0/0, p1/2\), \(p0/1, p1/0\)"):
            MetaSolver(name)(table)
    np.testing.assert_array_equal(table.values, before)


def test_missing_cells_in_plain_arrays_get_default_ids() -> None:
    U = np.zeros((2, 3, 2))
    U[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match=r"payoffs missing for 1 cell: \(p0/1, p1/2\)"):
        MetaSolver("uniform")(U)


def test_unknown_solver_name_suggests_the_closest() -> None:
    with pytest.raises(ValueError, match=r"unknown meta-solver 'nahs'; did you mean 'nash'\?.*alpharank"):
        MetaSolver("nahs")
    with pytest.raises(ValueError, match="rectified_nash"):
        MetaSolver("zzz")


def test_unknown_option_is_a_type_error_listing_the_accepted() -> None:
    with pytest.raises(TypeError, match=r"unknown option 'step' for meta-solver 'prd'; accepted: iterations, dt"):
        MetaSolver("prd", step=0.1)
    with pytest.raises(TypeError, match="accepted: none"):
        MetaSolver("uniform", iterations=3)


@pytest.mark.parametrize(
    ("payoffs", "message"),
    [
        (np.zeros(3), r"shape \(3,\) are not accepted"),
        (np.zeros((2, 2, 3)), r"2 player axes but 3 payoffs per cell"),
        (np.zeros((2, 2, 2, 2)), r"3 player axes but 2 payoffs per cell"),
        (np.zeros((2, 0, 2)), "at least one policy"),
        (np.array([[np.inf, 0.0], [0.0, 0.0]]), "must be finite"),
        ([[1, 2], [3]], "regular numeric array"),
    ],
)
def test_bad_shapes_and_values_are_refused(payoffs: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MetaSolver("nash")(payoffs)


def test_ids_that_do_not_match_the_shape_are_refused() -> None:
    with pytest.raises(ValueError, match=r"ids give population sizes \(2, 3\) but the payoffs have sizes \(3, 3\)"):
        MetaSolver("nash")(Table(np.stack([RPS, -RPS], axis=-1), (("a", "b"), ("c", "d", "e"))))


def test_bad_options_are_refused_at_call_time() -> None:
    with pytest.raises(ValueError, match="gamma must be in"):
        MetaSolver("prd", gamma=0.5)(RPS)
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        MetaSolver("rm", iterations=0)(RPS)
    with pytest.raises(ValueError, match="alpha must be"):
        MetaSolver("alpharank", alpha=-1.0)(RPS)


def test_rectified_nash_refuses_more_than_two_players() -> None:
    with pytest.raises(ValueError, match=r"two-player games only.*3 players"):
        MetaSolver("rectified_nash")(np.zeros((2, 2, 2, 3)))
