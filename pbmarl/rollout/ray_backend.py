"""The Ray backend of `RolloutPool`: `num_workers` actors, each a `RolloutWorker`.

Units are handed out a few at a time per actor; a policy travels to an actor with the first
unit that needs its current version (`pbmarl.hosting.shipping`). When an actor dies mid-call
(`HostDied`) it is replaced and only the units it held are run again, so every unit's result
arrives exactly once. The actors are `pbmarl.hosting.Hosted` handles, and Ray itself (start,
errors, liveness) is reached through `pbmarl.hosting`; this module imports no Ray.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from pbmarl.games.base import Game
from pbmarl.hosting.hosted import HostDied, Hosted, close_all, connected, first_done, head_error
from pbmarl.hosting.liveness import CHECK_EVERY_S
from pbmarl.hosting.ray import free_cpus, node_id
from pbmarl.hosting.shipping import ship
from pbmarl.policies.base import Policy
from pbmarl.rollout.units import UnitResult, WorkUnit
from pbmarl.rollout.worker import RolloutWorker, game_for_worker


class _RayWorker(RolloutWorker):
    """A RolloutWorker that can say where it runs."""

    def node_id(self) -> str:
        return node_id()


class RayBackend:
    """Runs units on Ray actors; see the module doc."""

    name = "ray"

    def __init__(self, game: Game, *, num_workers: int, envs_per_worker: int, engine: str,
                 worker_cpus: float = 1.0, inflight: int = 2, max_replacements: int | None = None) -> None:
        self.num_workers = num_workers
        free, total = free_cpus(num_workers * worker_cpus, grace_s=2.0)
        if num_workers * worker_cpus > free + 1e-9:
            raise ValueError(
                f"{num_workers} workers with worker_cpus={worker_cpus} need {num_workers * worker_cpus:g} CPUs, "
                f"but Ray has {free:g} of {total:g} free (other pools or tasks hold the rest); close() other pools, "
                "or ask for fewer workers or a smaller worker_cpus"
            )
        self._spec = game_for_worker(game)
        self._cpus = worker_cpus
        self._args = {"envs": envs_per_worker, "engine": engine}
        self.inflight = max(1, int(inflight))
        self.max_replacements = max_replacements if max_replacements is not None else 2 * num_workers + 2
        self.actors: list[Hosted] = [self._new_actor() for _ in range(num_workers)]
        self._sent: list[dict[str, int]] = [{} for _ in range(num_workers)]
        self.replacements = 0

    def _new_actor(self) -> Hosted:
        return Hosted(_RayWorker, (self._spec,), kwargs=self._args, backend="ray", num_cpus=self._cpus,
                      name="rollout worker")

    def node_ids(self) -> list[str]:
        """The Ray node id of every worker actor."""
        futures = [a.send("node_id") for a in self.actors]
        return [a.get(f) for a, f in zip(self.actors, futures)]

    def _shipments(self, w: int, unit: WorkUnit, policies: dict[str, Policy]) -> list[Any]:
        return ship(self._sent[w], unit.tokens, policies)

    def run(self, units: Sequence[WorkUnit], policies: dict[str, Policy], on_result: Callable[[UnitResult], None]) -> None:
        """Play every unit on the actors; `on_result` gets each unit's result exactly once."""
        queue = deque(units)
        running: dict[Any, tuple[int, WorkUnit]] = {}
        load = [0] * len(self.actors)
        replaced_here = 0
        checked = time.monotonic()
        try:
            while queue or running:
                for w in range(len(self.actors)):
                    while queue and load[w] < self.inflight:
                        unit = queue.popleft()
                        ref = self.actors[w].send("run", unit, self._shipments(w, unit, policies))
                        running[ref] = (w, unit)
                        load[w] += 1
                ready = first_done(list(running), timeout_s=CHECK_EVERY_S)
                if not ready or time.monotonic() > checked + CHECK_EVERY_S:  # actors can outlive their head a while
                    self._check_head()
                    checked = time.monotonic()
                for ref in ready:
                    w, unit = running.pop(ref)
                    load[w] -= 1
                    try:
                        result = self.actors[w].get(ref)
                    except HostDied as exc:
                        self._check_head()  # workers also die with their raylet: then there is nothing to replace
                        replaced_here += 1
                        if replaced_here > self.max_replacements:
                            raise RuntimeError(
                                f"rollout workers died {replaced_here} times in one call (last: {exc}); giving up"
                            ) from None
                        lost = [unit] + [u for r, (v, u) in list(running.items()) if v == w]
                        for r in [r for r, (v, _) in running.items() if v == w]:
                            del running[r]
                        queue.extendleft(reversed(lost))
                        self._replace(w)
                        load[w] = 0
                        continue
                    on_result(result)
        except BaseException as exc:
            if not connected():  # disconnected from a lost head: ray.cancel would start a new Ray
                raise
            # decided before cancelling: after a lost raylet, a call that reaches the object store ends this process
            self._check_head(exc)
            for ref, (w, _) in running.items():
                self.actors[w].cancel(ref)
            raise

    def _check_head(self, cause: BaseException | None = None) -> None:
        """Raise `RayHeadLost` (after disconnecting, see `pbmarl.hosting.liveness`) when the Ray head is gone.

        `cause` is an exception a Ray call raised: a raylet killed mid-wait surfaces as an OSError
        (broken pipe) from the wait, sometimes before its process handle reads as exited, and
        counts as a lost head by itself.
        """
        error = head_error(cause)
        if error is not None:
            self.actors, self._sent = [], []
            raise error

    def _replace(self, w: int) -> None:
        self.actors[w].close()
        self.actors[w] = self._new_actor()
        self._sent[w] = {}
        self.replacements += 1

    def prune(self, live: set[str]) -> None:
        """Let the actors drop policies whose tokens are no longer alive on this side."""
        for actor, sent in zip(self.actors, self._sent):
            dead = [t for t in sent if t not in live]
            if dead:
                actor.send("forget", dead)  # ordered before this actor's next unit
                for token in dead:
                    del sent[token]

    def close(self) -> None:
        """Kill the actors and wait (briefly) until they are gone, so their CPUs are free again."""
        close_all(self.actors, wait_s=10)
        self.actors = []
