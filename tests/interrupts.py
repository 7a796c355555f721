"""A Ctrl-C at a chosen line inside pbmarl, for the tests that check a step is all-or-nothing.

`interrupt_at(n)` is a trace function (for `sys.settrace`) that raises KeyboardInterrupt at the `n`-th line of
pbmarl's own code, as a Ctrl-C would; `lines_in_step(run)` counts the lines one `run.step()` runs, so a test can
interrupt at a fraction of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

import pbmarl as pb

PBMARL = str(Path(pb.__file__).parent)


def interrupt_at(n: int) -> Callable[..., Any]:
    """A trace function that raises KeyboardInterrupt at the `n`-th line pbmarl runs (-1: never; it counts them
    in ``.seen[0]``)."""
    seen = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(PBMARL):
            return None
        if event == "line":
            seen[0] += 1
            if seen[0] == n:
                raise KeyboardInterrupt
        return trace

    trace.seen = seen  # type: ignore[attr-defined]
    return trace


def lines_in_step(run: Any) -> int:
    """How many lines of pbmarl one ``run.step()`` runs (the step is taken)."""
    counter = interrupt_at(-1)
    sys.settrace(counter)
    try:
        run.step()
    finally:
        sys.settrace(None)
    return int(counter.seen[0])  # type: ignore[attr-defined]


def interrupt_step(run: Any, line: int) -> None:
    """Take ``run.step()`` with a Ctrl-C at its `line`-th line of pbmarl; fails unless the KeyboardInterrupt
    reaches the caller."""
    sys.settrace(interrupt_at(max(1, line)))
    try:
        run.step()
    except KeyboardInterrupt:
        return
    finally:
        sys.settrace(None)
    raise AssertionError(f"the Ctrl-C at line {line} of the step did not reach the caller")


def ctrl_c_then_like_its_twin(build: Callable[[], Any], row: Callable[[Any], Any], assert_same: Callable[[Any, Any], None],
                              *, fractions: tuple[float, ...] = (0.2, 0.5, 0.8)) -> None:
    """For each fraction of the lines one step runs: a run built by `build()` (a context manager) takes 3 steps, then a
    Ctrl-C at that fraction of its 4th; its last history row (`row`) and replay size must be as before, and after 2
    more steps `assert_same` must hold against a twin that ran 5 steps uninterrupted."""
    with build() as probe:
        probe.run(3, progress=False)
        total = lines_in_step(probe)
    for where in fractions:
        with build() as run, build() as twin:
            run.run(3, progress=False), twin.run(3, progress=False)
            before, replay = row(run), len(run.replay)
            interrupt_step(run, int(total * where))
            pd.testing.assert_frame_equal(row(run), before)
            assert len(run.replay) == replay
            run.run(2, progress=False), twin.run(2, progress=False)
            assert_same(run, twin)
