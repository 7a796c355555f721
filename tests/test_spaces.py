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


@pytest.mark.parametrize("env, kwargs, agents, act, obs, state", [
    ("simple_spread_v3", {"N": 3}, ["agent_0", "agent_1", "agent_2"], [5, 5, 5], [18, 18, 18], 54),
    ("simple_adversary_v3", {}, ["adversary_0", "agent_0", "agent_1"], [5, 5, 5], [8, 10, 10], 28),
    ("simple_tag_v3", {}, ["adversary_0", "adversary_1", "adversary_2", "agent_0"], [5] * 4, [16, 16, 16, 14], 62),
    ("simple_reference_v3", {}, ["agent_0", "agent_1"], [50, 50], [21, 21], 42),
])
@pytest.mark.parametrize("continuous", [False, True])
def test_mpe_spaces_discrete_and_continuous(env, kwargs, agents, act, obs, state, continuous):
    game = pb.load_game(f"pettingzoo:{env}", continuous_actions=continuous, **kwargs)
    assert game.agents == agents
    assert [game.observation_space(p).shape for p in range(len(agents))] == [(n,) for n in obs]
    assert game.observation_shape == (max(obs),)  # the padded width the shared stepper uses
    for p, n in enumerate(act):
        space = game.action_space(p)
        if continuous:
            width = 15 if env == "simple_reference_v3" else 5
            assert space == spaces.Box(0.0, 1.0, (width,), np.float32)
        else:
            assert space == spaces.Discrete(n)
    assert game.num_actions == (0 if continuous else max(act))
    assert game.has_global_state and game.global_state_shape == (state,)
    st = game.new_initial_state(seed=0)
    assert game.global_state(st).shape == (state,) and game.global_state(st).dtype == np.float32


def test_mpe_global_state_is_the_environments():
    game = pb.load_game("pettingzoo:simple_spread_v3", N=3, continuous_actions=True)
    st = game.new_initial_state(seed=4)
    st.apply_actions([np.array([0, 1, 0, 0, 0.5], np.float32)] * 3)
    np.testing.assert_array_equal(game.global_state(st), np.asarray(st.env.state(), np.float32).ravel())


def test_action_outside_an_mpe_box_names_the_value_and_loses_nothing():
    game = pb.load_game("pettingzoo:simple_spread_v3", N=3, continuous_actions=True, max_cycles=5)
    st = game.new_initial_state(seed=0)
    ok = [np.full(5, 0.25, np.float32)] * 3
    st.apply_actions(ok)
    before = st.returns()
    bad = [ok[0], np.array([0, 0, 1.5, 0, 0], np.float32), ok[2]]
    with pytest.raises(ValueError, match=r"action \[0.0, 0.0, 1.5, 0.0, 0.0\] is outside Box\(0.0, 1.0, \(5,\).*'agent_1'"):
        st.apply_actions(bad)
    assert st.returns() == before and not st.is_terminal()
    for _ in range(4):
        st.apply_actions(ok)
    assert st.is_terminal()  # truncated at max_cycles=5: the refused step did not count
