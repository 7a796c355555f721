"""The shared pieces of the RL learners: returns, buffers, masking, configs, registry."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import pbmarl as pb
from pbmarl.learners import A2CConfig, DQNConfig, PPOConfig, make_learner
from pbmarl.learners.common.buffers import PrioritizedReplayBuffer, ReplayBuffer
from pbmarl.learners.common.nets import EpsilonGreedy, seeded, tempered_policy
from pbmarl.learners.oracles.base import learner_returns
from pbmarl.policies.neural import build_mlp
from pbmarl.rollout.trajectories import Trajectories


def hand_made(rewards, dones, obs_dim=3, num_actions=2):
    """Trajectories of one seat from per-transition rewards and episode ends."""
    T = len(rewards)
    done = np.asarray(dones, bool)
    episode = np.concatenate([[0], np.cumsum(done)[:-1]]).astype(np.int64)
    E = int(done.sum())
    obs = np.arange(T * obs_dim, dtype=np.float32).reshape(T, obs_dim)
    mask = np.ones((T, num_actions), bool)
    next_obs = np.where(done[:, None], 0.0, np.roll(obs, -1, axis=0)).astype(np.float32)
    returns = np.zeros((E, 2))
    np.add.at(returns[:, 0], episode, rewards)
    return Trajectories(obs=obs, legal_mask=mask, action=np.zeros(T, np.int64), action_prob=np.full(T, 0.5),
                        reward=np.asarray(rewards, float), done=done, next_obs=next_obs,
                        next_legal_mask=mask & ~done[:, None], episode=episode, episode_returns=returns,
                        episode_lengths=np.full(E, 2), steps=2 * T, player=0)


# -- returns -------------------------------------------------------------------


def test_learner_returns_reads_the_learning_seat():
    traj = hand_made([1.0, 2.0, -1.0], [0, 1, 1])
    assert learner_returns(traj).tolist() == [3.0, -1.0]


# -- buffers -------------------------------------------------------------------
def test_replay_buffer_wraps_and_round_trips():
    buf = ReplayBuffer(4, (3,), 2)
    buf.add(hand_made([1.0, 2.0, 3.0], [0, 0, 1]))
    buf.add(hand_made([4.0, 5.0], [0, 1]))
    assert len(buf) == 4 and sorted(buf.reward.tolist()) == [2.0, 3.0, 4.0, 5.0]
    batch = buf.sample(64, np.random.default_rng(0))
    assert set(batch.reward.tolist()) <= {2.0, 3.0, 4.0, 5.0} and np.all(batch.weight == 1)
    copy = ReplayBuffer(4, (3,), 2)
    copy.load_state_arrays(buf.state_arrays())
    a, b = buf.sample(8, np.random.default_rng(1)), copy.sample(8, np.random.default_rng(1))
    assert np.array_equal(a.obs, b.obs) and np.array_equal(a.reward, b.reward)


def test_prioritised_replay_prefers_large_td_errors():
    buf = PrioritizedReplayBuffer(100, (3,), 2, alpha=1.0, beta=1.0)
    buf.add(hand_made(np.ones(10), [0] * 9 + [1]))
    buf.update_priorities(np.arange(10), np.r_[np.full(9, 1e-6), 10.0])
    batch = buf.sample(1000, np.random.default_rng(0))
    assert (batch.index == 9).mean() > 0.95
    assert batch.weight.max() == pytest.approx(1.0) and batch.weight[batch.index != 9].min() == pytest.approx(1.0)
    assert batch.weight[batch.index == 9].max() < 0.2


# -- masking -------------------------------------------------------------------


def test_epsilon_greedy_and_greedy_export_never_pick_illegal_actions():
    game = pb.load_game("leduc_poker")
    net = seeded(0, lambda: build_mlp(30, (16,), game.num_actions))
    with torch.no_grad():
        net[-1].bias[:] = torch.tensor([0.0, 0.0, 100.0])  # the raise looks best everywhere
    obs = np.random.default_rng(0).random((5, 30), dtype=np.float32)
    mask = np.array([[True, True, False]] * 5)
    for policy in (EpsilonGreedy(game, net, hidden=(16,), epsilon=0.3), tempered_policy(net, game, (16,), temperature=1e-3)):
        probs = policy.action_probabilities(obs, mask)
        assert np.all(probs[:, 2] == 0) and np.allclose(probs.sum(axis=1), 1)
    probs = EpsilonGreedy(game, net, hidden=(16,), epsilon=0.3).action_probabilities(obs, np.ones((5, 3), bool))
    assert np.allclose(probs[:, 2], 0.8)


def test_seeded_builds_are_repeatable_and_leave_global_rng_alone():
    before = torch.random.get_rng_state()
    a = seeded(7, lambda: build_mlp(4, (8,), 2))
    b = seeded(7, lambda: build_mlp(4, (8,), 2))
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


# -- configs and registry ------------------------------------------------------
def test_unknown_option_lists_the_valid_ones():
    game = pb.load_game("kuhn_poker")
    with pytest.raises(TypeError, match="unknown option 'learning_rate' for DQN; did you mean .* Accepted options: "
                                        ".*hidden, lr, gamma"):
        pb.DQN(game, learning_rate=1e-3)


@pytest.mark.parametrize("cls, field, value, accepted", [
    (DQNConfig, "lr", 0.0, "a positive number"),
    (DQNConfig, "gamma", 1.5, r"a number in \[0, 1\]"),
    (DQNConfig, "hidden", (64, 0), "a sequence of positive ints"),
    (DQNConfig, "budget", 10.5, "a positive int"),
    (DQNConfig, "epsilon_end", -0.1, r"a number in \[0, 1\]"),
    (DQNConfig, "loss", "l1", "one of"),
    (DQNConfig, "prioritized", "yes", "True or False"),
    (PPOConfig, "clip_coef", 0, "a positive number"),
    (PPOConfig, "minibatches", 0, "a positive int"),
    (PPOConfig, "minibatch_size", 0, "None or a positive int"),
    (A2CConfig, "gae_lambda", 2.0, r"a number in \[0, 1\]"),
])
def test_bad_config_values_name_the_field_and_what_is_accepted(cls, field, value, accepted):
    with pytest.raises(ValueError, match=f"{field} must be {accepted}") as info:
        cls(**{field: value})
    assert f"got {value!r}" in str(info.value)


def test_config_object_and_keywords_combine():
    game = pb.load_game("kuhn_poker")
    learner = pb.PPO(game, config=PPOConfig(lr=5e-4, epochs=2), epochs=3)
    assert learner.config.lr == 5e-4 and learner.config.epochs == 3
    with pytest.raises(TypeError, match="must be a PPOConfig"):
        pb.PPO(game, config=DQNConfig())
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63\), got -1"):
        pb.A2C(game, seed=-1)


def test_make_learner_round_trips_the_spec_and_names_unknown_learners():
    game = pb.load_game("kuhn_poker")
    learner = make_learner(game, {"name": "dqn", "seed": 3, "budget": 5000, "hidden": [32, 32]})
    assert learner.seed == 3 and learner.config.budget == 5000 and learner.config.hidden == (32, 32)
    again = make_learner(game, learner.spec())
    assert type(again) is type(learner) and again.config == learner.config and again.spec() == learner.spec()
    assert isinstance(make_learner(game, {"name": "exact", "seed": 0}), pb.ExactBestResponse)
    with pytest.raises(ValueError, match="unknown learner 'ppo2'; did you mean 'ppo'"):
        make_learner(game, {"name": "ppo2"})
    with pytest.raises(TypeError, match="unknown option 'bugdet'"):
        make_learner(game, {"name": "a2c", "bugdet": 10})


def test_importing_learners_does_not_import_torch():
    code = "import sys, pbmarl.learners as L; L.ExactBestResponse; assert 'torch' not in sys.modules; L.make_learner"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


@pytest.mark.parametrize("size", [None, 16])
def test_ppo_minibatch_size_cuts_each_round_by_its_length(size):
    """A fixed `minibatch_size` gives ``epochs * ceil(T / size)`` updates for a round of T samples (so longer
    rounds take more steps); without it every round takes ``epochs * minibatches``."""
    game = pb.load_game("gym:CartPole-v1")
    learner = pb.PPO(game, seed=0, steps_per_round=64, num_envs=2, epochs=3, minibatches=2, minibatch_size=size,
                     budget=200)
    before = 0
    for _ in range(3):
        learner.step()
        task = learner.task
        rows = int(learner.history["learner_steps"].iloc[-1]) - (int(learner.history["learner_steps"].iloc[-2])
                                                                 if len(learner.history) > 1 else 0)
        expected = 3 * (2 if size is None else -(-rows // size))
        assert task.updates - before == expected and rows >= 64
        before = task.updates
