"""NFSP: reservoir sampling is uniform, learning lowers Kuhn exploitability, save/resume equals uninterrupted."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from pbmarl.algorithms.nfsp import NFSP
from pbmarl.algorithms.nfsp_config import NFSPConfig
from pbmarl.learners.common.reservoir import ReservoirBuffer

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


@pytest.mark.parametrize(("options", "message"), [
    ({"batch_size": True}, "batch_size must be an int in .*, got True"),
    ({"rl_lr": float("nan")}, "rl_lr must be a positive number, got nan"),
    ({"hidden": (0,)}, "hidden must be layer widths"),
    ({"hidden": "64"}, "hidden must be layer widths"),
    ({"hidden": (60000, 60000)}, r"hidden must be layer widths, a tuple of at most 64 ints in \[1, 16,384\]"),
    ({"min_buffer": 500, "replay_capacity": 100}, r"min_buffer must be at most replay_capacity \(100\)"),
    ({"replay_capacity": 10**10}, "replay_capacity must be an int in \\[1, 100,000,000\\]"),
    ({"replay_capacity": 10**8}, "replay_capacity=100,000,000 would need .* GiB"),
    ({"optimizer": "rmsprop"}, r"optimizer must be one of \('sgd', 'adam'\), got 'rmsprop'"),
])
def test_bad_options_are_refused_naming_them(options, message):
    with pytest.raises(ValueError, match=message):
        NFSP("kuhn_poker", **options)


def test_options_seed_and_games_are_checked():
    with pytest.raises(TypeError, match="unknown option 'episodes_per_stp' for NFSP; did you mean 'episodes_per_step'"):
        NFSP("kuhn_poker", episodes_per_stp=5)
    with pytest.raises(ValueError, match="seed must be an int"):
        NFSP("kuhn_poker", seed=-1)
    assert NFSP("kuhn_poker", hidden=[16, 8]).config.hidden == (16, 8)


def test_a_one_player_game_is_refused():
    pytest.importorskip("gymnasium")
    with pytest.raises(ValueError, match="two or more players; 'gym:CartPole-v1' has 1"):
        NFSP("gym:CartPole-v1")


def test_evaluate_plays_the_average_policies_and_changes_nothing():
    run = NFSP("kuhn_poker", seed=0, **TINY)
    run.step()
    state = run.rng.bit_generator.state
    res = run.evaluate(100, seed=0)
    assert list(res.mean.index) == [0, 1] and res.mean.sum() == pytest.approx(0.0)
    assert run.evaluate(100, seed=0).mean.equals(res.mean) and run.rng.bit_generator.state == state


def test_nfsp_on_kuhn_measures_exactly_and_resumes(tmp_path):
    whole = NFSP("kuhn_poker", seed=0, **TINY)
    whole.run(4, progress=False)
    h = whole.history
    assert h["exploitability"].notna().all() and h["episodes"].tolist() == [150, 300, 450, 600]
    assert np.isfinite(h["loss/sl"].iloc[-1])  # the average policy is being fit
    part = NFSP("kuhn_poker", seed=0, **TINY)
    part.run(2, progress=False)
    part.save(tmp_path / "run")
    resumed = NFSP.load(tmp_path / "run")
    resumed.run(2, progress=False)
    cols = ["episodes", "env_steps", "exploitability", "nash_conv", "loss/rl", "loss/sl"]
    assert np.allclose(resumed.history[cols].to_numpy(float), h[cols].to_numpy(float), equal_nan=True)

def _step_with_ctrl_c_at_episode(run, n, monkeypatch):
    """Take ``run.step()`` with a KeyboardInterrupt raised as its `n`-th episode starts; it must reach the caller."""
    calls = {"n": 0}
    original = NFSP.play_episode

    def flaky(self):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(NFSP, "play_episode", flaky)
    with pytest.raises(KeyboardInterrupt):
        run.step()
    monkeypatch.undo()


def test_an_interrupted_step_leaves_the_run_as_it_was(monkeypatch):
    run = NFSP("kuhn_poker", seed=0, **TINY)
    run.step()
    before = (run.episodes, list(run.decisions), run.rng.bit_generator.state, len(run.reservoir[0]),
              [p.detach().clone() for p in run.avg_nets[0].parameters()])
    _step_with_ctrl_c_at_episode(run, 100, monkeypatch)
    assert (run.episodes, run.decisions, run.rng.bit_generator.state, len(run.reservoir[0])) == before[:4]
    assert all(np.array_equal(a.detach(), b) for a, b in zip(run.avg_nets[0].parameters(), before[4]))
    assert len(run.records) == 1


def test_play_flushes_subnormals_and_leaves_torchs_default_after(monkeypatch):
    run = NFSP("kuhn_poker", seed=0, **TINY)
    seen, play = [], run.play_episode

    def watched() -> None:
        seen.append(torch.tensor([1e-39]).item())
        play()

    monkeypatch.setattr(run, "play_episode", watched)
    run.step()
    assert len(seen) == TINY["episodes_per_step"] and set(seen) == {0.0}
    assert torch.tensor([1e-39]).item() > 0
    monkeypatch.undo()
    _step_with_ctrl_c_at_episode(run, 10, monkeypatch)   # an interrupted step switches it off too
    assert torch.tensor([1e-39]).item() > 0


def test_adam_drives_both_networks_and_resumes_exactly(tmp_path):
    whole = NFSP("kuhn_poker", seed=0, optimizer="adam", rl_lr=1e-3, sl_lr=1e-3, **TINY)
    assert all(isinstance(o, torch.optim.Adam) for o in whole.rl_opts + whole.sl_opts)
    whole.run(2, progress=False)
    part = NFSP("kuhn_poker", seed=0, optimizer="adam", rl_lr=1e-3, sl_lr=1e-3, **TINY)
    part.run(1, progress=False)
    part.save(tmp_path / "run")
    resumed = NFSP.load(tmp_path / "run")
    assert resumed.config.optimizer == "adam" and isinstance(resumed.sl_opts[0], torch.optim.Adam)
    resumed.run(1, progress=False)
    cols = ["env_steps", "exploitability", "loss/rl", "loss/sl"]
    assert np.allclose(resumed.history[cols].to_numpy(float), whole.history[cols].to_numpy(float), equal_nan=True)
    assert NFSP("kuhn_poker", **TINY).rl_opts[0].__class__ is torch.optim.SGD  # the paper's, still the default


def test_kept_answers_are_dropped_when_the_weights_change():
    run = NFSP("kuhn_poker", seed=0, **TINY)
    game = run.game
    state = game.new_initial_state()
    while state.is_chance_node():
        state.apply_action(state.chance_outcomes()[0][0])
    obs, mask = game.observation(state, 0), game.legal_mask(state, 0)
    net = run.avg_nets[0]

    def fresh() -> np.ndarray:
        with torch.no_grad():
            logits = net(torch.as_tensor(obs, dtype=torch.float32)[None]).masked_fill(~torch.as_tensor(mask)[None], -1e30)
            return torch.softmax(logits, -1)[0].double().numpy()

    first = run._answer(net, obs, mask, greedy=False)
    assert np.array_equal(first, fresh()) and run._answer(net, obs, mask, greedy=False) is first  # kept
    with torch.no_grad():
        net[0].bias.add_(5.0 * torch.arange(net[0].bias.numel()))  # an in-place write, as an optimiser's
    changed = run._answer(net, obs, mask, greedy=False)
    assert not np.array_equal(changed, first) and np.allclose(changed, fresh())
    net.load_state_dict({k: v * 0.5 for k, v in net.state_dict().items()})
    assert np.allclose(run._answer(net, obs, mask, greedy=False), fresh())
    q = run._answer(run.q_nets[0], obs, mask, greedy=True)
    with torch.no_grad():
        assert np.array_equal(q, run.q_nets[0](torch.as_tensor(obs, dtype=torch.float32)[None])[0].numpy())


def test_reservoir_rollback_puts_back_what_offers_overwrote():
    rng = np.random.default_rng(2)
    buf = ReservoirBuffer(8, (2,), 3)
    for i in range(20):
        buf.add(np.full(2, i, np.float32), np.array([True, i % 2 == 0, True]), i % 3, rng)
    before = {k: v.copy() for k, v in buf.state_arrays().items()}
    journal = buf.mark()
    for i in range(20, 60):
        buf.add(np.full(2, i, np.float32), np.array([False, True, False]), 2, rng)
    assert buf.seen == 60 and journal.rows  # some kept rows were overwritten
    buf.rollback(journal)
    after = buf.state_arrays()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    stale = buf.mark()
    buf.mark()
    with pytest.raises(ValueError, match="latest mark"):
        buf.rollback(stale)


def test_restore_refuses_a_snapshot_older_than_the_latest():
    run = NFSP("kuhn_poker", seed=0, **TINY)
    old = run.snapshot()
    run.snapshot()
    with pytest.raises(ValueError, match="latest snapshot"):
        run.restore(old)


def test_an_interrupted_step_puts_back_the_overwritten_buffer_rows(monkeypatch):
    run = NFSP("kuhn_poker", seed=0, **{**TINY, "replay_capacity": 100, "reservoir_capacity": 80})
    run.step()  # both buffers full: the next step overwrites rows
    before = [({k: v.copy() for k, v in r.state_arrays().items()}, {k: v.copy() for k, v in s.state_arrays().items()})
              for r, s in zip(run.replay, run.reservoir)]
    _step_with_ctrl_c_at_episode(run, 120, monkeypatch)
    for (replay, reservoir), r, s in zip(before, run.replay, run.reservoir):
        assert replay.keys() == r.state_arrays().keys() and reservoir.keys() == s.state_arrays().keys()
        assert all(np.array_equal(v, r.state_arrays()[k]) for k, v in replay.items())
        assert all(np.array_equal(v, s.state_arrays()[k]) for k, v in reservoir.items())
    again = NFSP("kuhn_poker", seed=0, **{**TINY, "replay_capacity": 100, "reservoir_capacity": 80})
    again.run(2, progress=False)
    run.step()  # the interrupted run continues as if never interrupted
    cols = ["env_steps", "episodes", "exploitability", "loss/rl", "loss/sl"]
    assert np.array_equal(run.history[cols].to_numpy(float), again.history[cols].to_numpy(float), equal_nan=True)
