"""Exact best responses, checked against OpenSpiel's BestResponsePolicy and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from open_spiel.python import policy as osp
from open_spiel.python.algorithms import best_response, policy_aggregator
from openspiel_refs import GOOF3, KUHN, KUHN3, LEDUC, openspiel_value, to_openspiel

import pbmarl as pb
from pbmarl.evaluation.engine import best_response_values, opponent_reach
from pbmarl.evaluation.realization import realization_plans, terminal_reach
from pbmarl.games.tree import GameTree, PlayerInfosets


def openspiel_br_value(game: pb.games.Game, player: int, joint: osp.Policy) -> float:
    root = game.pyspiel_game.new_initial_state()
    return float(best_response.BestResponsePolicy(game.pyspiel_game, player, joint).value(root))


def assert_pure_on_legal(game: pb.games.Game, player: int, br: pb.TabularPolicy) -> None:
    infos = game.tree().infosets[player]
    rows = br.table[[br.index[k] for k in infos.keys]]
    assert ((rows == 0) | (rows == 1)).all() and (rows.sum(axis=1) == 1).all()
    assert (rows[~infos.legal] == 0).all()


@pytest.mark.parametrize("name", [KUHN, LEDUC, KUHN3])
def test_br_value_equals_openspiel_and_is_attained(name: str) -> None:
    game = pb.load_game(name)
    P = game.num_players
    profile = [pb.TabularPolicy.random(game, seed=40 + p, concentration=0.5) for p in range(P)]
    joint = to_openspiel(game, profile)
    learner = pb.ExactBestResponse(game)
    for player in range(P):
        br, value = learner.best_response_with_value(player, profile)
        assert learner.last_value == value
        assert value == pytest.approx(openspiel_br_value(game, player, joint), abs=1e-9)
        assert_pure_on_legal(game, player, br)
        deviated = [br if q == player else profile[q] for q in range(P)]
        assert learner.evaluator.evaluate(deviated)[player] == pytest.approx(value, abs=1e-9)
        assert openspiel_value(game, to_openspiel(game, deviated))[player] == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("name, n", [(KUHN, 3), (LEDUC, 3), (KUHN3, 2)])
def test_br_against_population_mixture_equals_openspiel(name: str, n: int) -> None:
    game = pb.load_game(name)
    P = game.num_players
    pop = pb.Population(game)
    for p in range(P):
        for i in range(n):
            pop.add(p, pb.TabularPolicy.random(game, seed=60 + 10 * p + i, concentration=0.3))
    rng = np.random.default_rng(61)
    sigma = [rng.dirichlet(np.ones(n)) for _ in range(P)]
    bridged = pb.evaluation.to_openspiel_policy(game, pop, sigma)
    members = [[to_openspiel(game, [pi] * P) for pi in pop[p]] for p in range(P)]
    aggregated = policy_aggregator.PolicyAggregator(game.pyspiel_game).aggregate(
        list(range(P)), members, [list(map(float, w)) for w in sigma]
    )
    learner = pb.ExactBestResponse(game)
    for player in range(P):
        br = learner.best_response(player, pop.mixture(sigma))
        assert learner.last_value == pytest.approx(openspiel_br_value(game, player, bridged), abs=1e-9)
        assert learner.last_value == pytest.approx(openspiel_br_value(game, player, aggregated), abs=1e-9)
        opponents: list = list(pop.mixture(sigma))
        opponents[player] = br
        assert learner.evaluator.evaluate(opponents)[player] == pytest.approx(learner.last_value, abs=1e-9)


def _pure_strategies(game: pb.games.Game, player: int):
    """Every pure strategy of `player` as a TabularPolicy (other players' rows left uniform)."""
    infos = game.tree().infosets[player]
    choices = [np.flatnonzero(row) for row in infos.legal]
    for actions in itertools.product(*choices):
        pi = pb.TabularPolicy(game)
        rows = [pi.index[k] for k in infos.keys]
        pi.table[rows] = np.eye(game.num_actions)[list(actions)]
        yield pi


@pytest.mark.parametrize("name", [GOOF3, "matrix_rps"])
def test_simultaneous_br_equals_brute_force_over_pure_strategies(name: str) -> None:
    game = pb.load_game(name)
    opponents = [pb.TabularPolicy.random(game, seed=70 + p, concentration=0.5) for p in range(2)]
    learner = pb.ExactBestResponse(game)
    for player in range(2):
        best = -np.inf
        for pure in _pure_strategies(game, player):
            profile = [pure if q == player else opponents[q] for q in range(2)]
            best = max(best, openspiel_value(game, to_openspiel(game, profile))[player])
        br, value = learner.best_response_with_value(player, opponents)
        assert value == pytest.approx(best, abs=1e-9)
        profile = [br if q == player else opponents[q] for q in range(2)]
        assert openspiel_value(game, to_openspiel(game, profile))[player] == pytest.approx(value, abs=1e-9)


def test_ties_and_unreached_states_go_to_the_lowest_legal_action() -> None:
    game = pb.load_game("matrix_rps")
    br = pb.ExactBestResponse(game).best_response(0, [None, pb.RandomPolicy(game)])
    assert br.table[br.index[game.tree().infosets[0].keys[0]]].tolist() == [1.0, 0.0, 0.0]
    # Kuhn: player 1 never bets after a pass, so player 0's "pass, bet" states are never reached
    kuhn = pb.load_game(KUHN)
    passive = pb.TabularPolicy(kuhn)
    for key in ("0p", "1p", "2p"):
        passive.set_row(key, [1.0, 0.0])
    learner = pb.ExactBestResponse(kuhn)
    br = learner.best_response(0, [None, passive])
    for key in ("0pb", "1pb", "2pb"):
        assert br.row(key).tolist() == [1.0, 0.0]
    assert br.row("2").tolist() == [0.0, 1.0]  # the king bets: the passive opponent still calls half the time
    assert_pure_on_legal(kuhn, 0, br)
    # Leduc, where legal actions vary by state: rows are one-hot on a legal action
    leduc = pb.load_game(LEDUC)
    br = pb.ExactBestResponse(leduc).best_response(1, [pb.TabularPolicy.random(leduc, seed=1, concentration=0.1), None])
    assert_pure_on_legal(leduc, 1, br)


def _hand_made_tree() -> GameTree:
    """Chance ends the game at once half the time; else player 0 picks one of two actions. Player 1 never acts."""
    none = PlayerInfosets(keys=[], index={}, obs=np.zeros((0, 1), np.float32), legal=np.zeros((0, 2), bool),
                          parent_seq=np.zeros(0, np.int64), depth=np.zeros(0, np.int64), levels=[])
    one = PlayerInfosets(keys=["root"], index={"root": 0}, obs=np.zeros((1, 1), np.float32),
                         legal=np.ones((1, 2), bool), parent_seq=np.zeros(1, np.int64),
                         depth=np.zeros(1, np.int64), levels=[np.array([0])])
    return GameTree(num_players=2, num_actions=2, infosets=(one, none),
                    chance_reach=np.array([0.5, 0.25, 0.25]),
                    returns=np.array([[2.0, -2.0], [1.0, -1.0], [3.0, -3.0]]),
                    terminal_seq=np.array([[0, 1, 2], [0, 0, 0]]), num_nodes=5)


def test_engine_br_total_includes_terminals_before_any_decision() -> None:
    tree = _hand_made_tree()
    plan0 = realization_plans(np.array([[0.5, 0.5]]), tree.infosets[0], 2)
    plan1 = realization_plans(np.zeros((0, 2)), tree.infosets[1], 2)
    np.testing.assert_allclose(plan0, [1.0, 0.5, 0.5])
    np.testing.assert_allclose(plan1, [1.0])
    reach = [terminal_reach(plan0, tree, 0), terminal_reach(plan1, tree, 1)]
    value, table = best_response_values(tree, 0, opponent_reach(tree, 0, reach))
    assert value == pytest.approx(0.5 * 2 + 0.25 * 3, abs=1e-15)  # the empty sequence's terminal counts in full
    np.testing.assert_array_equal(table, [[0.0, 1.0]])
    value1, table1 = best_response_values(tree, 1, opponent_reach(tree, 1, reach))
    assert table1.shape == (0, 2) and value1 == pytest.approx(-(0.5 * 2 + 0.125 * 1 + 0.125 * 3), abs=1e-15)


def test_learner_interface_and_errors() -> None:
    game = pb.load_game(KUHN)
    learner = pb.ExactBestResponse(game)
    assert learner.name == "exact" and pb.ExactBestResponse.name == "exact"
    br = learner.best_response(1, [pb.RandomPolicy(game), None])
    assert isinstance(br, pb.TabularPolicy)
    uniform_rows = br.table[[br.index[k] for k in game.tree().infosets[0].keys]]
    np.testing.assert_allclose(uniform_rows, 0.5)
    with pytest.raises(ValueError, match="one entry per player"):
        learner.best_response(0, [pb.RandomPolicy(game)])
    with pytest.raises(TypeError, match="one Policy or Mixture per player"):
        learner.best_response(0, pb.RandomPolicy(game))
    with pytest.raises(ValueError, match="made for game 'leduc_poker'"):
        learner.best_response(0, [None, pb.RandomPolicy(pb.load_game(LEDUC))])
    with pytest.raises(ValueError, match="player 2 is out of range"):
        learner.best_response(2, [None, None])
    with pytest.raises(ValueError, match="evaluator is for"):
        pb.ExactBestResponse(game, evaluator=pb.ExactEvaluator(pb.load_game(LEDUC)))


def test_fictitious_play_with_the_exact_oracle_converges_and_computes_each_plan_once() -> None:
    game = pb.load_game(KUHN)
    pop = pb.Population(game)
    for p in range(2):
        pop.add(p, pb.RandomPolicy(game))
    ev = pb.ExactEvaluator(game)
    learner = pb.ExactBestResponse(game, evaluator=ev)
    table = pb.PayoffTable(pop)
    nash_convs = []
    for _ in range(25):
        sigma = [np.full(n, 1.0 / n) for n in pop.sizes]
        nash_convs.append(ev.exploitability(pop, sigma).nash_conv)
        brs = [learner.best_response(p, pop.mixture(sigma)) for p in range(2)]
        for p in range(2):
            pop.add(p, brs[p])
        ev.fill(table)
    assert nash_convs[0] == pytest.approx(11 / 12, abs=1e-12)
    assert nash_convs[-1] < 0.2 * nash_convs[0]
    assert ev.plans_computed == sum(pop.sizes)  # every policy turned into a plan exactly once
    assert table.exact.all()
    np.testing.assert_allclose(table.values, pb.ExactEvaluator(game).payoffs([pop[0], pop[1]]), atol=1e-12)
