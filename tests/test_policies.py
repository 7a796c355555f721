"""Policies: the batched protocol, masking, sampling, mixtures and serialisation."""

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.policies import check_policy, new_policy_from_state, sample_actions


@pytest.fixture(scope="module")
def leduc():
    return pb.load_game("leduc_poker")


def _batch(game, n=64, seed=0):
    tree = game.tree()
    infos = tree.infosets[0]
    idx = np.random.default_rng(seed).integers(infos.size, size=n)
    return infos.obs[idx], infos.legal[idx], [infos.keys[i] for i in idx]


@pytest.mark.parametrize("make", [
    lambda g: pb.RandomPolicy(g),
    lambda g: pb.TabularPolicy.random(g, seed=0),
    lambda g: pb.policies.FixedPolicy(g, [0.5, 0.5, 0.0]),
    lambda g: pb.policies.FixedPolicy.pure(g, 2),
    lambda g: pb.MLPPolicy(g, hidden=(16, 16), seed=0),
])
def test_probabilities_are_distributions_on_legal_actions(leduc, make):
    policy = make(leduc)
    obs, mask, keys = _batch(leduc)
    probs = policy.action_probabilities(obs, mask, keys)
    assert probs.shape == mask.shape
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert np.all(probs[~mask] == 0.0)
    out = policy.act(obs, mask, np.random.default_rng(0), keys)
    actions = out.action
    assert mask[np.arange(len(actions)), actions].all()
    np.testing.assert_allclose(out.log_prob, np.log(probs[np.arange(len(actions)), actions]))


def test_sampling_matches_probabilities():
    rng = np.random.default_rng(0)
    probs = np.tile([[0.2, 0.0, 0.8]], (40_000, 1))
    counts = np.bincount(sample_actions(probs, rng), minlength=3) / 40_000
    np.testing.assert_allclose(counts, [0.2, 0.0, 0.8], atol=0.01)


def test_mlp_same_seed_same_weights(leduc):
    obs, mask, keys = _batch(leduc)
    a = pb.MLPPolicy(leduc, hidden=(8,), seed=3).action_probabilities(obs, mask)
    b = pb.MLPPolicy(leduc, hidden=(8,), seed=3).action_probabilities(obs, mask)
    c = pb.MLPPolicy(leduc, hidden=(8,), seed=4).action_probabilities(obs, mask)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("make", [
    lambda g: pb.RandomPolicy(g),
    lambda g: pb.TabularPolicy.random(g, seed=1),
    lambda g: pb.policies.FixedPolicy(g, [0.1, 0.6, 0.3]),
    lambda g: pb.MLPPolicy(g, hidden=(8, 4), seed=2),
])
def test_serialisation_round_trip_is_exact(leduc, make):
    policy = make(leduc)
    copy = new_policy_from_state(leduc, policy.arrays(), policy.meta())
    obs, mask, keys = _batch(leduc)
    np.testing.assert_array_equal(policy.action_probabilities(obs, mask, keys), copy.action_probabilities(obs, mask, keys))
    assert type(copy) is type(policy)


def test_tabular_needs_keys_and_rejects_unknown_states(leduc):
    policy = pb.TabularPolicy(leduc)
    obs, mask, keys = _batch(leduc, n=2)
    with pytest.raises(ValueError, match="keys"):
        policy.action_probabilities(obs, mask)
    with pytest.raises(KeyError, match="not-a-state"):
        policy.action_probabilities(obs, mask, ["not-a-state", keys[1]])


def test_tabular_set_row_bumps_version_and_validates():
    kuhn = pb.load_game("kuhn_poker")
    policy = pb.TabularPolicy(kuhn)
    key = policy.keys[0]
    policy.set_row(key, [0.25, 0.75])
    assert policy.version == 1 and policy.row(key).tolist() == [0.25, 0.75]
    with pytest.raises(ValueError, match="distribution"):
        policy.set_row(key, [0.5, 0.6])
    assert policy.row(key).tolist() == [0.25, 0.75]


class _WrongShape(pb.policies.Policy):
    kind = "test-wrong-shape"

    def _probs(self, obs, legal_mask, keys):
        return np.ones((len(obs), self.num_actions + 1))


def test_policy_with_wrong_output_shape_is_rejected(leduc):
    with pytest.raises(ValueError, match=r"shape \(1, 4\).*expected \(1, 3\)"):
        check_policy(_WrongShape(leduc), leduc)


def test_policy_for_another_game_is_rejected(leduc):
    with pytest.raises(ValueError, match="kuhn_poker"):
        check_policy(pb.RandomPolicy(pb.load_game("kuhn_poker")), leduc)


def test_mixture_weights_must_be_on_the_simplex(leduc):
    members = [pb.RandomPolicy(leduc), pb.policies.FixedPolicy.pure(leduc, 1)]
    for bad in ([0.5, 0.6], [1.2, -0.2], [1.0], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="simplex|entries"):
            pb.Mixture(members, bad)


def test_mixture_draws_members_by_weight(leduc):
    members = [pb.RandomPolicy(leduc), pb.policies.FixedPolicy.pure(leduc, 1)]
    mix = pb.Mixture(members, [0.25, 0.75])
    draws = mix.sample_index(np.random.default_rng(0), size=20_000)
    assert abs(draws.mean() - 0.75) < 0.015
    assert mix.sample(np.random.default_rng(1)) in members
