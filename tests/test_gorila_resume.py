"""Gorila DQN (``workers=2``) resumes exactly (issue 48, section 2): the replay its workers fill is the learner's,
so a run saved and loaded, or interrupted by a Ctrl-C inside a step, takes the next step its uninterrupted twin
takes (before, the replays lived in the workers and a loaded or interrupted run refilled them from scratch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from interrupts import ctrl_c_then_like_its_twin  # a Ctrl-C at a chosen line

import pbmarl as pb
from pbmarl.distributed.server import get_vector

SMALL = {"seed": 0, "workers": 2, "backend": "local", "budget": 4_000, "steps_per_round": 64, "num_envs": 2,
         "hidden": (16,), "learning_starts": 64, "updates_per_round": 4, "batch_size": 16, "target_update_interval": 3}


def _build(sync: str, **kw: Any) -> Any:
    return pb.DQN("gym:CartPole-v1", sync=sync, **{**SMALL, **kw})


def _row(run: Any) -> pd.DataFrame:
    h = run.history
    return h[[c for c in h.columns if not str(c).startswith(("wall_time", "time/"))]].reset_index(drop=True)


def _assert_same(a: Any, b: Any) -> None:
    pd.testing.assert_frame_equal(_row(a), _row(b), check_dtype=False)
    for net in ("q_net", "target_net"):
        np.testing.assert_array_equal(get_vector(list(getattr(a, net).parameters())),
                                      get_vector(list(getattr(b, net).parameters())))
    sa, sb = a.replay.state_arrays(), b.replay.state_arrays()
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)


CASES = [("bsp", {}), ("asp", {}), ("asp", {"prioritized": True})]


@pytest.mark.parametrize(("sync", "kw"), CASES, ids=["bsp", "asp", "asp-prioritized"])
def test_a_saved_and_loaded_gorila_run_takes_its_twins_next_steps(tmp_path: Path, sync: str, kw: dict) -> None:
    with _build(sync, **kw) as twin, _build(sync, **kw) as run:
        twin.run(5, progress=False)
        run.run(3, progress=False)
        assert run.history["updates"].iloc[-1] > 0 and len(run.replay) > 0  # learning, from the learner's replay
        run.save(tmp_path / "run")
    loaded = pb.load_run(tmp_path / "run")
    try:
        loaded.run(2, progress=False)
        with _build(sync, **kw) as again:  # the twin, for the arrays: `twin` was closed with its rows kept
            again.run(5, progress=False)
            _assert_same(loaded, again)
        pd.testing.assert_frame_equal(_row(loaded), _row(twin), check_dtype=False)
        assert loaded.history["buffer"].iloc[-1] == loaded.history["learner_steps"].iloc[-1]  # every batch kept
    finally:
        loaded.close()


@pytest.mark.parametrize("sync", ["bsp", "asp"])
def test_a_ctrl_c_inside_a_gorila_step_leaves_the_run_unchanged_and_it_continues_like_its_twin(sync: str) -> None:
    ctrl_c_then_like_its_twin(lambda: _build(sync), _row, _assert_same)
