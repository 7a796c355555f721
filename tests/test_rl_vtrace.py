"""V-trace against a plain loop over the paper's eq. (1) and (4), truncated weights included."""

from __future__ import annotations

import numpy as np
import pytest

from pbmarl.rl.multistep import discounted_returns
from pbmarl.rl.vtrace import vtrace


def reference(log_rhos, disc, r, v, v_next, gamma, rho_bar, c_bar, pg_bar, lam):
    """Eq. (1) as a double sum with explicit products, eq. (4) from its v_{s+1}."""
    T = len(r)
    ratio = np.exp(log_rhos)
    vs = np.zeros(T)
    for s in range(T):
        total = v[s]
        for t in range(s, T):
            weight = 1.0
            for k in range(s, t):
                weight *= gamma * disc[k] * lam * min(c_bar, ratio[k])
            delta = min(rho_bar, ratio[t]) * (r[t] + gamma * disc[t] * v_next[t] - v[t])
            total += weight * delta
        vs[s] = total
    adv = np.zeros(T)
    for s in range(T):
        v_sp1 = vs[s + 1] if s + 1 < T else v_next[s]  # the paper's v_{s+1}; the bootstrap past the end
        adv[s] = min(pg_bar, ratio[s]) * (r[s] + gamma * disc[s] * v_sp1 - v[s])
    return vs, adv


@pytest.mark.parametrize("seed", range(6))
def test_vtrace_equals_the_papers_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 25))
    log_rhos = rng.normal(0, 1.5, T)  # ratios well above and below the truncation levels
    disc = (rng.random(T) > 0.2).astype(float)
    r, v = rng.normal(size=T), rng.normal(size=T)
    v_next = np.append(v[1:], rng.normal())
    v_next[disc == 0] = 0.0
    gamma, lam = rng.uniform(0.5, 1.0), rng.uniform(0.5, 1.0)
    rho_bar, c_bar, pg_bar = rng.uniform(0.5, 2.0), rng.uniform(0.3, 1.5), rng.uniform(0.5, 2.0)
    assert (np.exp(log_rhos) > min(rho_bar, c_bar)).any()  # truncation matters here
    vs, adv = vtrace(log_rhos, disc, r, v, v_next, gamma=gamma, rho_bar=rho_bar, c_bar=c_bar,
                     rho_pg_bar=pg_bar, lam=lam)
    ref_vs, ref_adv = reference(log_rhos, disc, r, v, v_next, gamma, rho_bar, c_bar, pg_bar, lam)
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-10, atol=1e-10)


def test_on_policy_vtrace_is_the_discounted_return() -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(size=12)
    done = np.zeros(12, bool)
    done[[4, 11]] = True
    v = rng.normal(size=12)
    v_next = np.append(v[1:], 0.0) * ~done
    vs, _ = vtrace(np.zeros(12), 1.0 - done, r, v, v_next, gamma=0.9)
    np.testing.assert_allclose(vs, discounted_returns(r, done, gamma=0.9), atol=1e-12)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="rewards must be 1-D of length 3"):
        vtrace(np.zeros(3), np.ones(3), np.zeros(2), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="c_bar must be a positive number"):
        vtrace(np.zeros(3), np.ones(3), np.zeros(3), np.zeros(3), np.zeros(3), c_bar=0)
    with pytest.raises(ValueError, match="gamma must be a number in"):
        vtrace(np.zeros(3), np.ones(3), np.zeros(3), np.zeros(3), np.zeros(3), gamma=1.5)
