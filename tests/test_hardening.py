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
