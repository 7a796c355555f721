"""Where gradient workers run: `LocalExecutor` (in-process, simulated arrival order) or
`pbmarl.hosting.executors.RayExecutor` (Ray actors).

Both answer the `Executor` seam: ``submit(w, weights, version, seeds, *extra)`` hands worker
`w` a job (``compute(weights, version, seeds, *extra)``; on Ray, object references among the
arguments reach the worker resolved), ``next()`` returns ``(w, result)`` of the job that finishes first. The local
executor computes a job when it is submitted (so it sees exactly the weights it was
given) and releases results in the order of a simulated clock in which worker ``w``
takes ``1 + skew * w`` time units a job: slower workers come back later, which is what
makes staleness under ASP and BAP measurable and reproducible. The Ray executor runs
jobs on actors and replaces a dead actor, re-running its lost job (nothing is counted
twice: a job's data is counted only when its result arrives).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from pbmarl.distributed.workers import GradientWorker
from pbmarl.hosting.executors import RayExecutor

__all__ = ["Executor", "LocalExecutor", "Restartable", "make_executor"]

#: builds worker `w` (locally: the object; on Ray: the arguments of the actor)
WorkerArgs = Callable[[int], tuple[Any, ...]]


class Executor(Protocol):
    """The seam between the mode logic and where workers run."""

    num_workers: int

    def submit(self, w: int, weights: np.ndarray, version: int, seeds: Sequence[int], *extra: Any) -> None:
        """Start worker `w` on a job: `weights` (at `version`), one collection per seed, the learner's `extra`."""

    def next(self) -> tuple[int, Any]:
        """``(worker, result)`` of the first job to finish (a `GradientResult` for gradient workers)."""

    def ready(self) -> None:
        """Return once every worker is up (so its start-up is not paid inside the first job)."""

    def close(self) -> None:
        """Stop the workers."""


class LocalExecutor:
    """Workers as in-process objects; results in the order of a simulated clock (see the module doc)."""

    def __init__(self, args: WorkerArgs, num_workers: int, *, skew: float = 1.0,
                 worker_class: type = GradientWorker) -> None:
        self.num_workers = num_workers
        self.workers = [worker_class(*args(w)) for w in range(num_workers)]
        self.skew = float(skew)
        self.clock = 0.0
        self._queue: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    def submit(self, w: int, weights: np.ndarray, version: int, seeds: Sequence[int], *extra: Any) -> None:
        result = self.workers[w].compute(weights, version, seeds, *extra)
        self._seq += 1
        heapq.heappush(self._queue, (self.clock + 1.0 + self.skew * w, self._seq, w, result))

    def next(self) -> tuple[int, Any]:
        if not self._queue:
            raise RuntimeError("no job in flight: submit one first")
        self.clock, _, w, result = heapq.heappop(self._queue)
        return w, result

    def ready(self) -> None:
        """In-process workers are up once built."""

    def call(self, w: int, method: str, *args: Any) -> Any:
        """Run worker `w`'s `method` now, outside any job, and return what it returns."""
        return getattr(self.workers[w], method)(*args)

    def close(self) -> None:
        self._queue.clear()


class Restartable:
    """An executor built on first use and dropped by `close` (a user's Ctrl-C stops the actors).

    The learners wrap theirs in this: after an interrupt, `close` kills the workers and
    forgets the jobs in flight (their data was never counted), and the next `submit`
    starts fresh workers, so the learner can simply be stepped again.
    """

    def __init__(self, build: Callable[[], Executor], num_workers: int) -> None:
        self.build = build
        self.num_workers = num_workers
        self.inner: Executor | None = None

    def _get(self) -> Executor:
        if self.inner is None:
            self.inner = self.build()
        return self.inner

    def submit(self, w: int, weights: np.ndarray, version: int, seeds: Sequence[int], *extra: Any) -> None:
        self._get().submit(w, weights, version, seeds, *extra)

    def next(self) -> tuple[int, Any]:
        return self._get().next()

    def ready(self) -> None:
        """Build the workers if they are not yet, and wait until they are up."""
        self._get().ready()

    def call(self, w: int, method: str, *args: Any) -> Any:
        """Run worker `w`'s `method` now (building the workers first if need be)."""
        inner = self._get()
        if not isinstance(inner, (LocalExecutor, RayExecutor)):
            raise TypeError(f"call() needs local or Ray workers, got {type(inner).__name__}")
        return inner.call(w, method, *args)

    @property
    def replacements(self) -> int:
        return int(getattr(self.inner, "replacements", 0))

    def node_ids(self) -> list[str]:
        inner = self._get()
        if not isinstance(inner, RayExecutor):
            raise RuntimeError("node ids exist only for Ray workers (backend='ray')")
        return inner.node_ids()

    def close(self) -> None:
        if self.inner is not None:
            inner, self.inner = self.inner, None
            inner.close()


def make_executor(backend: str, args: WorkerArgs, num_workers: int, worker_class: type = GradientWorker) -> Restartable:
    """A `Restartable` over Ray actors (``backend="ray"``) or in-process workers (``"local"``)."""
    if backend == "ray":
        return Restartable(lambda: RayExecutor(args, num_workers, worker_class=worker_class), num_workers)
    return Restartable(lambda: LocalExecutor(args, num_workers, worker_class=worker_class), num_workers)
