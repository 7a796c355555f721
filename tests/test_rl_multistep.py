"""pbmarl.rl.multistep: GAE, discounted returns and n-step targets by hand and at their limits."""

from __future__ import annotations

import numpy as np
import pytest

from pbmarl.rl.multistep import discounted_returns, gae, nstep_targets


def test_discounted_returns_reset_at_episode_ends():
    ret = discounted_returns(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([0, 0, 1, 0, 1], bool), gamma=0.5)
    assert np.allclose(ret, [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3, 4 + 0.5 * 5, 5])


def test_gae_limits_are_td_and_monte_carlo():
    rng = np.random.default_rng(0)
    reward = rng.normal(size=6)
    done = np.array([0, 0, 1, 0, 0, 1], bool)
    value = rng.normal(size=6)
    next_value = np.where(done, 0.0, np.roll(value, -1))
    adv0, _ = gae(reward, done, value, next_value, gamma=0.9, lam=0.0)
    assert np.allclose(adv0, reward + 0.9 * next_value * ~done - value)
    adv1, ret1 = gae(reward, done, value, next_value, gamma=0.9, lam=1.0)
    assert np.allclose(ret1, discounted_returns(reward, done, gamma=0.9))
    assert np.allclose(adv1, ret1 - value)


def test_gae_refuses_a_cut_episode():
    with pytest.raises(ValueError, match="whole episodes"):
        gae(np.ones(2), np.array([True, False]), np.zeros(2), np.zeros(2), gamma=1.0, lam=0.9)


def test_nstep_targets_by_hand() -> None:
    # two episodes: [1, 2, 3] (terminated), [4, 5] (truncated: bootstraps)
    reward = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    done = np.array([False, False, True, False, False])
    end = np.array([False, False, True, False, True])
    g = 0.5
    ret, disc, nxt = nstep_targets(reward, done, n=2, gamma=g, end=end)
    assert np.allclose(ret, [1 + g * 2, 2 + g * 3, 3, 4 + g * 5, 5])
    assert np.allclose(disc, [g**2, 0.0, 0.0, g**2, g])
    assert nxt.tolist() == [1, 2, 2, 4, 4]
    one, d1, _ = nstep_targets(reward, done, n=1, gamma=g, end=end)
    assert np.allclose(one, reward) and np.allclose(d1, [g, g, 0, g, g])
    with pytest.raises(ValueError, match="n must be a positive int"):
        nstep_targets(reward, done, n=0, gamma=g)
