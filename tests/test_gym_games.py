"""Gymnasium environments as one-player games: spaces, stepping, errors."""

import numpy as np
import pytest
from gymnasium import spaces

import pbmarl as pb
from pbmarl.games.registry import game_from_spec, game_spec

CLASSIC = [
    ("CartPole-v1", spaces.Discrete(2), (4,)),
    ("Acrobot-v1", spaces.Discrete(3), (6,)),
    ("MountainCar-v0", spaces.Discrete(3), (2,)),
    ("MountainCarContinuous-v0", spaces.Box(-1.0, 1.0, (1,), np.float32), (2,)),
    ("Pendulum-v1", spaces.Box(-2.0, 2.0, (1,), np.float32), (3,)),
]


@pytest.mark.parametrize("env_id, action_space, obs_shape", CLASSIC)
def test_classic_control_loads_with_its_spaces(env_id, action_space, obs_shape):
    game = pb.load_game(f"gym:{env_id}")
    assert game.num_players == 1 and game.agents == ["player_0"]
    assert game.action_space(0) == action_space
    assert game.observation_space(0).shape == obs_shape
    assert game.observation_shape == obs_shape
    assert game.num_actions == (action_space.n if isinstance(action_space, spaces.Discrete) else 0)
    assert not game.has_global_state
    env = game.make_env()
    obs, _ = env.reset(seed=0)
    assert game.observation_space(0).contains(game.flatten_observation(obs))


def test_state_matches_a_plain_gymnasium_loop():
    import gymnasium

    game = pb.load_game("gym:Pendulum-v1", max_episode_steps=7)
    state = game.new_initial_state(seed=3)
    env = gymnasium.make("Pendulum-v1", max_episode_steps=7)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    total, steps = 0.0, 0
    while not state.is_terminal():
        np.testing.assert_allclose(state.observation(0), obs)
        a = rng.uniform(-2, 2, size=1).astype(np.float32)
        state.apply_action(a)
        obs, r, term, trunc, _ = env.step(a)
        total += r
        steps += 1
    assert steps == 7 and state.truncated and not state.terminated
    assert state.returns()[0] == pytest.approx(total)


def test_cartpole_terminates_rather_than_truncates():
    game = pb.load_game("gym:CartPole-v1")
    state = game.new_initial_state(seed=0)
    while not state.is_terminal():
        assert game.legal_mask(state, 0).tolist() == [True, True]
        state.apply_action(1)  # always push right: the pole falls long before 500 steps
    assert state.terminated and not state.truncated and state.steps < 100


def test_keyword_arguments_reach_the_environment_and_the_spec_round_trips():
    game = pb.load_game("gym:Pendulum-v1", g=9.81, max_episode_steps=10)
    assert game.name == "gym:Pendulum-v1(g=9.81, max_episode_steps=10)"
    assert game.make_env().unwrapped.g == 9.81
    again = game_from_spec(game_spec(game))
    assert again.name == game.name and again.max_episode_steps == 10


def test_unknown_id_suggests_close_ones():
    with pytest.raises(ValueError, match=r"unknown Gymnasium id 'CartPol-v1'; did you mean 'gym:CartPole-v1'"):
        pb.load_game("gym:CartPol-v1")


def test_bad_keyword_names_itself():
    with pytest.raises(ValueError, match="nonsense"):
        pb.load_game("gym:CartPole-v1", nonsense=3)


@pytest.mark.parametrize("action", [[3.0], [-2.5], [np.nan], [1.0, 1.0]])
def test_action_outside_the_box_is_refused_with_its_value(action):
    game = pb.load_game("gym:Pendulum-v1")
    state = game.new_initial_state(seed=0)
    with pytest.raises(ValueError, match="action"):
        state.apply_action(action)
    with pytest.raises(ValueError, match=r"action \[3.0\] is outside Box\(-2.0, 2.0"):
        state.apply_action([3.0])
    state.apply_action([2.0])  # nothing was spoilt: the episode goes on
    assert state.steps == 1


def test_discrete_action_out_of_range():
    state = pb.load_game("gym:CartPole-v1").new_initial_state(seed=0)
    with pytest.raises(ValueError, match=r"action 2 is outside Discrete\(2\).*0\.\.1"):
        state.apply_action(2)


def test_a_gymnasium_id_without_its_prefix_is_pointed_at():
    with pytest.raises(ValueError, match=r"unknown game 'Pendulum-v1'; did you mean 'gym:Pendulum-v1'"):
        pb.load_game("Pendulum-v1")
    with pytest.raises(ValueError, match=r"did you mean 'mdp:two_round_nmdp'"):
        pb.load_game("two_round_nmdp")


def test_sampled_evaluation_of_a_gym_game_is_seeded():
    game = pb.load_game("gym:CartPole-v1")
    pool = pb.RolloutPool(game, backend="local", num_workers=1)
    a = pool.evaluate([pb.RandomPolicy(game)], episodes=20, seed=3)
    b = pool.evaluate([pb.RandomPolicy(game)], episodes=20, seed=3)
    assert a.mean[0] == b.mean[0] and a.steps == b.steps
    assert 10 < a.mean[0] < 60  # a random CartPole policy lasts about 22 steps


class _Toy:
    """A tiny registered environment with a MultiDiscrete action and a Discrete observation."""

    @staticmethod
    def make():
        import gymnasium

        class Toy(gymnasium.Env):
            action_space = spaces.MultiDiscrete([3, 2])
            observation_space = spaces.Discrete(4)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.t = 0
                return 0, {}

            def step(self, action):
                self.t += 1
                return self.t % 4, float(action[0] + action[1]), self.t >= 3, False, {}

        return Toy()


def test_any_registered_id_with_multidiscrete_actions():
    import gymnasium

    gymnasium.register("pbmarl_test/Toy-v0", entry_point=_Toy.make)
    try:
        game = pb.load_game("gym:pbmarl_test/Toy-v0")
        assert game.action_space(0) == spaces.MultiDiscrete([3, 2]) and game.num_actions == 0
        assert game.observation_space(0).shape == (4,)  # a Discrete observation becomes one-hot
        state = game.new_initial_state(seed=0)
        assert state.observation(0).tolist() == [1, 0, 0, 0]
        out = pb.RandomPolicy(game).act(np.zeros((50, 4)), None, rng=0)
        assert out.action.shape == (50, 2) and out.action[:, 0].max() == 2 and out.action[:, 1].max() == 1
        np.testing.assert_allclose(out.log_prob, -np.log(6))
        state.apply_action(out.action[0])
        with pytest.raises(ValueError, match=r"action \[3, 0\] is outside MultiDiscrete"):
            state.apply_action(np.array([3, 0]))
        state.apply_action(np.array([2, 1]))
        state.apply_action(np.array([2, 1]))
        assert state.terminated and state.returns()[0] == pytest.approx(6 + out.action[0].sum())
    finally:
        del gymnasium.registry["pbmarl_test/Toy-v0"]
