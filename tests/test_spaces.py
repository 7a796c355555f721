"""Every source describes its agents with gymnasium spaces, each agent with its own sizes."""

import numpy as np
import pytest
from gymnasium import spaces

import pbmarl as pb


def test_openspiel_spaces_and_agent_names():
    game = pb.load_game("leduc_poker")
    assert game.agents == ["player_0", "player_1"]
    for p in range(2):
        assert game.action_space(p) == spaces.Discrete(game.num_actions)
        box = game.observation_space(p)
        assert isinstance(box, spaces.Box) and box.shape == game.observation_shape and box.dtype == np.float32
    assert not game.has_global_state
    with pytest.raises(ValueError, match="no global state"):
        game.global_state(game.new_initial_state())
    with pytest.raises(ValueError, match="player 2 is out of range"):
        game.action_space(2)


def test_three_player_openspiel_names_every_seat():
    game = pb.load_game("kuhn_poker", players=3)
    assert game.agents == ["player_0", "player_1", "player_2"]


def test_matrix_game_players_keep_their_own_action_counts():
    game = pb.MatrixGame([[[1, 2, 3], [4, 5, 6]], [[0, 0, 0], [1, 1, 1]]])
    assert game.action_space(0) == spaces.Discrete(2)
    assert game.action_space(1) == spaces.Discrete(3)
    assert game.num_actions == 3  # the shared mask width stays as before
    assert game.agents == ["player_0", "player_1"]
    assert game.observation_space(1).shape == (2,)


def test_pettingzoo_classic_spaces():
    game = pb.load_game("pettingzoo:tictactoe_v3")
    assert game.agents == ["player_1", "player_2"]
    assert game.action_space(0) == spaces.Discrete(9)
    assert game.observation_space(1).shape == (18,)
    assert not game.has_global_state


def test_gym_spaces_are_the_environments():
    game = pb.load_game("gym:MountainCarContinuous-v0")
    assert game.action_space(0) == spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert game.observation_space(0).shape == (2,)
