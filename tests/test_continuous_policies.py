"""Policies on Box spaces: log-densities against torch.distributions, bounds, saving, discrete act."""

import numpy as np
import pytest
import torch
from torch.distributions import AffineTransform, Independent, Normal, TanhTransform, TransformedDistribution

import pbmarl as pb
from pbmarl.policies import DeterministicPolicy, GaussianPolicy
from pbmarl.policies.base import new_policy_from_state


@pytest.fixture(scope="module")
def pendulum():
    return pb.load_game("gym:Pendulum-v1")


def _obs(n=64, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def _reference(pi, obs):
    """torch's own tanh-squashed, rescaled Gaussian for the same mean and log-std."""
    mean, log_std = pi.distribution(torch.as_tensor(obs))
    loc = torch.as_tensor(pi.loc, dtype=mean.dtype)
    scale = torch.as_tensor(pi.scale, dtype=mean.dtype)
    base = Independent(Normal(mean, log_std.exp()), 1)
    return TransformedDistribution(base, [TanhTransform(), AffineTransform(loc, scale)])


@pytest.mark.parametrize("state_dependent_std", [True, False])
def test_gaussian_log_prob_equals_torch_reference(pendulum, state_dependent_std):
    pi = GaussianPolicy(pendulum, hidden=(16,), seed=0, state_dependent_std=state_dependent_std, log_std_init=-0.5)
    obs = _obs()
    out = pi.act(obs, None, rng=1)
    assert out.action.shape == (64, 1) and out.log_prob.shape == (64,)
    assert np.all(np.abs(out.action) <= 2.0)
    ref = _reference(pi, obs)
    with torch.no_grad():
        expected = ref.log_prob(torch.as_tensor(out.action, dtype=torch.float32)).double().numpy()
        again = pi.log_prob(obs, out.action).double().numpy()
    np.testing.assert_allclose(out.log_prob, expected, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(again, out.log_prob, rtol=1e-3, atol=1e-3)


def test_tanh_correction_is_included(pendulum):
    """Without the tanh and scale terms the densities would differ by their log-Jacobian."""
    pi = GaussianPolicy(pendulum, hidden=(16,), seed=2)
    obs = _obs(seed=3)
    out = pi.act(obs, None, rng=0)
    mean, log_std = pi.distribution(torch.as_tensor(obs))
    with torch.no_grad():
        u = torch.atanh(torch.as_tensor(out.action / 2.0, dtype=torch.float64)).float()
        gaussian_only = Independent(Normal(mean, log_std.exp()), 1).log_prob(u).double().numpy()
    jacobian = np.log(2.0 * (1.0 - np.tanh(u.double().numpy()) ** 2)).sum(-1)
    np.testing.assert_allclose(out.log_prob, gaussian_only - jacobian, rtol=1e-3, atol=1e-3)
    assert np.max(np.abs(jacobian)) > 0.1  # the correction is not negligible here


def test_gaussian_deterministic_and_seeded(pendulum):
    pi = GaussianPolicy(pendulum, hidden=(8,), seed=0)
    obs = _obs(8)
    a = pi.act(obs, None, rng=5).action
    np.testing.assert_array_equal(a, pi.act(obs, None, rng=5).action)
    assert not np.allclose(a, pi.act(obs, None, rng=6).action)
    mean, _ = pi.distribution(torch.as_tensor(obs))
    det = pi.act(obs, None, deterministic=True).action
    np.testing.assert_allclose(det, 2.0 * np.tanh(mean.detach().numpy()), rtol=1e-5)


@pytest.mark.parametrize("state_dependent_std", [True, False])
def test_reparameterised_sample_has_gradients(pendulum, state_dependent_std):
    pi = GaussianPolicy(pendulum, hidden=(8,), seed=0, state_dependent_std=state_dependent_std)
    action, log_prob = pi.sample(torch.as_tensor(_obs(4)))
    (action.sum() + log_prob.sum()).backward()
    assert all(p.grad is not None for p in pi.parameters())
    assert len(pi.parameters()) == len(list(pi.net.parameters())) + (0 if state_dependent_std else 1)


def test_box_policies_save_and_load_without_pickle(pendulum):
    for pi in (GaussianPolicy(pendulum, hidden=(8,), seed=1),
               GaussianPolicy(pendulum, hidden=(8,), seed=1, state_dependent_std=False, log_std_init=-1.0),
               DeterministicPolicy(pendulum, hidden=(8,), seed=1, noise=pb.policies.noise.OrnsteinUhlenbeck(sigma=0.3))):
        obs = _obs(5)
        pi.act(obs, None, rng=0)  # moves the OU state
        arrays, meta = pi.arrays(), pi.meta()
        import json

        json.dumps(meta)
        assert all(a.dtype != object for a in arrays.values())
        back = new_policy_from_state(pendulum, arrays, json.loads(json.dumps(meta)))
        assert type(back) is type(pi)
        np.testing.assert_allclose(back.act(obs, None, rng=3).action, pi.act(obs, None, rng=3).action)


def test_deterministic_policy_noise_and_bounds(pendulum):
    pi = DeterministicPolicy(pendulum, hidden=(8,), seed=0, noise=pb.policies.noise.Normal(sigma=0.5))
    obs = _obs(200)
    clean = pi.act(obs, None, deterministic=True)
    noisy = pi.act(obs, None, rng=0)
    assert np.all(np.abs(noisy.action) <= 2.0) and np.all(noisy.log_prob == 0)
    spread = np.std(noisy.action - clean.action)
    assert 0.5 < spread < 1.5  # sigma 0.5 in normalised units is 1.0 in Pendulum's torque, less clipping


def test_ou_noise_per_environment_instance(pendulum):
    ou = pb.policies.noise.OrnsteinUhlenbeck(sigma=0.3, theta=0.15)
    pi = DeterministicPolicy(pendulum, hidden=(8,), seed=0, noise=ou)
    pi.act(_obs(3), None, rng=0, env_ids=[0, 4, 7])
    assert ou.state.shape == (8, 1) and np.all(ou.state[[1, 2, 3, 5, 6]] == 0) and np.all(ou.state[[0, 4, 7]] != 0)
    pi.reset_noise([4])
    assert ou.state[4, 0] == 0 and ou.state[7, 0] != 0


def test_adaptive_parameter_noise_adapts(pendulum):
    pi = DeterministicPolicy(pendulum, hidden=(16,), seed=0,
                                noise=pb.policies.noise.AdaptiveParameterNoise(initial_stddev=1.0, desired_action_stddev=0.05))
    obs = _obs(64)
    noisy = pi.act(obs, None, rng=0).action
    assert not np.allclose(noisy, pi.act(obs, None, deterministic=True).action)
    distance = pi.adapt_noise(obs)
    assert distance > 0.05 and pi.noise.stddev == pytest.approx(1.0 / 1.01)


def test_box_policy_refuses_discrete_games():
    with pytest.raises(ValueError, match="needs a Box action space.*Discrete"):
        GaussianPolicy(pb.load_game("gym:CartPole-v1"))


def test_box_policy_names_bad_observation_shape(pendulum):
    with pytest.raises(ValueError, match=r"observations \[batch, 3\], got shape \(2, 5\)"):
        GaussianPolicy(pendulum, hidden=(4,)).act(np.zeros((2, 5)), None, rng=0)


def test_discrete_policies_act_with_log_probs():
    game = pb.load_game("kuhn_poker")
    state = game.new_initial_state()
    state.apply_action(0)
    state.apply_action(1)
    obs = np.repeat(game.observation(state, 0)[None], 500, axis=0)
    mask = np.repeat(game.legal_mask(state, 0)[None], 500, axis=0)
    pi = pb.policies.FixedPolicy(game, [0.25, 0.75])
    out = pi.act(obs, mask, rng=0)
    assert out.action.dtype == np.int64 and 0.68 < out.action.mean() < 0.82
    np.testing.assert_allclose(out.log_prob, np.log(np.where(out.action == 1, 0.75, 0.25)))
    assert np.all(pi.act(obs, mask, deterministic=True).action == 1)


def test_random_policy_is_uniform_in_a_box():
    game = pb.load_game("pettingzoo:simple_spread_v3", N=3, continuous_actions=True)
    pi = pb.RandomPolicy(game, player=1)
    out = pi.act(np.zeros((4000, 18), np.float32), None, rng=0)
    assert out.action.shape == (4000, 5) and out.action.min() >= 0 and out.action.max() <= 1
    assert abs(out.action.mean() - 0.5) < 0.01
    np.testing.assert_allclose(out.log_prob, 0.0)  # the unit cube has volume 1
    back = new_policy_from_state(game, pi.arrays(), pi.meta())
    assert back.player == 1 and back.box == pi.box


def test_mlp_policy_refuses_box_actions(pendulum):
    with pytest.raises(ValueError, match=r"MLPPolicy needs discrete actions.*Box\(-2.0, 2.0"):
        pb.MLPPolicy(pendulum)


def test_box_policies_join_a_population_and_save(tmp_path, pendulum):
    pop = pb.Population(pendulum)
    pop.add(0, GaussianPolicy(pendulum, hidden=(4,), seed=0))
    pop.add(0, DeterministicPolicy(pendulum, hidden=(4,), seed=1, noise=pb.policies.noise.Normal(0.1)))
    pop.add(0, pb.RandomPolicy(pendulum))
    pop.save(tmp_path / "pop")
    back = pb.Population.load(tmp_path / "pop", pendulum)
    obs = _obs(3)
    for a, b in zip(pop[0], back[0]):
        assert type(a) is type(b) and not b.discrete
        np.testing.assert_allclose(a.act(obs, None, deterministic=True).action, b.act(obs, None, deterministic=True).action)


def test_discrete_act_without_a_mask_allows_every_action():
    game = pb.load_game("gym:CartPole-v1")
    out = pb.MLPPolicy(game, hidden=(8,), seed=0).act(_obs(300, 4), None, rng=0)
    assert set(out.action.tolist()) == {0, 1} and np.all(out.log_prob < 0)


def _features(pi, obs):
    """The last hidden layer's output, computed layer by layer from the weights."""
    x = torch.as_tensor(obs)
    for layer in list(pi.net)[:-1]:
        x = layer(x)
    return x.detach()


def test_gsde_density_and_noise_follow_the_features(pendulum):
    """gSDE (Raffin et al. 2022): pre-squash noise z(o) @ (exp(log_std) * W) with W fixed between draws, and the
    density N(m, z^2 @ exp(log_std)^2 + eps) per dimension, checked against torch's own distributions."""
    pi = GaussianPolicy(pendulum, hidden=(16, 8), seed=0, sde=True, log_std_init=-1.0, clip_mean=2.0)
    assert pi.log_std.shape == (8, 1) and not pi.state_dependent_std
    with torch.no_grad():
        pi.log_std.copy_(torch.linspace(-2.0, 0.0, 8)[:, None])  # a different std per feature
    obs = torch.as_tensor(_obs(32))
    gen = torch.Generator().manual_seed(0)
    pi.reset_noise(gen)
    with torch.no_grad():
        a1, lp1 = pi.sample(obs)
        a2, _ = pi.sample(obs)  # the same matrix: the same actions
        z = _features(pi, obs)
        mean = pi.net(obs).clamp(-2.0, 2.0)
        std = (z.pow(2) @ pi.log_std.exp().pow(2) + 1e-6).sqrt()
        u = mean + z @ (pi.log_std.exp() * pi.noise_weights)
        np.testing.assert_allclose(a1.numpy(), (2.0 * torch.tanh(u)).numpy(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a1, a2)
        ref = TransformedDistribution(Independent(Normal(mean, std), 1), [TanhTransform(), AffineTransform(0.0, 2.0)])
        np.testing.assert_allclose(lp1.numpy(), ref.log_prob(a1).numpy(), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(pi.log_prob(obs, a1).numpy(), lp1.numpy(), rtol=1e-3, atol=1e-3)
        pi.reset_noise(gen)
        assert not torch.allclose(pi.sample(obs)[0], a1)
        det = pi.sample(obs, deterministic=True)[0]
        torch.testing.assert_close(det, 2.0 * torch.tanh(mean))
    action, log_prob = pi.sample(obs)  # gradients reach the network and every noise log-std
    (action.sum() + log_prob.sum()).backward()
    live = (z != 0).any(0)  # a feature that is 0 (ReLU) on every observation carries no noise, hence no gradient
    assert pi.log_std.grad is not None and bool(live.any()) and bool((pi.log_std.grad[:, 0] != 0).eq(live).all())
    assert all(p.grad is not None for p in pi.net.parameters())


def test_gsde_policy_saves_loads_and_names_bad_settings(pendulum):
    pi = GaussianPolicy(pendulum, hidden=(8,), seed=1, sde=True, log_std_init=-2.0)
    obs = _obs(5)
    back = new_policy_from_state(pendulum, pi.arrays(), pi.meta())
    assert back.sde and back.log_std.shape == (8, 1)
    np.testing.assert_allclose(back.act(obs, None, rng=3).action, pi.act(obs, None, rng=3).action)
    with pytest.raises(ValueError, match="sde=True.*hidden=\\(\\) has none"):
        GaussianPolicy(pendulum, hidden=(), sde=True)
    with pytest.raises(ValueError, match="clip_mean must be a positive number or None, got -1.0"):
        GaussianPolicy(pendulum, hidden=(8,), sde=True, clip_mean=-1.0)
    with pytest.raises(ValueError, match="reset_noise\\(\\) is for GaussianPolicy\\(sde=True\\)"):
        GaussianPolicy(pendulum, hidden=(8,)).reset_noise()
