"""The control learners on a parameter server (``workers=2``) resume exactly (issue 48, section 2): the replay is
the learner's and each worker's episode in progress is kept as its reset seed and actions, so a run saved and
loaded, or interrupted by a Ctrl-C inside a step, takes the next steps its uninterrupted twin takes (before, the
replays and episodes lived in the workers, and a loaded or interrupted run started them from scratch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from interrupts import ctrl_c_then_like_its_twin  # a Ctrl-C at a chosen line

import pbmarl as pb

SMALL = {"seed": 0, "workers": 2, "backend": "local", "budget": 4_000, "steps_per_round": 64, "hidden": (16,),
         "learning_starts": 32, "batch_size": 16, "buffer_size": 2_000}
GAMES = {"sac": "gym:Pendulum-v1", "td3": "gym:Pendulum-v1", "ddpg": "gym:Pendulum-v1", "rainbow": "gym:CartPole-v1"}
OPTIONS = {"ddpg": {"noise": "ornstein_uhlenbeck"}, "rainbow": {"target_update_interval": 20, "atoms": 11}}


def _build(algo: str, sync: str) -> Any:
    cls = {"sac": pb.SAC, "td3": pb.TD3, "ddpg": pb.DDPG, "rainbow": pb.Rainbow}[algo]
    return cls(GAMES[algo], sync=sync, **{**SMALL, **OPTIONS.get(algo, {})})


def _row(run: Any) -> pd.DataFrame:
    h = run.history
    return h[[c for c in h.columns if not str(c).startswith(("wall_time", "time/"))]].reset_index(drop=True)


def _assert_same(a: Any, b: Any) -> None:
    pd.testing.assert_frame_equal(_row(a), _row(b), check_dtype=False)
    for name, module in a._modules().items():
        if isinstance(module, torch.nn.Module):
            for (k, x), (_, y) in zip(module.state_dict().items(), b._modules()[name].state_dict().items()):
                np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=f"{name}.{k}")
    sa, sb = a.replay.state_arrays(), b.replay.state_arrays()
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)
    ea, eb = a._extra_arrays(), b._extra_arrays()  # Rainbow's n-step discounts, DDPG's OU noise
    assert ea.keys() == eb.keys() and all(np.array_equal(ea[k], eb[k]) for k in ea)


def _waiting(run: Any) -> int:
    """Transitions the workers may hold back (Rainbow's n-step windows, each short of its newest transition)."""
    return run.config.workers * (getattr(run.config, "n_step", 1) - 1)


CASES = [("sac", "bsp"), ("sac", "asp"), ("td3", "asp"), ("ddpg", "bsp"), ("rainbow", "asp")]


@pytest.mark.parametrize(("algo", "sync"), CASES, ids=[f"{a}-{s}" for a, s in CASES])
def test_a_saved_and_loaded_control_run_on_a_parameter_server_takes_its_twins_next_steps(
        tmp_path: Path, algo: str, sync: str) -> None:
    with _build(algo, sync) as twin, _build(algo, sync) as run:
        twin.run(5, progress=False)
        run.run(3, progress=False)
        assert run.updates > 0 and 0 <= run.env_steps - len(run.replay) <= _waiting(run)  # all in the learner's replay
        run.save(tmp_path / "run")
        loaded = pb.load_run(tmp_path / "run")
        try:
            loaded.run(2, progress=False)
            _assert_same(loaded, twin)
            assert 0 <= loaded.env_steps - len(loaded.replay) <= _waiting(loaded)
        finally:
            loaded.close()


@pytest.mark.parametrize(("algo", "sync"), [("sac", "asp"), ("rainbow", "bsp")])
def test_a_ctrl_c_inside_a_control_step_on_a_parameter_server_leaves_it_continuing_like_its_twin(
        algo: str, sync: str) -> None:
    ctrl_c_then_like_its_twin(lambda: _build(algo, sync), _row, _assert_same)
