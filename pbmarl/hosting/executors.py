"""`RayExecutor`: the distributed modes' workers as Ray actors (`Hosted` handles), spread over the cluster's nodes.

It answers the `Executor` seam of `pbmarl.distributed.executors` (which also holds the in-process
`LocalExecutor`): ``submit(w, weights, version, seeds, *extra)`` hands worker `w` a job
(``compute(weights, version, seeds, *extra)``; object references among the arguments reach the
worker resolved), ``next()`` returns ``(w, result)`` of the job that finishes first. A dead actor is
replaced and its lost job re-run (nothing is counted twice: a job's data is counted only when its
result arrives).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pbmarl.hosting.hosted import HostDied, Hosted, first_done

__all__ = ["RayExecutor"]


class RayExecutor:
    """Workers as Ray actors (spread over the cluster's nodes); a dead actor is replaced and its job re-run.

    Args:
        args: builds worker `w`'s constructor arguments.
        num_workers: how many workers.
        worker_class: the class each actor runs (it answers ``compute``, ``ping`` and ``node_id``).
        worker_cpus: CPUs each actor reserves.
        max_replacements: how many dead actors to replace before giving up (default ``2 * num_workers + 2``).
    """

    def __init__(self, args: Callable[[int], tuple[Any, ...]], num_workers: int, *, worker_class: type,
                 worker_cpus: float = 1.0, max_replacements: int | None = None) -> None:
        self.num_workers = num_workers
        self._args = args
        self._class = worker_class
        self._cpus = worker_cpus
        self.actors = [self._new_actor(w) for w in range(num_workers)]
        self._running: dict[Any, tuple[int, np.ndarray, int, tuple[int, ...], tuple[Any, ...]]] = {}
        self.replacements = 0
        self.max_replacements = 2 * num_workers + 2 if max_replacements is None else max_replacements

    def _new_actor(self, w: int) -> Hosted:
        return Hosted(self._class, self._args(w), backend="ray", num_cpus=self._cpus, spread=True,
                      name=f"worker {w}")

    def submit(self, w: int, weights: np.ndarray, version: int, seeds: Sequence[int], *extra: Any) -> None:
        job = (w, weights, int(version), tuple(int(s) for s in seeds), extra)
        self._running[self.actors[w].send("compute", weights, version, job[3], *extra)] = job

    def next(self) -> tuple[int, Any]:
        while True:
            if not self._running:
                raise RuntimeError("no job in flight: submit one first")
            (ref,) = first_done(list(self._running))
            w, weights, version, seeds, extra = self._running.pop(ref)
            try:
                return w, self.actors[w].get(ref)
            except HostDied as exc:
                self.replacements += 1
                if self.replacements > self.max_replacements:
                    raise RuntimeError(f"gradient workers died {self.replacements} times (last: {exc}); giving up") from None
                self.replace(w)
                self.submit(w, weights, version, seeds, *extra)

    def ready(self) -> None:
        """Wait until every actor has started (imported its modules and built its learner)."""
        futures = [a.send("ping") for a in self.actors]
        try:
            for actor, future in zip(self.actors, futures):
                actor.get(future)
        except HostDied as exc:
            raise RuntimeError(f"a worker failed to start: {exc}") from None

    def call(self, w: int, method: str, *args: Any) -> Any:
        """Run actor `w`'s `method` (after the jobs handed to it before) and wait for what it returns."""
        return self.actors[w].call(method, *args)

    def replace(self, w: int) -> None:
        """Kill (if still alive) and rebuild worker `w`."""
        self.actors[w].close()
        self.actors[w] = self._new_actor(w)

    def node_ids(self) -> list[str]:
        futures = [a.send("node_id") for a in self.actors]
        return [str(a.get(f)) for a, f in zip(self.actors, futures)]

    def close(self) -> None:
        for ref, job in self._running.items():
            self.actors[job[0]].cancel(ref)
        self._running.clear()
        for actor in self.actors:
            actor.close()
        self.actors = []
