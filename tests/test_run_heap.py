"""`Run.run` keeps the objects alive at its start out of the cyclic GC's full passes (pbmarl/runs/heap.py)."""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass

import pytest

from pbmarl.runs import Record, Run, shared_row
from pbmarl.runs.heap import frozen_heap


@dataclass(frozen=True)
class Tick(Record):
    iteration: int

    def as_row(self):
        return shared_row(iteration=self.iteration, env_steps=0, episodes=0, wall_time=0.0)


class Ticker(Run):
    """Records how many objects are frozen at each step; raises at step `fail_at`."""

    def __init__(self, fail_at: int | None = None, inner: Run | None = None):
        self.records, self.frozen, self.fail_at, self.inner = [], [], fail_at, inner

    def step(self):
        if self.inner is not None:
            self.inner.run(1, progress=False)
        self.frozen.append(gc.get_freeze_count())
        if len(self.records) + 1 == self.fail_at:
            raise RuntimeError("step failed")
        self.records.append(Tick(len(self.records) + 1))
        return self.records[-1]


@pytest.fixture(autouse=True)
def _unfrozen():
    assert gc.get_freeze_count() == 0, "a test before this one left objects frozen"
    yield
    gc.unfreeze()


def test_a_run_freezes_the_objects_alive_at_its_start_and_unfreezes_them_after():
    alive = len(gc.get_objects())
    run = Ticker()
    run.run(3, progress=False)
    assert len(run.frozen) == 3 and min(run.frozen) >= alive // 2  # everything tracked at the start, give or take
    assert gc.get_freeze_count() == 0


def test_a_failing_step_unfreezes_too():
    run = Ticker(fail_at=2)
    with pytest.raises(RuntimeError, match="step failed"):
        run.run(3, progress=False)
    assert run.frozen[0] > 0 and gc.get_freeze_count() == 0
    assert len(run.records) == 1


def test_a_run_inside_a_run_leaves_the_outer_freeze_in_place():
    inner, outer = Ticker(), None
    outer = Ticker(inner=inner)
    outer.run(2, progress=False)
    assert all(n > 0 for n in inner.frozen + outer.frozen)
    assert gc.get_freeze_count() == 0


def test_objects_someone_else_froze_stay_frozen(monkeypatch):
    gc.freeze()
    before = gc.get_freeze_count()
    calls = []

    def counting(name):
        original = getattr(gc, name)

        def call():
            calls.append(name)
            return original()

        return call

    for name in ("freeze", "unfreeze"):
        monkeypatch.setattr(gc, name, counting(name))
    run = Ticker()
    run.run(2, progress=False)
    assert calls == []  # not frozen again (nothing new moved in) and not unfrozen
    # frozen objects that reference counting frees meanwhile (another thread's, pytest-xdist's) leave the count
    assert all(before - 1000 < n <= before for n in [*run.frozen, gc.get_freeze_count()])


def test_runs_in_two_threads_share_one_freeze_that_ends_with_the_last():
    first_in, release = threading.Event(), threading.Event()

    class Waiting(Ticker):
        def step(self):
            first_in.set()
            release.wait(10)
            return super().step()

    slow = Waiting()
    thread = threading.Thread(target=slow.run, args=(1,), kwargs={"progress": False})
    thread.start()
    assert first_in.wait(10)
    Ticker().run(1, progress=False)  # starts and ends while the other run is inside its step
    assert gc.get_freeze_count() > 0  # the other run still holds the freeze
    release.set()
    thread.join(10)
    assert slow.frozen[0] > 0 and gc.get_freeze_count() == 0


def test_garbage_made_during_a_run_is_still_collected():
    class Cycle:
        pass

    with frozen_heap():
        a = Cycle()
        a.me = a
        del a
        assert gc.collect() >= 1
