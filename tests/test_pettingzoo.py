"""PettingZoo environments behind the Game interface: AEC and Parallel, masks, truncation, rollouts."""

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.games.registry import game_from_spec, game_spec
from pbmarl.rollout import run_episodes

CLASSIC = ["rps_v2", "tictactoe_v3", "connect_four_v3", "leduc_holdem_v4", "texas_holdem_v4"]
MPE = ["simple_push_v3", "simple_adversary_v3"]


def _source(name):
    from pbmarl.games.pettingzoo_sources import available_environments

    return available_environments()[name]


class _LegalOnly(pb.RandomPolicy):
    """Uniform over legal actions; checks every batch has a legal action in every row."""

    def _probs(self, obs, legal_mask, keys):
        assert legal_mask.any(axis=1).all(), "a row without legal actions reached a policy"
        assert np.isfinite(obs).all()
        return super()._probs(obs, legal_mask, keys)


@pytest.mark.parametrize("name", CLASSIC + MPE)
def test_games_play_to_the_end_with_legal_actions(name):
    game = pb.load_game(f"pettingzoo:{name}")
    env = _source(name).factory("aec" if game.turn_based else "parallel")()
    assert game.agents == list(env.possible_agents)  # read from the env, never assumed
    assert game.num_players == len(env.possible_agents)
    pi = _LegalOnly(game)
    out = run_episodes(game, [pi] * game.num_players, np.random.default_rng(0), episodes=40, num_envs=16)
    assert out.returns.shape == (40, game.num_players) and np.all(out.lengths >= 1)
    if game.zero_sum:
        np.testing.assert_allclose(out.returns.sum(axis=1), 0.0, atol=1e-9)
    if name in MPE:
        assert not game.zero_sum and not game.enumerable and not game.turn_based
        assert np.all(out.lengths == 25)  # max_cycles truncation ends the episode


def test_a_manual_game_with_the_state_protocol():
    game = pb.load_game("pettingzoo:tictactoe_v3")
    state = game.new_initial_state(seed=0)
    rng = np.random.default_rng(0)
    moves = 0
    while not state.is_terminal():
        p = state.current_player()
        legal = state.legal_actions(p)
        assert legal and state.legal_actions(1 - p) == []
        obs = game.observation(state, p)
        assert obs.shape == game.observation_shape and obs.dtype == np.float32
        illegal = sorted(set(range(9)) - set(legal))
        if illegal:
            with pytest.raises(ValueError, match="illegal action"):
                state.apply_action(illegal[0])
        state.apply_action(int(rng.choice(legal)))
        moves += 1
    assert 5 <= moves <= 9 and sum(state.returns()) == 0 and state.legal_actions(0) == []
    with pytest.raises(NotImplementedError, match="cannot be cloned"):
        game.new_initial_state().clone()


def test_action_masks_follow_the_environment():
    game = pb.load_game("pettingzoo:connect_four_v3")
    state = game.new_initial_state(seed=0)
    for _ in range(6):  # fill column 0
        state.apply_action(0)
    assert state.legal_actions(state.current_player()) == [1, 2, 3, 4, 5, 6]


def test_parallel_env_observations_are_padded_per_agent():
    game = pb.load_game("pettingzoo:simple_adversary_v3")
    state = game.new_initial_state(seed=1)
    assert state.is_simultaneous_node()
    sizes = [np.count_nonzero(game.observation(state, p)) for p in range(game.num_players)]
    assert all(game.observation(state, p).shape == game.observation_shape for p in range(game.num_players))
    assert min(sizes) < game.observation_shape[0]  # the adversary sees less, zero-padded
    state.apply_actions([0] * game.num_players)
    assert not state.is_terminal()


def test_env_parameters_and_spec_round_trip():
    game = pb.load_game("pettingzoo:simple_push_v3", max_cycles=7)
    assert game.name == "pettingzoo:simple_push_v3(max_cycles=7)"
    again = game_from_spec(game_spec(game))
    assert again.name == game.name and again.observation_shape == game.observation_shape
    out = run_episodes(again, [pb.RandomPolicy(again)] * 2, np.random.default_rng(0), episodes=5)
    assert np.all(out.lengths == 7)
    aec = pb.load_game("pettingzoo:rps_v2", api="aec")
    assert aec.turn_based and "api='aec'" in aec.name
    assert game_from_spec(game_spec(aec)).turn_based


def test_unknown_environment_suggests_close_names():
    with pytest.raises(ValueError, match="did you mean 'connect_four_v3'"):
        pb.load_game("pettingzoo:conect_four_v3")
    with pytest.raises(ValueError, match="unknown api"):
        pb.load_game("pettingzoo:rps_v2", api="async")


def test_pool_on_pettingzoo_is_seeded():
    game = pb.load_game("pettingzoo:connect_four_v3")
    pis = [pb.MLPPolicy(game, hidden=(16,), seed=s) for s in (0, 1)]
    with pb.RolloutPool(game, seed=0, envs_per_worker=32) as pool:
        a = pool.evaluate(pis, 64, seed=3, keep_returns=True)
        b = pool.evaluate(pis, 64, seed=3, keep_returns=True)
        t = pool.collect(0, pis[0], [None, pis[1]], 100)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert len(t) >= 100 and t.obs.shape[1:] == game.observation_shape
    assert np.all(t.legal_mask[np.arange(len(t)), t.action])


def test_mpe_randomness_is_seeded_by_the_runner():
    game = pb.load_game("pettingzoo:simple_push_v3", max_cycles=5)
    pi = pb.RandomPolicy(game)
    a = run_episodes(game, [pi, pi], np.random.default_rng(0), episodes=6)
    b = run_episodes(game, [pi, pi], np.random.default_rng(0), episodes=6)
    c = run_episodes(game, [pi, pi], np.random.default_rng(1), episodes=6)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert not np.array_equal(a.returns, c.returns)
