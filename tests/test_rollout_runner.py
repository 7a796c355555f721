"""The vectorised runner: exact values, both engines, mixtures per episode, trajectories."""

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.rollout import run_episodes
from pbmarl.rollout.compiled import NotCompilable, compiled_tree

ENGINES = ["tree", "states"]


def _openspiel_value(game, policies):
    """Expected returns of per-player pbmarl TabularPolicies, computed by OpenSpiel."""
    from open_spiel.python import policy as osp
    from open_spiel.python.algorithms import expected_game_score

    table = osp.TabularPolicy(game.pyspiel_game)
    for p, pi in enumerate(policies):
        for key in table.states_per_player[p]:
            table.action_probability_array[table.state_lookup[key]] = pi.row(key)
    return np.asarray(expected_game_score.policy_value(game.pyspiel_game.new_initial_state(), [table] * game.num_players))


def _close(sampled, exact, *, sigmas=5.0):
    se = sampled.std(axis=0, ddof=1) / np.sqrt(len(sampled))
    assert np.all(np.abs(sampled.mean(axis=0) - exact) <= sigmas * se + 1e-9), (sampled.mean(axis=0), exact, se)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["kuhn_poker", "kuhn_poker(players=3)", "leduc_poker"])
def test_sampled_returns_match_openspiel_values(name, engine):
    game = pb.load_game(name)
    policies = [pb.TabularPolicy.random(game, seed=10 + p) for p in range(game.num_players)]
    episodes = 40_000 if engine == "tree" else 8_000
    out = run_episodes(game, policies, np.random.default_rng(1), episodes=episodes, num_envs=128, engine=engine)
    assert out.returns.shape == (episodes, game.num_players)
    assert out.lengths.sum() == out.steps
    _close(out.returns, _openspiel_value(game, policies))


@pytest.mark.parametrize("engine", ENGINES)
def test_matrix_game_matches_hand_computed_value(engine):
    M = np.array([[0.0, -1.0, 2.0], [1.0, 0.0, -1.0], [-1.0, 3.0, 0.0]])
    game = pb.MatrixGame(M)
    x, y = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.5, 0.3])
    out = run_episodes(game, [pb.policies.FixedPolicy(game, x), pb.policies.FixedPolicy(game, y)], np.random.default_rng(0),
                       episodes=50_000, engine=engine)
    value = x @ M @ y
    _close(out.returns, [value, -value])
    assert np.all(out.lengths == 1)


def test_three_player_matrix_game():
    rng = np.random.default_rng(0)
    payoffs = rng.normal(size=(2, 3, 2, 3))
    game = pb.MatrixGame(payoffs)
    strategies = [np.array([0.3, 0.7]), np.array([0.2, 0.2, 0.6]), np.array([0.9, 0.1])]
    out = run_episodes(game, [pb.policies.FixedPolicy(game, np.pad(s, (0, 3 - len(s)))) for s in strategies],
                       np.random.default_rng(1), episodes=60_000)
    exact = np.einsum("abcp,a,b,c->p", payoffs, *strategies)
    _close(out.returns, exact)


def test_simultaneous_openspiel_game_agrees_between_engines():
    game = pb.load_game("goofspiel(num_cards=4)")
    pi = [pb.policies.FixedPolicy(game, [0.1, 0.2, 0.3, 0.4]), pb.RandomPolicy(game)]
    a = run_episodes(game, pi, np.random.default_rng(0), episodes=20_000, engine="tree")
    b = run_episodes(game, pi, np.random.default_rng(1), episodes=5_000, engine="states")
    assert np.all(a.lengths == 3) and np.all(b.lengths == 3)  # the last card plays itself
    diff = a.returns.mean(axis=0) - b.returns.mean(axis=0)
    se = np.hypot(a.returns.std(axis=0) / np.sqrt(20_000), b.returns.std(axis=0) / np.sqrt(5_000))
    assert np.all(np.abs(diff) <= 5 * se)


def test_same_rng_same_episodes():
    game = pb.load_game("leduc_poker")
    pi = pb.MLPPolicy(game, hidden=(16,), seed=0)
    for engine in ENGINES:
        a = run_episodes(game, [pi, pi], np.random.default_rng(7), episodes=500, engine=engine)
        b = run_episodes(game, [pi, pi], np.random.default_rng(7), episodes=500, engine=engine)
        np.testing.assert_array_equal(a.returns, b.returns)
        np.testing.assert_array_equal(a.lengths, b.lengths)


@pytest.mark.parametrize("engine", ENGINES)
def test_mixture_member_is_drawn_once_per_episode(engine):
    # three rounds of rock-paper-scissors: against pure rock the learner (always rock) gets 0 per
    # round, against pure paper -1; an episode mixing the two would betray per-step mixing
    game = pb.load_game("repeated_game(stage_game=matrix_rps(),num_repetitions=3)")
    rock, paper = pb.policies.FixedPolicy.pure(game, 0), pb.policies.FixedPolicy.pure(game, 1)
    out = run_episodes(game, [rock, pb.Mixture([rock, paper], [0.5, 0.5])], np.random.default_rng(3),
                       learner=0, min_learner_steps=3_000, num_envs=64, engine=engine)
    traj = out.trajectories
    per_episode = [traj.reward[traj.episode == e] for e in range(traj.num_episodes)]
    assert all(len(r) == 3 for r in per_episode)
    assert all(np.all(r == r[0]) for r in per_episode)
    paper_share = np.mean([r[0] == -1.0 for r in per_episode])
    assert 0.4 < paper_share < 0.6
    np.testing.assert_allclose(traj.episode_returns[:, 0], [r.sum() for r in per_episode])


