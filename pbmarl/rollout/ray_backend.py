"""The Ray backend of `RolloutPool`: `num_workers` actors, each a `RolloutWorker`.

Units are handed out a few at a time per actor; a policy travels to an actor with the first
unit that needs its current version. When an actor dies mid-call (Ray's `RayActorError`) it is
replaced and only the units it held are run again, so every unit's result arrives exactly once.
Ray itself is reached through `pbmarl.hosting` (start, errors, liveness); this module imports
no Ray.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from pbmarl.games.base import Game
from pbmarl.hosting import ray as hosting
from pbmarl.hosting.liveness import CHECK_EVERY_S, head_lost, lost_error
from pbmarl.policies.base import Policy
from pbmarl.rollout.units import UnitResult, WorkUnit
from pbmarl.rollout.worker import RolloutWorker, game_for_worker, ship


class _RayWorker(RolloutWorker):
    """A RolloutWorker that can say where it runs."""

    def node_id(self) -> str:
        return hosting.node_id()


class RayBackend:
    """Runs units on Ray actors; see the module doc."""

    name = "ray"

    def __init__(self, game: Game, *, num_workers: int, envs_per_worker: int, engine: str,
                 worker_cpus: float = 1.0, inflight: int = 2, max_replacements: int | None = None) -> None:
        self.ray = hosting.import_ray()
        if not self.ray.is_initialized():
            hosting.init_ray()
        self.num_workers = num_workers
        free = hosting.free_cpus(self.ray, num_workers * worker_cpus, grace_s=2.0)
        if num_workers * worker_cpus > free + 1e-9:
            total = float(self.ray.cluster_resources().get("CPU", 0.0))
            raise ValueError(
                f"{num_workers} workers with worker_cpus={worker_cpus} need {num_workers * worker_cpus:g} CPUs, "
                f"but Ray has {free:g} of {total:g} free (other pools or tasks hold the rest); close() other pools, "
                "or ask for fewer workers or a smaller worker_cpus"
            )
        self._spec = game_for_worker(game)
        self._actor_class = self.ray.remote(_RayWorker).options(num_cpus=worker_cpus, max_restarts=0, max_task_retries=0)
        self._args = {"envs": envs_per_worker, "engine": engine}
        self.inflight = max(1, int(inflight))
        self.max_replacements = max_replacements if max_replacements is not None else 2 * num_workers + 2
        self.actors: list[Any] = [self._new_actor() for _ in range(num_workers)]
        self._sent: list[dict[str, int]] = [{} for _ in range(num_workers)]
        self.replacements = 0

    def _new_actor(self) -> Any:
        return self._actor_class.remote(self._spec, **self._args)

    def node_ids(self) -> list[str]:
        """The Ray node id of every worker actor."""
        return list(self.ray.get([a.node_id.remote() for a in self.actors]))

    def _shipments(self, w: int, unit: WorkUnit, policies: dict[str, Policy]) -> list[Any]:
        return ship(self._sent[w], unit.tokens, policies)

    def run(self, units: Sequence[WorkUnit], policies: dict[str, Policy], on_result: Callable[[UnitResult], None]) -> None:
        """Play every unit on the actors; `on_result` gets each unit's result exactly once."""
        ray = self.ray
        RayActorError, RayTaskError = hosting.actor_errors()  # noqa: N806 - Ray's class names

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
                        ref = self.actors[w].run.remote(unit, self._shipments(w, unit, policies))
                        running[ref] = (w, unit)
                        load[w] += 1
                ready, _ = ray.wait(list(running), num_returns=1, timeout=CHECK_EVERY_S)
                if not ready or time.monotonic() > checked + CHECK_EVERY_S:  # actors can outlive their head a while
                    self._check_head()
                    checked = time.monotonic()
                for ref in ready:
                    w, unit = running.pop(ref)
                    load[w] -= 1
                    try:
                        result = ray.get(ref)
                    except RayActorError as exc:
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
                    except RayTaskError as exc:
                        raise exc.as_instanceof_cause() from None
                    on_result(result)
        except BaseException as exc:
            if not self.ray.is_initialized():  # disconnected from a lost head: ray.cancel would start a new Ray
                raise
            # decided before ray.cancel: after a lost raylet, a call that reaches the object store ends this process
            self._check_head(exc)
            for ref in running:
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - best effort: the call is failing anyway
                    pass
            raise

    def _check_head(self, cause: BaseException | None = None) -> None:
        """Raise `RayHeadLost` (after disconnecting, see `pbmarl.hosting.liveness`) when the Ray head is gone.

        `cause` is an exception a Ray call raised: a raylet killed mid-wait surfaces as an OSError
        (broken pipe) from ``ray.wait``, sometimes before its process handle reads as exited, and
        counts as a lost head by itself.
        """
        what = head_lost(self.ray)
        if what is None and isinstance(cause, OSError):
            what = f"the connection to the local raylet failed ({type(cause).__name__}: {cause})"
        if what is not None:
            self.actors, self._sent = [], []
            error = lost_error(self.ray, what)
            error.__cause__ = cause  # None where the check itself found the head gone
            raise error

    def _replace(self, w: int) -> None:
        try:
            self.ray.kill(self.actors[w], no_restart=True)
        except Exception:  # noqa: BLE001 - it is already gone
            pass
        self.actors[w] = self._new_actor()
        self._sent[w] = {}
        self.replacements += 1

    def prune(self, live: set[str]) -> None:
        """Let the actors drop policies whose tokens are no longer alive on this side."""
        for actor, sent in zip(self.actors, self._sent):
            dead = [t for t in sent if t not in live]
            if dead:
                actor.forget.remote(dead)  # ordered before this actor's next unit
                for token in dead:
                    del sent[token]

    def close(self) -> None:
        """Kill the actors and wait (briefly) until they are gone, so their CPUs are free again."""
        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self.actors:
            self.ray.wait([a.ping.remote() for a in self.actors], num_returns=len(self.actors), timeout=10)
        self.actors = []
