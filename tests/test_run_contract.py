"""The run contract (DESIGN.md, "One vocabulary"), checked on every run type on tiny budgets.

Every run builds from a game name and from a `Game`; steps, runs n steps, runs until a `pb.Stop`;
shows the shared history columns; evaluates into a `pb.EvalResult`; saves and loads with
`pb.load_run` and then continues exactly as the run that was not saved; refuses a misspelt option
with a did-you-mean; is unchanged by a Ctrl-C anywhere inside `step`; and closes.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pbmarl as pb

SHARED = ["env_steps", "episodes", "wall_time"]
#: columns that measure time, which two equal runs never share
TIMING = ("wall_time", "time/")


from interrupts import interrupt_at, lines_in_step  # noqa: E402 - a Ctrl-C at a chosen line
from run_cases import CASES, Case  # noqa: E402 - every family's cases, one module each (tests/run_cases_*.py)


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


def fingerprint(run: Any) -> pd.DataFrame:
    """The history without the columns that measure time."""
    h = run.history
    return h[[c for c in h.columns if not str(c).startswith(TIMING)]]


def assert_same_history(a: Any, b: Any) -> None:
    pd.testing.assert_frame_equal(fingerprint(a), fingerprint(b), check_dtype=False)


def test_builds_from_a_name_and_from_a_game(case: Case) -> None:
    by_name = case.build(case.game)
    by_game = case.build(pb.load_game(case.game))
    try:
        assert by_name.game.name == by_game.game.name
        assert by_name.seed == 0 and by_game.seed == 0
        config = by_name.config.to_dict()
        assert isinstance(config, dict) and config == by_game.config.to_dict()
        with pytest.raises(Exception):  # noqa: B017 - frozen: a config is never changed in place
            by_name.config.__setattr__(next(iter(config)), None)
    finally:
        by_name.close()
        by_game.close()


def test_step_run_n_and_run_until(case: Case) -> None:
    with case.build(case.game) as run:
        record = run.step()
        assert record.iteration == run.iteration == 1
        assert isinstance(record.env_steps, (int, np.integer)) and isinstance(record.wall_time, float)
        records = run.run(2, progress=False)
        assert len(records) == 2 and run.iteration == 3
        assert [r.iteration for r in records] == [2, 3]
        records = run.run(until=pb.Stop(iterations=5), progress=False)
        assert run.iteration == 5 and len(records) == 2 and records.stopped_by == "iterations 5"
        assert len(run.run(0)) == 0


def test_history_starts_with_the_shared_columns(case: Case) -> None:
    with case.build(case.game) as run:
        records = run.run(2, progress=False)
        h = run.history
        assert h.index.name == "iteration" and list(h.index)[-2:] == [1, 2] and list(h.index)[0] in (0, 1)
        assert list(h.columns[:3]) == SHARED
        assert (h["env_steps"].diff().dropna() >= 0).all() and (h["episodes"].diff().dropna() >= 0).all()
        last = records[-1]
        for column in h.columns:
            value = last[column]
            expected = h[column].iloc[-1]
            if isinstance(value, float) and math.isnan(value):
                assert expected is None or (isinstance(expected, float) and math.isnan(expected))
            elif not isinstance(value, (list, tuple, dict)):
                assert value == expected or str(value) == str(expected), column
        assert last.env_steps == h["env_steps"].iloc[-1] and last.episodes == h["episodes"].iloc[-1]


def test_evaluate_returns_an_eval_result(case: Case) -> None:
    with case.build(case.game) as run:
        run.step()
        before = fingerprint(run)
        res = run.evaluate(episodes=6, seed=0)
        assert isinstance(res, pb.EvalResult)
        assert res.episodes >= 6 and isinstance(res.mean, pd.Series) and list(res.stderr.index) == list(res.mean.index)
        assert np.isfinite(res.mean.to_numpy()).all()
        assert res.to_frame().shape[0] == len(res.mean)
        again = run.evaluate(episodes=6, seed=0)
        np.testing.assert_allclose(again.mean.to_numpy(), res.mean.to_numpy())
        pd.testing.assert_frame_equal(fingerprint(run), before)  # evaluating changes nothing


def test_save_then_load_run_continues_identically(case: Case, tmp_path: Path) -> None:
    with case.build(case.game) as a, case.build(case.game) as twin:
        a.run(2, progress=False)
        twin.run(2, progress=False)
        a.save(tmp_path / "run")
        with pb.load_run(tmp_path / "run") as b:
            assert type(b) is type(a) and b.seed == a.seed and b.config == a.config
            assert_same_history(b, a)
            a.step(), b.step(), twin.step()
            assert_same_history(b, twin)
            assert_same_history(a, twin)
        with type(a).load(tmp_path / "run") as c:
            assert c.iteration == 2


def test_a_misspelt_option_is_refused_with_a_did_you_mean(case: Case) -> None:
    with pytest.raises(TypeError) as info:
        case.build(case.game, **{case.typo: 1})
    message = str(info.value)
    assert repr(case.typo) in message and "did you mean" in message


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_ctrl_c_inside_step_leaves_the_run_unchanged(case: Case, where: float) -> None:
    with case.build(case.game) as a, case.build(case.game) as twin:
        a.step(), twin.step()
        probe = case.build(case.game)
        probe.step()
        total = lines_in_step(probe)
        probe.close()
        before = fingerprint(a)
        sys.settrace(interrupt_at(max(1, int(total * where))))
        try:
            with pytest.raises(KeyboardInterrupt):
                a.step()
        finally:
            sys.settrace(None)
        pd.testing.assert_frame_equal(fingerprint(a), before)
        a.step(), twin.step()
        assert_same_history(a, twin)


def test_close_is_idempotent_and_the_context_manager_closes(case: Case) -> None:
    run = case.build(case.game)
    with run as entered:
        assert entered is run
    run.close()
