"""Dynamics: PRD against OpenSpiel's implementation, the simplex projection, RM and FP."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from open_spiel.python.algorithms import projected_replicator_dynamics as os_prd

from pbmarl.solvers import (
    fictitious_play,
    meta_nash_conv,
    project_simplex,
    projected_replicator_dynamics,
    regret_matching,
    solve_fictitious_play,
    solve_prd,
    solve_rm,
)


@pytest.mark.parametrize("shape", [(3, 4, 2), (2, 3, 4, 3)])
@pytest.mark.parametrize("projection", ["exact", "approx"])
def test_prd_matches_openspiel(shape: tuple[int, ...], projection: str) -> None:
    U = np.random.default_rng(len(shape)).normal(size=shape)
    # pbmarl divides payoffs by their range; hand OpenSpiel the same unit-range tensors
    unit = U / np.ptp(U)
    theirs = os_prd.projected_replicator_dynamics(
        [unit[..., p] for p in range(U.shape[-1])], prd_iterations=400, prd_dt=0.3, prd_gamma=1e-3,
        average_over_last_n_strategies=400, use_approx=projection == "approx",
    )
    ours = solve_prd(U, iterations=400, dt=0.3, gamma=1e-3, average_last=1.0, projection=projection)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    x=arrays(np.float64, st.integers(1, 12), elements=st.floats(-5, 5, allow_nan=False)),
    fraction=st.floats(0.0, 0.99),
)
def test_projection_is_the_closest_point_of_the_floored_simplex(x: np.ndarray, fraction: float) -> None:
    n = x.size
    gamma = fraction / n
    p = project_simplex(x, gamma)
    assert np.all(p >= gamma - 1e-12)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # optimality: (x - p) . (z - p) <= 0 for every z in the set; checking its vertices suffices
    for i in range(n):
        z = np.full(n, gamma)
        z[i] += 1.0 - n * gamma
        assert (x - p) @ (z - p) <= 1e-9
    np.testing.assert_allclose(p, os_prd._simplex_projection(x.copy(), gamma), atol=1e-12)


def test_prd_steps_can_be_taken_one_by_one() -> None:
    rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
    steps = projected_replicator_dynamics(rps, dt=0.1)
    first = [s.copy() for s in next(steps)]
    for s in first:  # uniform is a rest point of RPS
        np.testing.assert_allclose(s, np.full(3, 1 / 3), atol=1e-12)
    biased = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float) + np.array([[0.5], [0], [0]])
    moved = next(projected_replicator_dynamics(biased, dt=0.1))
    assert moved[0][0] > 1 / 3  # the row player shifts towards its boosted first member


def test_prd_drops_dominated_members_to_the_floor() -> None:
    U = np.random.default_rng(1).normal(size=(4, 3, 2))
    U[0, :, 0] = U[1:, :, 0].max() + 1  # member 0 strictly dominates for the row player
    last = None
    for _, last in zip(  # noqa: B007 (the last iterate is kept)
           range(3000), projected_replicator_dynamics(U, gamma=1e-4)):
        pass
    assert last is not None
    assert last[0][0] == pytest.approx(1 - 3e-4, abs=1e-6)
    np.testing.assert_allclose(last[0][1:], 1e-4, atol=1e-9)


def test_regret_matching_average_approaches_equilibrium_in_zero_sum() -> None:
    M = np.random.default_rng(4).normal(size=(12, 9))
    coarse = meta_nash_conv(M, solve_rm(M, iterations=100))
    fine = meta_nash_conv(M, solve_rm(M, iterations=5000))
    plus = meta_nash_conv(M, solve_rm(M, iterations=5000, plus=True))
    assert fine < coarse
    assert fine < 0.05 * np.ptp(M)
    assert plus < 0.01 * np.ptp(M)


def test_regret_matching_iterates_start_uniform_and_follow_regrets() -> None:
    M = np.array([[1.0, 1.0], [0.0, 0.0]])  # row member 0 is always better
    steps = regret_matching(M)
    first = next(steps)
    np.testing.assert_allclose(first[0], [0.5, 0.5])
    second = next(steps)
    np.testing.assert_allclose(second[0], [1.0, 0.0])


def test_fictitious_play_averages_best_responses() -> None:
    M = np.array([[1.0, 1.0], [0.0, 0.0]])
    averages = list(itertools.islice(fictitious_play(M), 4))
    np.testing.assert_allclose(averages[0][0], [0.5, 0.5])
    # start uniform (weight 1), then best response e_0 three times -> (0.5 + 3) / 4
    np.testing.assert_allclose(averages[3][0], [3.5 / 4, 0.5 / 4])
    rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
    assert meta_nash_conv(rps, solve_fictitious_play(rps, iterations=2000)) < 0.05


def test_prd_reaches_small_nash_conv_on_random_zero_sum() -> None:
    M = np.random.default_rng(6).normal(size=(30, 30))
    assert meta_nash_conv(M, solve_prd(M)) < 0.05 * np.ptp(M)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dt": 0.0}, "dt must be positive"),
        ({"average_last": 0.0}, r"average_last must be in \(0, 1\]"),
        ({"projection": "euclid"}, "projection must be 'exact' or 'approx'"),
        ({"iterations": 2.5}, "iterations must be a positive integer"),
    ],
)
def test_prd_option_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        solve_prd(np.zeros((2, 2)), **kwargs)  # type: ignore[arg-type]
