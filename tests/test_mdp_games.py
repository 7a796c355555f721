"""MALib's verification MDPs: optimal values by DP against hand-computed ones, stepping, env API."""

import numpy as np
import pytest

import pbmarl as pb

#: (id, hand-computed optimal value, optimal first action)
HAND = [
    ("one_round_dmdp", 1.0, 1),  # a1 pays 1
    ("two_round_dmdp", 3.0, 0),  # a0 -> better, then a1 pays 3 (vs worse: at most 2)
    ("one_round_nmdp", 2.5, 0),  # a0: (0 + 5) / 2 = 2.5 > a1: (1 + 3) / 2 = 2
    ("two_round_nmdp", 3.0, 0),  # A: max(0, 9/3) = 3 > B: max(1, 2.5) = 2.5
]


@pytest.mark.parametrize("mdp_id, value, first", HAND)
def test_dp_value_equals_hand_computed(mdp_id, value, first):
    game = pb.load_game(f"mdp:{mdp_id}")
    assert game.optimal_value() == pytest.approx(value)
    assert game.num_players == 1 and game.action_space(0).n == 2 and game.agents == ["player_0"]
    br = pb.ExactBestResponse(game).best_response(0, opponents=[None])
    assert np.argmax(br.row(game.states[0])) == first


def test_multi_round_short_horizons_by_hand():
    # horizon 2: 0 at start, then 0.9 * best mix of first (3) and second (5): a0 -> 0.9 * (3/4 + 15/4) = 4.05
    assert pb.load_game("mdp:multi_round_nmdp", horizon=2).optimal_value() == pytest.approx(4.05)
    # horizon 3: V2(first) = 3, V2(second) = 5; V1(first) = 3 + 0.9 * max(4, 13/3) = 6.9,
    # V1(second) = 5 + 0.9 * max(4, 2.75) = 8.6; V0 = 0.9 * max(6.9/4 + 3 * 8.6/4, 3 * 6.9/4 + 8.6/4) = 7.3575
    assert pb.load_game("mdp:multi_round_nmdp", horizon=3).optimal_value() == pytest.approx(7.3575)


def test_multi_round_default_horizon_equals_best_stationary_policy():
    """With the default horizon (20) the optimum is the best of the 8 stationary deterministic policies,
    evaluated here independently by propagating the state distribution forward."""
    game = pb.load_game("mdp:multi_round_nmdp")
    assert game.horizon == 20 and game.discount == 0.9
    P = {  # P[s][a] -> distribution over (start, first, second, end)
        0: {0: [0, 1 / 4, 3 / 4, 0], 1: [0, 3 / 4, 1 / 4, 0]},
        1: {0: [0, 1 / 2, 1 / 2, 0], 1: [0, 1 / 3, 2 / 3, 0]},
        2: {0: [0, 1 / 2, 1 / 2, 0], 1: [0, 1 / 2, 1 / 4, 1 / 4]},
    }
    reward = np.array([0.0, 3.0, 5.0, 0.0])
    best = -np.inf
    for pol in np.ndindex(2, 2, 2):
        M = np.zeros((4, 4))
        for s in range(3):
            M[s] = P[s][pol[s]]
        M[3, 3] = 1.0
        dist, value = np.array([1.0, 0, 0, 0]), 0.0
        for t in range(20):
            value += 0.9**t * dist @ reward
            dist = dist @ M
        best = max(best, value)
    assert game.optimal_value() == pytest.approx(best)


def test_rollouts_of_the_optimal_policy_reach_the_optimum():
    game = pb.load_game("mdp:two_round_nmdp")
    pi = pb.TabularPolicy(game)
    pi.set_row("start", [1, 0])
    pi.set_row("start/a0/A", [0, 1])
    pi.set_row("start/a1/B", [0, 1])
    res = pb.RolloutPool(game, backend="local", num_workers=1).evaluate([pi], episodes=3000, seed=0)
    assert abs(res.mean[0] - 3.0) < 4 * res.stderr[0] + 1e-9


def test_gymnasium_env_truncates_at_the_horizon():
    game = pb.load_game("mdp:multi_round_nmdp", horizon=5)
    env = game.make_env()
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [1.0, 0.0, 0.0]
    ends = []
    for episode in range(200):
        env.reset(seed=episode)
        steps, term, trunc = 0, False, False
        while not (term or trunc):
            obs, reward, term, trunc, _ = env.step(1)
            steps += 1
            assert reward in (3.0, 5.0) or steps == 1
        ends.append((steps, term, trunc))
    assert all(trunc == (steps == 5 and not term) for steps, term, trunc in ends)
    assert any(term for _, term, _ in ends) and any(trunc for _, _, trunc in ends)


def test_chance_nodes_draw_reward_and_state_together():
    game = pb.load_game("mdp:two_round_nmdp")
    state = game.new_initial_state()
    state.apply_action(0)
    assert not state.is_chance_node() and game.observation(state, 0).tolist() == [0, 1, 0]
    state.apply_action(1)
    assert state.is_chance_node()
    assert [p for _, p in state.chance_outcomes()] == pytest.approx([2 / 3, 1 / 3])
    state.apply_action(1)
    assert state.is_terminal() and state.terminated and state.returns() == [9.0]


def test_unknown_mdp_and_bad_horizon():
    with pytest.raises(ValueError, match="unknown MDP 'two_round_mdp'; did you mean 'mdp:two_round_nmdp' or 'mdp:two_round_dmdp'"):
        pb.load_game("mdp:two_round_mdp")
    with pytest.raises(ValueError, match="horizon must be a positive int or None, got 0"):
        pb.load_game("mdp:multi_round_nmdp", horizon=0)
    with pytest.raises(ValueError, match="illegal action 2"):
        pb.load_game("mdp:one_round_dmdp").new_initial_state().apply_action(2)


def test_env_passes_gymnasiums_checker_and_vectorises():
    import gymnasium
    from gymnasium.utils.env_checker import check_env

    game = pb.load_game("mdp:two_round_dmdp")
    check_env(game.make_env(), skip_render_check=True)
    vec = gymnasium.vector.SyncVectorEnv([game.make_env] * 3)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (3, 3)
    _, r1, *_ = vec.step(np.array([0, 1, 1]))
    _, r2, term, trunc, _ = vec.step(np.array([1, 0, 1]))
    assert r1.tolist() == [0, 0, 0] and r2.tolist() == [3, 1, 2] and term.all() and not trunc.any()
