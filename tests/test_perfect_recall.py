"""Perfect recall from action-observation histories: goofspiel with its default parameters."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.evaluation.cfr import CFRPlus
from pbmarl.learners.oracles.exact import ExactBestResponse


def _goofspiel(n: int) -> pb.games.Game:
    game = pb.load_game(f"goofspiel(num_cards={n})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        game.tree()
    return game


@pytest.fixture(scope="module", params=[3, 4])
def goofspiel(request: pytest.FixtureRequest) -> pb.games.Game:
    return _goofspiel(request.param)


def test_keys_have_perfect_recall_and_name_the_player(goofspiel: pb.games.Game) -> None:
    tree = goofspiel.tree()
    assert goofspiel.recall_keys and tree.recall_keys
    for p, infos in enumerate(tree.infosets):
        assert all(k.startswith(f"player {p}:") for k in infos.keys)
        # perfect recall: the key of a parent information set is a prefix of its children's keys
        for I in np.flatnonzero(infos.parent_seq > 0)[:200]:
            parent = (infos.parent_seq[I] - 1) // tree.num_actions
            assert infos.keys[I].startswith(infos.keys[parent])
    assert not set(tree.infosets[0].keys) & set(tree.infosets[1].keys)


def test_rollouts_and_the_tree_use_the_same_keys(goofspiel: pb.games.Game) -> None:
    tree = goofspiel.tree()
    env = goofspiel.vec_env(8, seed=0)
    seen = 0
    for _ in range(12):
        actions = np.full((8, 2), -1)
        for p in range(2):
            idx, _, mask, keys = env.observe(p)
            for j, (i, key) in enumerate(zip(idx, keys)):
                assert key in tree.infosets[p].index
                np.testing.assert_array_equal(mask[j], tree.infosets[p].legal[tree.infosets[p].index[key]])
                actions[i, p] = np.flatnonzero(mask[j])[-1]
                seen += 1
        env.step(actions)
    assert seen > 50


def test_exact_psro_runs(goofspiel: pb.games.Game) -> None:
    psro = pb.PSRO(goofspiel, solver="nash")
    records = psro.run(3, progress=False)  # may stop early: PSRO stops once NashConv is 0
    assert records and all(r.nash_conv is not None and r.nash_conv >= -1e-12 for r in records)
    assert psro.population.sizes == (1 + len(records),) * 2
    assert records[-1].nash_conv == pytest.approx(psro.evaluator.exploitability(psro.population, psro.meta_strategy).nash_conv)


def test_cfr_plus_value_of_the_symmetric_game_is_zero(goofspiel: pb.games.Game) -> None:
    solver = CFRPlus(goofspiel.tree()).run(150 if goofspiel.name.endswith("3)") else 80)
    values, nash_conv = solver.values(), solver.nash_conv()
    assert nash_conv < 0.02
    # the game is symmetric, so its value is 0; a profile with NashConv e is within e of it
    assert abs(values[0]) <= nash_conv + 1e-12 and abs(values[0]) < 1e-3


def test_best_response_value_is_the_value_of_the_returned_policy(goofspiel: pb.games.Game) -> None:
    ev = pb.ExactEvaluator(goofspiel)
    learner = ExactBestResponse(goofspiel, evaluator=ev)
    opponent = pb.TabularPolicy.random(goofspiel, seed=1)
    for player in range(2):
        opponents = [opponent, opponent]
        br, value = learner.best_response_with_value(player, opponents)
        profile = [opponent, opponent]
        profile[player] = br
        assert ev.evaluate(profile)[player] == pytest.approx(value, abs=1e-12)


def test_no_single_information_state_deviation_improves_a_best_response(goofspiel: pb.games.Game) -> None:
    ev = pb.ExactEvaluator(goofspiel)
    opponent = pb.TabularPolicy.random(goofspiel, seed=2)
    br, value = ExactBestResponse(goofspiel, evaluator=ev).best_response_with_value(0, [None, opponent])
    infos = ev.tree.infosets[0]
    rng = np.random.default_rng(0)
    sample = rng.choice(infos.size, size=min(infos.size, 40), replace=False)
    for I in sample:
        key = infos.keys[I]
        for a in np.flatnonzero(infos.legal[I]):
            deviant = pb.TabularPolicy(goofspiel, table=br.table.copy(), keys=br.keys)
            deviant.set_row(key, np.eye(goofspiel.num_actions)[a])
            assert ev.evaluate([deviant, opponent])[0] <= value + 1e-12


def test_deliberately_imperfect_recall_and_mean_field_games_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="deliberately imperfect-recall variant.*'liars_dice'"):
        pb.ExactEvaluator(pb.load_game("liars_dice_ir"))
    with pytest.raises(ValueError, match="mean-field game"):
        pb.ExactEvaluator(pb.load_game("mfg_crowd_modelling"))
    with pytest.raises(ValueError, match="imperfect-recall variant"):
        pb.PSRO("liars_dice_ir")


def test_games_with_perfect_recall_keep_their_own_strings() -> None:
    game = pb.load_game("kuhn_poker")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        tree = game.tree()
    assert not game.recall_keys and not tree.recall_keys
    assert "0" in tree.infosets[0].keys
