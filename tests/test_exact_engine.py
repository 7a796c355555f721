"""Exact payoffs and NashConv, checked against OpenSpiel's own routines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python import policy as osp
from open_spiel.python.algorithms import exploitability as os_exploitability
from open_spiel.python.algorithms import policy_aggregator
from openspiel_refs import GOOF3, KUHN, KUHN3, LEDUC, openspiel_value, to_openspiel

import pbmarl as pb
from pbmarl.evaluation.engine import expected_payoffs, payoffs_where
from pbmarl.evaluation.realization import policy_tables, realization_plans, terminal_reach
from pbmarl.policies.base import Policy

GAMES = [KUHN, LEDUC, KUHN3, GOOF3, "matrix_rps"]


def random_population(game: pb.games.Game, n: int, seed: int) -> pb.Population:
    pop = pb.Population(game)
    for p in range(game.num_players):
        for i in range(n):
            pop.add(p, pb.TabularPolicy.random(game, seed=seed + 100 * p + i, concentration=0.5))
    return pop


def random_sigma(sizes: tuple[int, ...], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.ones(n)) for n in sizes]


# -- payoffs ----------------------------------------------------------------------
@pytest.mark.parametrize("name", GAMES)
def test_filled_cells_equal_openspiel_policy_value(name: str) -> None:
    game = pb.load_game(name)
    n = 2 if game.num_players == 3 else 3
    pop = random_population(game, n, seed=1)
    table = pb.PayoffTable(pop)
    assert pb.ExactEvaluator(game).fill(table) == n**game.num_players
    assert table.exact.all()
    rng = np.random.default_rng(0)
    for cell in {tuple(int(i) for i in rng.integers(n, size=game.num_players)) for _ in range(4)}:
        joint = to_openspiel(game, [pop[p][c] for p, c in enumerate(cell)])
        np.testing.assert_allclose(table[cell], openspiel_value(game, joint), atol=1e-9, rtol=0)


def test_fill_after_growth_computes_only_new_plans_and_cells() -> None:
    game = pb.load_game(LEDUC)
    pop = random_population(game, 4, seed=2)
    table = pb.PayoffTable(pop)
    table.update((0, 0), [[1.5, -1.5]])  # a sampled cell the exact fill must not touch
    ev = pb.ExactEvaluator(game)
    assert ev.fill(table) == 15 and ev.plans_computed == 8
    for p in range(2):
        pop.add(p, pb.TabularPolicy.random(game, seed=50 + p))
    assert ev.fill(table) == 9
    assert ev.plans_computed == 10  # one new plan per player, not a recomputation of all
    assert ev.fill(table) == 0
    reference = pb.ExactEvaluator(game).payoffs([pop[0], pop[1]])
    got = table.values
    np.testing.assert_allclose(got[1:], reference[1:], atol=1e-12)
    np.testing.assert_allclose(got[0, 1:], reference[0, 1:], atol=1e-12)
    np.testing.assert_array_equal(got[0, 0], [1.5, -1.5])
    assert table.counts[0, 0] == 1 and not table.exact[0, 0]


def test_payoffs_where_matches_full_product_on_scattered_masks() -> None:
    game = pb.load_game(KUHN3)
    tree = game.tree()
    rng = np.random.default_rng(3)
    R = []
    for p in range(3):
        tables = policy_tables([pb.TabularPolicy.random(game, seed=10 * p + i) for i in range(3 + p)], tree, p)
        R.append(terminal_reach(realization_plans(tables, tree.infosets[p], tree.num_actions), tree, p))
    full = expected_payoffs(tree, R)
    for density in (0.05, 0.5, 1.0):
        mask = rng.random(full.shape[:-1]) < density
        mask[1] = True  # a whole slice, as after adding a member
        got = payoffs_where(tree, R, mask)
        np.testing.assert_allclose(got[mask], full[mask], atol=1e-12)
        assert np.isnan(got[~mask]).all()


def test_mixture_payoff_is_weighted_sum_of_member_payoffs() -> None:
    game = pb.load_game(LEDUC)
    pop = random_population(game, 3, seed=4)
    table = pb.PayoffTable(pop)
    ev = pb.ExactEvaluator(game)
    ev.fill(table)
    sigma = random_sigma(pop.sizes, seed=5)
    mix = pop.mixture(sigma)
    expected = np.einsum("i,j,ijk->k", sigma[0], sigma[1], table.values)
    np.testing.assert_allclose(ev.evaluate(mix), expected, atol=1e-12)
    np.testing.assert_allclose(ev.evaluate([mix[0], pop[1][2]]), np.einsum("i,ik->k", sigma[0], table.values[:, 2]), atol=1e-12)


def test_mutated_policy_is_recomputed_not_served_stale() -> None:
    game = pb.load_game(KUHN)
    pi, other = pb.TabularPolicy.random(game, seed=6), pb.TabularPolicy.random(game, seed=7)
    ev = pb.ExactEvaluator(game)
    before = ev.evaluate([pi, other])
    pi.set_row("0", [0.0, 1.0])
    pi.set_row("2", [1.0, 0.0])
    after = ev.evaluate([pi, other])
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, pb.ExactEvaluator(game).evaluate([pi, other]), atol=1e-15)
    np.testing.assert_allclose(after, openspiel_value(game, to_openspiel(game, [pi, other])), atol=1e-9)


def test_neural_and_fixed_policies_are_tabulated_in_one_batch() -> None:
    game = pb.load_game(LEDUC)
    mlp = pb.MLPPolicy(game, hidden=(16,), seed=0)
    tree = game.tree()
    table = policy_tables(mlp, tree, 0)
    assert table.shape == (tree.infosets[0].size, game.num_actions)
    np.testing.assert_allclose(table.sum(axis=1), 1.0)
    assert (table[~tree.infosets[0].legal] == 0).all()
    tab = pb.TabularPolicy(game)
    for p in range(2):
        rows = [tab.index[k] for k in tree.infosets[p].keys]
        tab.table[rows] = policy_tables(mlp, tree, p)
    ev = pb.ExactEvaluator(game)
    np.testing.assert_allclose(ev.evaluate([mlp, pb.RandomPolicy(game)]), ev.evaluate([tab, pb.RandomPolicy(game)]), atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), concentration=st.sampled_from([0.05, 1.0, 5.0]))
def test_realization_plans_satisfy_sequence_form_constraints(seed: int, concentration: float) -> None:
    game = pb.load_game(LEDUC)
    tree = game.tree()
    infos = tree.infosets[1]
    tables = policy_tables([pb.TabularPolicy.random(game, seed=seed, concentration=concentration)], tree, 1)
    x = realization_plans(tables, infos, tree.num_actions)[0]
    assert x[0] == 1.0 and (x >= 0).all()
    # sum over actions of x(I, a) equals x(parent_seq(I)) at every information set
    np.testing.assert_allclose(x[1:].reshape(infos.size, -1).sum(axis=1), x[infos.parent_seq], atol=1e-12)


# -- NashConv ------------------------------------------------------------------------
@pytest.mark.parametrize("name", [KUHN, LEDUC, KUHN3])
def test_nash_conv_of_random_profile_equals_openspiel(name: str) -> None:
    game = pb.load_game(name)
    profile = [pb.TabularPolicy.random(game, seed=20 + p) for p in range(game.num_players)]
    ours = pb.exploitability(game, profile)
    theirs = os_exploitability.nash_conv(game.pyspiel_game, to_openspiel(game, profile), return_only_nash_conv=False)
    assert ours.nash_conv == pytest.approx(theirs.nash_conv, abs=1e-9)
    np.testing.assert_allclose(ours.per_player, theirs.player_improvements, atol=1e-9)
    assert ours.exploitability == pytest.approx(ours.nash_conv / game.num_players, abs=1e-15)


@pytest.mark.parametrize("name, n", [(KUHN, 4), (LEDUC, 3), (KUHN3, 2)])
def test_nash_conv_of_population_mixture_equals_openspiel_aggregator(name: str, n: int) -> None:
    game = pb.load_game(name)
    P = game.num_players
    pop = random_population(game, n, seed=30)
    sigma = random_sigma(pop.sizes, seed=31)
    ours = pb.exploitability(game, pop, sigma)
    # (1) our realisation-weighted policy, fed to OpenSpiel's NashConv
    bridged = os_exploitability.nash_conv(game.pyspiel_game, pb.evaluation.to_openspiel_policy(game, pop, sigma))
    assert ours.nash_conv == pytest.approx(bridged, abs=1e-9)
    # (2) OpenSpiel's own PolicyAggregator over the same members and weights
    members = [[to_openspiel(game, [pi] * P) for pi in pop[p]] for p in range(P)]
    aggregated = policy_aggregator.PolicyAggregator(game.pyspiel_game).aggregate(
        list(range(P)), members, [list(map(float, w)) for w in sigma]
    )
    assert ours.nash_conv == pytest.approx(os_exploitability.nash_conv(game.pyspiel_game, aggregated), abs=1e-9)


def test_known_kuhn_values() -> None:
    game = pb.load_game(KUHN)
    uniform = pb.exploitability(game, [pb.RandomPolicy(game)] * 2)
    reference = os_exploitability.nash_conv(game.pyspiel_game, osp.UniformRandomPolicy(game.pyspiel_game))
    assert uniform.nash_conv == pytest.approx(reference, abs=1e-12)
    assert uniform.nash_conv == pytest.approx(11 / 12, abs=1e-12)
    # an analytic equilibrium (alpha = 0); actions: 0 pass/fold, 1 bet/call
    nash = pb.TabularPolicy(game)
    rows = {"0": [1, 0], "1": [1, 0], "2": [1, 0], "0pb": [1, 0], "1pb": [2 / 3, 1 / 3], "2pb": [0, 1],
            "0p": [2 / 3, 1 / 3], "0b": [1, 0], "1p": [1, 0], "1b": [2 / 3, 1 / 3], "2p": [0, 1], "2b": [0, 1]}
    for key, probs in rows.items():
        nash.set_row(key, probs)
    result = pb.exploitability(game, [nash, nash])
    assert result.nash_conv == pytest.approx(0.0, abs=1e-12)
    assert result.values[0] == pytest.approx(-1 / 18, abs=1e-12)
    assert os_exploitability.nash_conv(game.pyspiel_game, to_openspiel(game, [nash, nash])) == pytest.approx(0, abs=1e-12)


def test_matrix_rps_nash_conv_equals_matrix_algebra() -> None:
    A = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
    rng = np.random.default_rng(8)
    for game in (pb.load_game("matrix_rps"), pb.MatrixGame(A)):
        x, y = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3))
        result = pb.exploitability(game, [pb.policies.FixedPolicy(game, x), pb.policies.FixedPolicy(game, y)])
        value = x @ A @ y
        np.testing.assert_allclose(result.values, [value, -value], atol=1e-12)
        np.testing.assert_allclose(result.br_values, [(A @ y).max(), (-(x @ A)).max()], atol=1e-12)
        assert result.nash_conv == pytest.approx((A @ y).max() - (x @ A).min(), abs=1e-12)


def test_exploitability_repr_names_both_quantities() -> None:
    game = pb.load_game(KUHN)
    text = repr(pb.exploitability(game, [pb.RandomPolicy(game)] * 2))
    assert "nash_conv=0.916667" in text and "exploitability=0.458333 (nash_conv / 2 players)" in text


# -- bad input -----------------------------------------------------------------------
class _NotEnumerable(pb.MatrixGame):
    @property
    def enumerable(self) -> bool:
        return False


class _Broken(Policy):
    """Answers single states (so a Population accepts it) but fails on a whole batch."""

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: object) -> np.ndarray:
        if len(legal_mask) > 1:
            raise RuntimeError("broken policy")
        return legal_mask.astype(float)


def test_bad_input_raises_naming_the_value() -> None:
    game = pb.load_game(KUHN)
    pop = random_population(game, 2, seed=9)
    with pytest.raises(ValueError, match="RolloutPool"):
        pb.ExactEvaluator(_NotEnumerable([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match=r"leduc_poker.*too large.*RolloutPool"):
        pb.ExactEvaluator(pb.load_game(LEDUC), max_nodes=100)
    with pytest.raises(ValueError, match="expected 2 distributions .* got 3"):
        pb.exploitability(game, pop, [[0.5, 0.5]] * 3)
    with pytest.raises(ValueError, match=r"player 1's distribution must have 2 entries.*\[0.2, 0.3, 0.5\]"):
        pb.exploitability(game, pop, [[0.5, 0.5], [0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match=r"simplex.*\[0.7, 0.7\]"):
        pb.exploitability(game, pop, [[0.5, 0.5], [0.7, 0.7]])
    with pytest.raises(ValueError, match="sigma"):
        pb.exploitability(game, pop)
    leduc_policy = pb.RandomPolicy(pb.load_game(LEDUC))
    with pytest.raises(ValueError, match="made for game 'leduc_poker', not 'kuhn_poker'"):
        pb.exploitability(game, [leduc_policy, pb.RandomPolicy(game)])
    with pytest.raises(ValueError, match="one strategy per player"):
        pb.exploitability(game, [pb.RandomPolicy(game)])
    with pytest.raises(TypeError, match="Policy"):
        pb.exploitability(game, [pb.RandomPolicy(game), "uniform"])
    with pytest.raises(ValueError, match="not bound to a Population"):
        pb.ExactEvaluator(game).fill(pb.PayoffTable.from_array(np.zeros((2, 2))))
    with pytest.raises(TypeError, match="OpenSpiel game"):
        pb.evaluation.to_openspiel_policy(pb.MatrixGame([[0, 1], [1, 0]]), [pb.RandomPolicy(pb.MatrixGame([[0, 1], [1, 0]]))] * 2)


def test_failed_fill_leaves_table_unchanged() -> None:
    game = pb.load_game(KUHN)
    pop = random_population(game, 2, seed=10)
    table = pb.PayoffTable(pop)
    ev = pb.ExactEvaluator(game)
    ev.fill(table)
    pop.add(1, _Broken(game))
    table.update((1, 2), [[0.25, -0.25]])
    before = (table.values.copy(), table.evaluated.copy(), table.counts.copy())
    with pytest.raises(RuntimeError, match="broken policy"):
        ev.fill(table)
    np.testing.assert_array_equal(table.values, before[0])
    np.testing.assert_array_equal(table.evaluated, before[1])
    np.testing.assert_array_equal(table.counts, before[2])
