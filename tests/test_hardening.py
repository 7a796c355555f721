"""Issue 10, hardening: all-or-nothing steps, untrusted run folders, bad input, the CLI's rough edges.

One test (or one group) per numbered item of the issue; each can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb


def _state(run):
    return (run.population.sizes, run.table.values.copy(), len(run.records), run.rng.bit_generator.state,
            run._wall, run._env_steps, [list(d) for d in run.meta_strategy])


def _same(a, b):
    assert a[0] == b[0] and a[2:4] == b[2:4] and a[4:6] == b[4:6] and a[6] == b[6]
    np.testing.assert_array_equal(a[1], b[1])


# -- item 1: steps are all-or-nothing --------------------------------------------------------------
class _Boom(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("phase", ["oracle", "evaluate", "solve", "measure", "save"])
def test_item1_interrupted_step_leaves_run_as_before(phase, tmp_path, monkeypatch):
    run = pb.PSRO("kuhn_poker", solver="nash", save_dir=tmp_path / "run")
    run.step()
    before = _state(run)

    def boom(*args, **kwargs):
        raise _Boom(phase)

    target = {"oracle": (run.learner, "respond"), "evaluate": (run.evaluator, "fill"),
              "solve": (run, "solver"), "measure": (run.evaluator, "exploitability"),
              "save": (run, "save")}[phase]
    monkeypatch.setattr(*target, boom)
    with pytest.raises(_Boom):
        run.step()
    _same(_state(run), before)
    monkeypatch.undo()
    # the next step works, the saved folder loads, and the run goes on as if never interrupted
    record = run.step()
    twin = pb.PSRO("kuhn_poker", solver="nash")
    twin.step()
    expected = twin.step()
    assert record.meta_strategy == expected.meta_strategy and record.exploitability == pytest.approx(expected.exploitability)
    loaded = pb.PSRO.load(tmp_path / "run")
    assert loaded.iteration == 2 and loaded.population.sizes == (3, 3)


# -- items 2, 4, 5, 14, 16: run folders and the command line --------------------------------------
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from pbmarl.cli import main as cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_item2_unwritable_run_folder_is_found_before_the_work(tmp_path, monkeypatch):
    run = pb.PSRO("kuhn_poker", save_dir=tmp_path / "run")
    calls = []
    monkeypatch.setattr(run.learner, "respond", lambda *a, **k: calls.append(1))

    def refuse(path, *, what="folder"):
        raise OSError(f"cannot write the {what} {str(path)!r}: Read-only file system")

    monkeypatch.setattr("pbmarl.io.ensure_writable_folder", refuse)
    with pytest.raises(OSError, match="Read-only"):
        run.step()
    assert calls == [] and len(run.records) == 1  # no oracle call, no record appended
    # the command line checks before loading or computing anything
    monkeypatch.undo()
    out = tmp_path / "cli"
    assert cli(["psro", "--game", "kuhn_poker", "--iterations", "1", "--out", str(out), "--quiet"]) == 0
    monkeypatch.setattr("pbmarl.io.ensure_writable_folder", refuse)
    monkeypatch.setattr("pbmarl.algorithms.psro.PSRO.load", lambda *a, **k: pytest.fail("loaded before the check"))
    assert cli(["resume", str(out), "--iterations", "1", "--quiet"]) == 2


def test_item4_stray_tmp_files_are_removed_at_save_and_resume(tmp_path):
    out = tmp_path / "run"
    run = pb.PSRO("kuhn_poker", save_dir=out)
    strays = [out / ".run.json.abc.tmp", out / "population" / ".population.json.x.tmp",
              out / "population" / "policies" / ".p0_0.npz.y.tmp"]
    for path in strays:
        path.write_text("partial")
    run.step()
    assert not any(p.exists() for p in strays)
    strays[0].write_text("partial")
    pb.PSRO.load(out)
    assert not strays[0].exists()


def test_item5_and_14_resume_says_what_to_do(tmp_path, capsys):
    out = tmp_path / "never"
    out.mkdir()
    (out / "started.json").write_text(json.dumps({"argv": ["pbmarl", "psro", "--game", "kuhn_poker",
                                                            "--out", str(out)]}))
    assert cli(["resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no iteration" in err and f"pbmarl psro --game kuhn_poker --out {out}" in err
    done = tmp_path / "done"
    assert cli(["psro", "--game", "kuhn_poker", "--iterations", "1", "--out", str(done), "--quiet"]) == 0
    capsys.readouterr()
    assert cli(["resume", str(done)]) == 0
    text = capsys.readouterr().out
    assert "complete" in text and "--iterations" in text and "0it" not in text


def test_item16_output_lines(tmp_path):
    out = tmp_path / "kuhn"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "pbmarl.cli", "psro", "--game", "kuhn_poker", "--iterations", "3",
                             "--out", str(out), "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("PSRO on kuhn_poker: solver nash, oracle exact, evaluator exact") and str(out) in lines[0]
    assert len(lines) == 2  # --quiet: the first line (with the run folder) and the final line
    assert "run.json, history.csv, population/, exploitability.png" in lines[1]
    assert "\r" not in result.stderr  # no progress bar redraws when stderr is not a terminal
    loud = subprocess.run([sys.executable, "-m", "pbmarl.cli", "resume", str(out), "--iterations", "3", "--stop", "0"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert "e-17" not in loud.stdout and "e-16" not in loud.stdout and "\r" not in loud.stderr