@pytest.mark.parametrize("engine", ENGINES)
def test_trajectories_are_whole_ordered_episodes(engine):
    game = pb.load_game("leduc_poker")
    learner = pb.MLPPolicy(game, hidden=(16,), seed=1)
    opponent = pb.Mixture([pb.RandomPolicy(game), pb.TabularPolicy.random(game, seed=2)], [0.3, 0.7])
    out = run_episodes(game, [opponent, learner], np.random.default_rng(0), learner=1,
                       min_learner_steps=2_000, num_envs=64, engine=engine)
    t = out.trajectories
    T = len(t)
    assert T >= 2_000 and t.player == 1
    assert t.obs.shape == (T,) + game.observation_shape and t.obs.dtype == np.float32
    assert t.legal_mask.shape == (T, game.num_actions) and t.legal_mask.dtype == bool
    assert t.action.dtype == np.int64 and t.done.dtype == bool
    assert np.all(np.diff(t.episode) >= 0)  # contiguous episodes, in order
    assert np.all(t.legal_mask[np.arange(T), t.action])
    probs = learner.action_probabilities(t.obs, t.legal_mask)
    np.testing.assert_allclose(t.action_prob, probs[np.arange(T), t.action], rtol=1e-6)
    # exactly one done per episode, at its last transition
    last = np.r_[t.episode[1:] != t.episode[:-1], True]
    np.testing.assert_array_equal(t.done, last)
    # rewards add up to the learner's return (Leduc pays only at the end)
    sums = np.bincount(t.episode, weights=t.reward, minlength=t.num_episodes)
    np.testing.assert_allclose(sums, t.episode_returns[:, 1])
    # next observation: the learner's next decision in the same episode, zeros when done
    np.testing.assert_array_equal(t.next_obs[~t.done], t.obs[1:][~t.done[:-1]])
    assert not t.next_obs[t.done].any() and not t.next_legal_mask[t.done].any()
    np.testing.assert_array_equal(t.next_legal_mask[~t.done], t.legal_mask[1:][~t.done[:-1]])
    assert t.episode_returns.shape == (t.num_episodes, 2) and t.steps == t.episode_lengths.sum()


def test_tree_and_state_engines_agree_on_leduc_with_mlps():
    game = pb.load_game("leduc_poker")
    pis = [pb.MLPPolicy(game, hidden=(16,), seed=s) for s in (0, 1)]
    a = run_episodes(game, pis, np.random.default_rng(0), episodes=40_000, engine="tree")
    b = run_episodes(game, pis, np.random.default_rng(1), episodes=3_000, engine="states")
    diff = a.returns.mean(axis=0) - b.returns.mean(axis=0)
    se = np.hypot(a.returns.std(axis=0) / np.sqrt(40_000), b.returns.std(axis=0) / np.sqrt(3_000))
    assert np.all(np.abs(diff) <= 5 * se)
    assert abs(a.lengths.mean() - b.lengths.mean()) < 0.1


def test_policy_called_once_per_distinct_policy_on_the_tree():
    game = pb.load_game("kuhn_poker")

    class Counting(pb.RandomPolicy):
        calls = 0

        def _probs(self, obs, legal_mask, keys):
            Counting.calls += 1
            return super()._probs(obs, legal_mask, keys)

    pi = Counting(game)
    run_episodes(game, [pi, pi], np.random.default_rng(0), episodes=5_000, engine="tree")
    assert Counting.calls == 1  # both seats' information states in one batch


def test_state_engine_makes_one_call_per_policy_per_step():
    game = pb.load_game("kuhn_poker")
    batches = []

    class Recording(pb.RandomPolicy):
        def _probs(self, obs, legal_mask, keys):
            batches.append(len(obs))
            return super()._probs(obs, legal_mask, keys)

    pi = Recording(game)
    out = run_episodes(game, [pi, pi], np.random.default_rng(0), episodes=300, num_envs=100, engine="states")
    assert sum(batches) == out.steps  # every decision went through a batch
    assert max(batches) == 100  # all instances in one call, both seats together


def test_compile_refuses_large_trees_and_auto_falls_back():
    game = pb.load_game("tic_tac_toe")
    with pytest.raises(NotCompilable):
        compiled_tree(game, max_nodes=1_000)
    with pytest.raises(ValueError, match="engine='tree' cannot run"):
        run_episodes(game, [pb.RandomPolicy(game)] * 2, np.random.default_rng(0), episodes=10, engine="tree")
    out = run_episodes(game, [pb.RandomPolicy(game)] * 2, np.random.default_rng(0), episodes=50)
    assert len(out.returns) == 50 and np.all(out.lengths >= 5)


def test_runner_rejects_bad_arguments():
    game = pb.load_game("kuhn_poker")
    pi = pb.RandomPolicy(game)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="one seat per player"):
        run_episodes(game, [pi], rng, episodes=10)
    with pytest.raises(ValueError, match="exactly one of"):
        run_episodes(game, [pi, pi], rng)
    with pytest.raises(ValueError, match="unknown engine"):
        run_episodes(game, [pi, pi], rng, episodes=1, engine="fast")
    with pytest.raises(TypeError, match="Policy or a Mixture"):
        run_episodes(game, [pi, "random"], rng, episodes=1)
