"""Tabular MMD (pbmarl.evaluation.mmd, pb.MMD) against OpenSpiel's MMDDilatedEnt, an independent reference.

Same alpha and step size: the same sequence-form iterates and regularised gaps to 1e-9, step by step.
"""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms.mmd_dilated import MMDDilatedEnt

import pbmarl as pb
from pbmarl.evaluation.mmd import DilatedMMD, auto_stepsize, dilated_entropy, dilated_prox
from pbmarl.evaluation.realization import realization_plans


def _columns(tree, reference: MMDDilatedEnt, player: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenSpiel's sequence ids and the same sequences in pbmarl's numbering (1 + infoset * A + action)."""
    ours, theirs = [], []
    for key, seq in reference.infoset_actions_to_seq[player].items():
        theirs.append(seq)
        if key.startswith("***"):
            ours.append(0)
        else:
            info, action = key.split(" -=- ")
            ours.append(1 + tree.infosets[player].index[info] * tree.num_actions + int(action))
    return np.array(theirs), np.array(ours)


@pytest.mark.parametrize("name, alpha, stepsize, steps", [
    ("kuhn_poker", 0.1, None, 100),
    ("kuhn_poker", 0.05, 0.5, 100),
    ("leduc_poker", 0.2, 1.0, 4),  # OpenSpiel takes ~0.4 s per Leduc update (and its gap as long): benchmarks/mmd.py
])                                 # checks Leduc over 100 steps
def test_iterates_and_gaps_match_openspiel(name: str, alpha: float, stepsize: float | None, steps: int) -> None:
    reference = MMDDilatedEnt(pyspiel.load_game(name), alpha, stepsize)
    run = pb.MMD(name, alpha=alpha, stepsize=stepsize)
    assert run.solver.stepsize == pytest.approx(reference.stepsize, rel=1e-12)
    cols = [_columns(run.tree, reference, p) for p in (0, 1)]
    for _ in range(steps):
        reference.update_sequences()
        record = run.step()
        for p, (theirs, ours) in enumerate(cols):
            np.testing.assert_allclose(run.solver.plans[p][ours], reference.sequences[p][theirs], rtol=0, atol=1e-9)
        if name == "kuhn_poker":
            assert record.gap == pytest.approx(reference.get_gap(), abs=1e-9)
    assert record.gap == pytest.approx(reference.get_gap(), abs=1e-9)
    # the last iterate's exact NashConv is OpenSpiel's too
    from open_spiel.python.algorithms import exploitability

    assert record.nash_conv == pytest.approx(exploitability.nash_conv(reference.game, reference.get_policies()),
                                             abs=1e-9)


def test_prox_is_the_argmin_of_the_dilated_problem() -> None:
    tree = pb.load_game("leduc_poker").tree()
    infos, A = tree.infosets[0], tree.num_actions
    rng = np.random.default_rng(0)
    h = rng.normal(size=tree.num_sequences(0))
    best = realization_plans(dilated_prox(h, infos, A), infos, A)

    def objective(x: np.ndarray) -> float:
        return float(h @ x) + dilated_entropy(x, infos, A)

    for _ in range(5):  # any other behaviour does no better
        other = rng.dirichlet(np.ones(A), size=infos.size) * infos.legal
        other /= other.sum(axis=1, keepdims=True)
        assert objective(best) <= objective(realization_plans(other, infos, A)) + 1e-12


def test_auto_stepsize_is_alpha_over_the_squared_payoff_scale() -> None:
    tree = pb.load_game("kuhn_poker").tree()
    # Kuhn's largest sequence-pair payoff: 2 chips with chance 1/6 on the two-card deal
    assert auto_stepsize(tree, 0.1) == pytest.approx(0.1 / (2 / 6) ** 2)


def test_a_moving_magnet_goes_past_the_fixed_magnets_qre() -> None:
    fixed = pb.MMD("kuhn_poker", alpha=0.5, stepsize=0.5)
    moving = pb.MMD("kuhn_poker", alpha=0.5, stepsize=0.5, magnet_every=50)
    fixed.run(300, progress=False)
    moving.run(300, progress=False)
    stuck = fixed.history["exploitability"]
    assert abs(stuck.iloc[-1] - stuck.iloc[-50]) < 1e-6        # converged: the alpha-QRE (0.264 here)
    assert moving.history["exploitability"].iloc[-1] < 0.5 * stuck.iloc[-1]  # the magnet follows the iterate


def test_a_given_magnet_pulls_the_iterate_towards_it() -> None:
    game = pb.load_game("kuhn_poker")
    tree = game.tree()
    always_bet = []
    for p in (0, 1):
        pi = pb.TabularPolicy(game)
        rows = [pi.index[k] for k in tree.infosets[p].keys]
        pi.table[rows] = np.where(tree.infosets[p].legal, [0.05, 0.95], 0.0)
        always_bet.append(pi)
    run = pb.MMD(game, always_bet, alpha=5.0, stepsize=1.0)
    run.run(100, progress=False)
    tables = run.solver.tables()
    assert tables[0][:, 1].mean() > 0.8  # a strong magnet: the iterate stays near it
    with pytest.raises(ValueError, match="positive on every legal action"):
        DilatedMMD(tree, alpha=1.0, magnet=[np.zeros((i.size, tree.num_actions)) for i in tree.infosets])


def test_refuses_games_that_are_not_two_player_zero_sum() -> None:
    with pytest.raises(ValueError, match="two-player zero-sum"):
        pb.MMD("kuhn_poker(players=3)")


def test_a_step_too_large_to_move_the_magnet_says_so_and_keeps_the_run() -> None:
    run = pb.MMD("kuhn_poker", alpha=0.002, stepsize=1000.0, magnet_every=1)
    with np.errstate(all="ignore"):
        run.run(2, progress=False)  # the third update underflows
        kept = [t.copy() for t in run.solver.tables()]
        with pytest.raises(FloatingPointError, match=r"stepsize=1000 is too large for alpha=0\.002.*stepsize=None picks"):
            run.run(5, progress=False)
    assert run.iteration == 2 and len(run.records) == 3  # the record of the start, then two steps
    assert all(np.array_equal(a, b) for a, b in zip(kept, run.solver.tables()))


def test_an_action_of_probability_zero_adds_nothing_to_the_dilated_entropy() -> None:
    tree = pb.load_game("leduc_poker").tree()
    infos, A = tree.infosets[0], tree.num_actions
    rng = np.random.default_rng(1)
    mixed = rng.dirichlet(np.ones(A), size=infos.size) * infos.legal
    mixed /= mixed.sum(axis=1, keepdims=True)
    pure = np.zeros_like(mixed)
    pure[np.arange(infos.size), infos.legal.argmax(axis=1)] = 1.0  # the first legal action everywhere
    assert dilated_entropy(realization_plans(pure, infos, A), infos, A) == 0.0  # no entropy to lose: 0, not NaN
    half = mixed.copy()  # zero one legal action of every set with two or more, renormalise
    many = infos.legal.sum(axis=1) > 1
    half[many, infos.legal[many].argmax(axis=1)] = 0.0
    half /= half.sum(axis=1, keepdims=True)
    x = realization_plans(half, infos, A)
    parent, child = x[infos.parent_seq], x[1:].reshape(infos.size, A)
    on = (child > 0) & infos.legal
    expected = float((child[on] * np.log(child[on] / np.broadcast_to(parent[:, None], child.shape)[on])).sum())
    assert np.isfinite(expected) and dilated_entropy(x, infos, A) == pytest.approx(expected, rel=1e-12)


def test_the_gap_stays_finite_when_the_regularised_best_response_underflows() -> None:
    run = pb.MMD("leduc_poker", alpha=1e-4, stepsize=0.01)
    record = run.step()
    assert np.isfinite(record.gap) and record.gap >= -1e-9
