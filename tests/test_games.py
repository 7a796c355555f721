"""Games: loading, the matrix adapter, the vectorised stepper and the tree."""

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.games import VecEnv


@pytest.mark.parametrize(
    "name, players, turn_based",
    [("kuhn_poker", 2, True), ("leduc_poker", 2, True), ("kuhn_poker(players=3)", 3, True),
     ("goofspiel(num_cards=4)", 2, False), ("matrix_rps", 2, False)],
)
def test_load_openspiel_games(name, players, turn_based):
    game = pb.load_game(name)
    assert game.num_players == players
    assert game.turn_based == turn_based
    assert game.zero_sum
    assert name in repr(game)


def test_keyword_params_equal_name_params():
    assert pb.load_game("kuhn_poker", players=3).name == "kuhn_poker(players=3)"


def test_unknown_game_suggests_close_names():
    with pytest.raises(ValueError, match=r"unknown game 'kuhn_pokr'; did you mean 'kuhn_poker'"):
        pb.load_game("kuhn_pokr")


def test_bad_parameter_is_a_value_error():
    with pytest.raises(ValueError, match="plyers"):
        pb.load_game("kuhn_poker(plyers=3)")


def test_matrix_game_forms_agree():
    rps = [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]
    one = pb.MatrixGame(rps)
    per_player = pb.MatrixGame([np.array(rps), -np.array(rps)])
    stacked = pb.MatrixGame(np.stack([rps, -np.array(rps)], axis=-1))
    assert np.array_equal(one.payoffs, per_player.payoffs)
    assert np.array_equal(one.payoffs, stacked.payoffs)
    assert one.zero_sum and one.num_players == 2 and not one.turn_based


def test_matrix_game_general_sum_and_three_players():
    pd_game = pb.MatrixGame([[[3, 0], [5, 1]], [[3, 5], [0, 1]]])
    assert not pd_game.zero_sum
    assert pd_game.payoffs[1, 0].tolist() == [5.0, 0.0]
    three = pb.MatrixGame(np.zeros((2, 3, 4, 3)))
    assert three.num_players == 3 and three.action_counts == (2, 3, 4) and three.num_actions == 4


@pytest.mark.parametrize("bad, error", [([[1, 2], [3]], ValueError), ([["a", "b"], ["c", "d"]], ValueError),
                                        ([[1, np.nan], [0, 1]], ValueError), ([1, 2, 3], ValueError)])
def test_matrix_game_rejects_bad_payoffs(bad, error):
    with pytest.raises(error, match="payoffs"):
        pb.MatrixGame(bad)


def _random_rollout(game, num_envs, steps, seed):
    env = VecEnv(game, num_envs, seed=seed)
    rng = np.random.default_rng(seed)
    finished = []
    for _ in range(steps):
        actions = -np.ones((num_envs, game.num_players), dtype=np.int64)
        for p in range(game.num_players):
            idx, obs, mask, keys = env.observe(p)
            assert obs.shape == (len(idx),) + game.observation_shape
            assert len(keys) == len(idx)
            for k, i in enumerate(idx):
                actions[i, p] = rng.choice(np.flatnonzero(mask[k]))
        result = env.step(actions)
        finished.extend(result.returns[result.done].tolist())
    return np.asarray(finished)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker", "goofspiel(num_cards=4)", "kuhn_poker(players=3)"])
def test_vec_env_plays_whole_episodes(name):
    game = pb.load_game(name)
    returns = _random_rollout(game, 16, 60, seed=1)
    assert len(returns) > 16
    np.testing.assert_allclose(returns.sum(axis=1), 0.0, atol=1e-9)  # zero-sum games


def test_vec_env_same_seed_same_episodes():
    game = pb.load_game("leduc_poker")
    np.testing.assert_array_equal(_random_rollout(game, 8, 40, seed=3), _random_rollout(game, 8, 40, seed=3))


def test_vec_env_matrix_game_returns_payoffs():
    game = pb.MatrixGame([[1, 2], [3, 4]])
    env = game.vec_env(2, seed=0)
    result = env.step(np.array([[0, 1], [1, 0]]))
    assert result.done.all()
    assert result.returns.tolist() == [[2.0, -2.0], [3.0, -3.0]]


def test_vec_env_rejects_illegal_action_and_bad_shape():
    env = pb.load_game("kuhn_poker").vec_env(2, seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, 2), dtype=int))
    actions = -np.ones((2, 2), dtype=int)
    actions[:, 0] = 7
    with pytest.raises(ValueError, match="illegal action 7"):
        env.step(actions)


def test_tree_chance_reach_and_infosets():
    tree = pb.load_game("kuhn_poker").tree()
    assert [i.size for i in tree.infosets] == [6, 6]
    assert tree.num_terminals == 30
    # every deal is equally likely: 6 deals, each terminal reached with chance 1/6
    np.testing.assert_allclose(tree.chance_reach, 1 / 6)
    # sequences are consistent: a terminal's last sequence of each player points to one of its infosets
    for p in range(2):
        seqs = tree.terminal_seq[p]
        assert seqs.max() < tree.num_sequences(p)


def test_tree_keys_goofspiel_by_histories_and_refuses_deliberate_imperfect_recall():
    game = pb.load_game("goofspiel(num_cards=4)")
    with pytest.warns(UserWarning, match="action-observation history"):
        tree = game.tree()
    assert game.recall_keys and tree.recall_keys
    with pytest.raises(ValueError, match="imperfect-recall variant.*use 'liars_dice'"):
        pb.load_game("liars_dice_ir").tree()


def test_player_out_of_range():
    game = pb.load_game("kuhn_poker")
    with pytest.raises(ValueError, match="player 2 is out of range"):
        game.check_player(2)
