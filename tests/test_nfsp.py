"""NFSP: reservoir sampling is uniform, learning lowers Kuhn exploitability, save/resume equals uninterrupted."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pbmarl.algorithms.nfsp import NFSP, NFSPConfig
from pbmarl.learners.reservoir import ReservoirBuffer

TINY = dict(episodes_per_step=150, min_buffer=64, batch_size=32, learn_every=16, hidden=(16,))


def test_reservoir_keeps_a_uniform_sample_chi_square():
    n, capacity, trials = 60, 10, 3000
    rng = np.random.default_rng(0)
    kept = np.zeros(n)
    for _ in range(trials):
        buf = ReservoirBuffer(capacity, (1,), 2)
        for i in range(n):
            buf.add(np.array([i], np.float32), np.array([True, True]), i, rng)
        kept[buf.action[:capacity]] += 1
    expected = np.full(n, trials * capacity / n)
    assert kept.sum() == trials * capacity
    assert stats.chisquare(kept, expected).pvalue > 1e-3
    early, late = kept[:30].sum(), kept[30:].sum()
    assert abs(early - late) < 0.1 * kept.sum()  # not biased towards recent items


def test_reservoir_grows_and_round_trips():
    rng = np.random.default_rng(1)
    buf = ReservoirBuffer(10_000, (3,), 4)
    for i in range(5000):
        buf.add(np.full(3, i, np.float32), np.ones(4, bool), i % 4, rng)
    assert len(buf) == 5000 and buf.action[4999] == 4999 % 4
    other = ReservoirBuffer(10_000, (3,), 4)
    other.load_state_arrays(buf.state_arrays())
    assert other.seen == 5000 and np.array_equal(other.obs[:5000], buf.obs[:5000])
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        ReservoirBuffer(0, (1,), 2)


def test_config_checks_and_defaults_cite_leduc():
    assert NFSPConfig().rl_lr == 0.1 and NFSPConfig().sl_lr == 0.005 and NFSPConfig().anticipatory == 0.1
    with pytest.raises(ValueError, match="anticipatory must be a number in"):
        NFSP("kuhn_poker", anticipatory=1.5)


def test_nfsp_on_kuhn_measures_exactly_and_resumes(tmp_path):
    whole = NFSP("kuhn_poker", seed=0, **TINY)
    list(whole.run(4))
    h = whole.history
    assert h["exploitability"].notna().all() and h["episodes"].tolist() == [150, 300, 450, 600]
    assert np.isfinite(h["sl_loss"].iloc[-1])  # the average policy is being fit
    part = NFSP("kuhn_poker", seed=0, save_dir=tmp_path / "run", **TINY)
    list(part.run(2))
    resumed = NFSP.load(tmp_path / "run")
    list(resumed.run(2))
    cols = ["episodes", "env_steps", "exploitability", "rl_loss", "sl_loss"]
    assert np.allclose(resumed.history[cols].to_numpy(float), h[cols].to_numpy(float), equal_nan=True)


def test_an_interrupted_step_leaves_the_run_as_it_was(monkeypatch):
    run = NFSP("kuhn_poker", seed=0, **TINY)
    run.step()
    before = (run.episodes, list(run.decisions), run.rng.bit_generator.state, len(run.reservoir[0]),
              [p.detach().clone() for p in run.avg_nets[0].parameters()])
    calls = {"n": 0}
    original = NFSP.play_episode

    def flaky(self):
        calls["n"] += 1
        if calls["n"] == 100:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(NFSP, "play_episode", flaky)
    with pytest.raises(KeyboardInterrupt):
        run.step()
    assert (run.episodes, run.decisions, run.rng.bit_generator.state, len(run.reservoir[0])) == before[:4]
    assert all(np.array_equal(a.detach(), b) for a, b in zip(run.avg_nets[0].parameters(), before[4]))
    assert len(run.records) == 1
