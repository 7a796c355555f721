"""Exploration noises: stationary variance, per-instance state, resets, saving."""

import numpy as np
import pytest

from pbmarl.policies.noise import (
    AdaptiveParameterNoise,
    ClippedNormal,
    Normal,
    OrnsteinUhlenbeck,
    Uniform,
    noise_from_state,
)


def test_ou_stationary_variance():
    """Euler-Maruyama OU: exact stationary variance sigma^2 / (theta (2 - theta dt)) -> sigma^2 / (2 theta)."""
    sigma, theta, dt = 0.3, 0.5, 0.1
    ou = OrnsteinUhlenbeck(sigma=sigma, theta=theta, dt=dt)
    rng = np.random.default_rng(0)
    n_env = 4000
    samples = []
    for t in range(300):  # correlation (1 - theta dt)^t: 0.95^100 < 0.006 after the burn-in
        x = ou.sample(rng, (n_env, 1))
        if t >= 100 and t % 10 == 0:
            samples.append(x[:, 0])
    var = np.var(np.concatenate(samples))
    assert ou.stationary_variance == pytest.approx(sigma**2 / (theta * (2 - theta * dt)))
    assert var == pytest.approx(ou.stationary_variance, rel=0.03)
    assert var == pytest.approx(sigma**2 / (2 * theta), rel=0.05)  # the continuous-time value, within theta dt / 2 + noise


def test_ou_is_correlated_in_time_and_resets_per_instance():
    ou = OrnsteinUhlenbeck(sigma=0.2, theta=0.15)
    rng = np.random.default_rng(1)
    xs = np.stack([ou.sample(rng, (3, 2)) for _ in range(50)])
    lag1 = np.corrcoef(xs[1:, 0, 0], xs[:-1, 0, 0])[0, 1]
    assert lag1 > 0.8 and np.all(np.abs(xs[-1]) > 0)  # white noise would give about 0
    ou.reset(np.array([False, True, False]))
    assert np.all(ou.state[1] == 0) and np.all(ou.state[[0, 2]] != 0)
    ou.reset()
    assert np.all(ou.state == 0)


def test_ou_only_moves_the_rows_it_is_given():
    ou = OrnsteinUhlenbeck()
    rng = np.random.default_rng(0)
    ou.sample(rng, (2, 1), indices=[0, 1])
    before = ou.state.copy()
    ou.sample(rng, (1, 1), indices=[1])
    assert ou.state[0, 0] == before[0, 0] and ou.state[1, 0] != before[1, 0]
    with pytest.raises(ValueError, match="distinct"):
        ou.sample(rng, (2, 1), indices=[1, 1])


@pytest.mark.parametrize("noise, check", [
    (Normal(sigma=0.2), lambda x: abs(x.std() - 0.2) < 0.01),
    (ClippedNormal(sigma=1.0, clip=0.5), lambda x: x.max() <= 0.5 and x.min() >= -0.5 and x.std() > 0.4),
    (Uniform(-0.1, 0.3), lambda x: x.min() >= -0.1 and x.max() <= 0.3 and abs(x.mean() - 0.1) < 0.01),
])
def test_stateless_noises(noise, check):
    x = noise.sample(np.random.default_rng(0), (5000, 2))
    assert x.shape == (5000, 2) and x.dtype == np.float32 and check(x)


def test_noises_save_and_load():
    ou = OrnsteinUhlenbeck(sigma=0.4, theta=0.2, dt=0.05)
    ou.sample(np.random.default_rng(0), (3, 2))
    back = noise_from_state(ou.arrays(), ou.meta())
    assert isinstance(back, OrnsteinUhlenbeck) and back.params == ou.params
    np.testing.assert_array_equal(back.state, ou.state)
    apn = AdaptiveParameterNoise(initial_stddev=0.2)
    apn.adapt(1.0)
    assert noise_from_state(apn.arrays(), apn.meta()).stddev == pytest.approx(0.2 / 1.01)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0, got -1"):
        Normal(sigma=-1)
    with pytest.raises(ValueError, match="theta=30"):
        OrnsteinUhlenbeck(theta=30, dt=0.1)
    with pytest.raises(ValueError, match="unknown noise kind 'pink'"):
        noise_from_state({}, {"kind": "pink"})
