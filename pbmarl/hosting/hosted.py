"""One object, hosted in this process (``backend="local"``) or in a Ray actor (``"ray"``), called the same way.

Every actor pbmarl makes is a `Hosted`: the distributed parameter server and Ape-X's replay,
the distributed executors' gradient workers (`pbmarl.hosting.executors`), the rollout pool's
workers (`pbmarl.rollout.ray_backend`), P2SRO's ladder and level learners and
`ParallelOracle`'s copies (`pbmarl.algorithms.psro`). The code that uses one talks to it
through the handle, so the local backend runs exactly the code that the Ray actor runs.

`send` starts a call and returns its *future*: on Ray an ``ObjectRef`` (which can be handed on
to other actors without travelling through this process), locally the value itself. `call`
waits for the value. Calls from one handle run in the order they were sent (Ray keeps a
single caller's order per actor), so a `send` that nobody waits for is still applied before a
later `call` sees the object; `call` and `get` also collect the results of the sends before
theirs, so an error in one surfaces there instead of being lost (and a caller that only ever
sends and gets keeps no futures piling up). An actor that dies surfaces as `HostDied`; an
error raised inside a call surfaces as itself. With `placement_timeout_s` the handle waits
until Ray has placed the actor and says why it could not (how many CPUs are free, and `fix`),
instead of waiting for ever. Arguments reach a Ray actor deserialised from the object store,
where numpy arrays are read-only: a hosted class copies whatever it will write into.

A few functions work over many handles' futures at once: `first_done` (which finished first),
`close_all`, `head_error` (the Ray head is gone: `pbmarl.hosting.liveness`) and
`connected`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

import pbmarl.hosting.ray as hosting_ray
from pbmarl.hosting.liveness import head_lost, lost_error

__all__ = ["Hosted", "HostDied", "check_actor_cpus", "close_all", "connected", "first_done", "head_error"]

#: seconds to wait by default for an actor to be placed before saying why it is not
PLACEMENT_TIMEOUT_S = 60


class HostDied(RuntimeError):
    """The actor behind a `Hosted` handle is gone (its node died or it was killed)."""


class Hosted:
    """``cls(*args, **kwargs)`` in this process or as a Ray actor.

    Args:
        cls: the class to host.
        args: its constructor's arguments (copied locally: the object never shares state with the caller).
        backend: "local" or "ray".
        num_cpus: CPUs the Ray actor reserves. The server and the replay mostly wait for calls,
            so they reserve none by default and never keep a worker from being scheduled.
        name: how errors name the object ("parameter server", "replay").
        kwargs: the constructor's keyword arguments.
        placement_timeout_s: wait this long for Ray to place the actor (None: do not wait); past it the
            actor is killed and a RuntimeError says how many CPUs are free, and `fix`.
        fix: what to do when no CPU hosts the actor (the end of that message).
        spread: ask Ray to spread such actors over the cluster's nodes.
        max_concurrency: the calls the actor may run at once (Ray's default: 1 for a plain class).
        quiet: start Ray (when it is not running yet) with one line of output instead of Ray's log.
    """

    def __init__(self, cls: type, args: tuple[Any, ...] = (), *, backend: str, num_cpus: float = 0.0,
                 name: str = "", kwargs: dict[str, Any] | None = None, placement_timeout_s: float | None = None,
                 fix: str = "", spread: bool = False, max_concurrency: int | None = None,
                 quiet: bool = False) -> None:
        self.name = name or cls.__name__
        self.backend = backend
        self.num_cpus = float(num_cpus)
        self.obj: Any = None
        self.actor: Any = None
        self._unread: list[Any] = []  # futures of sends whose results nobody fetched yet
        kwargs = dict(kwargs or {})
        if backend == "ray":
            self.ray: Any = _ray(quiet)
            options: dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": 0, "max_task_retries": 0}
            if spread:
                options["scheduling_strategy"] = "SPREAD"
            if max_concurrency is not None:
                options["max_concurrency"] = max_concurrency
            self.actor = self.ray.remote(cls).options(**options).remote(*args, **kwargs)
            if placement_timeout_s is not None:
                self._await_placement(placement_timeout_s, fix)
        elif backend == "local":
            self.obj = cls(*copy.deepcopy(args), **copy.deepcopy(kwargs))
        else:
            raise ValueError(f"backend must be one of ('local', 'ray'), got {backend!r}")

    def _await_placement(self, timeout_s: float, fix: str) -> None:
        try:
            self.get(self.actor.__ray_ready__.remote(), timeout_s=timeout_s)
        except self.ray.exceptions.GetTimeoutError:
            self.close()
            free = self.ray.available_resources().get("CPU", 0.0)
            raise RuntimeError(f"{self.name} ({self.num_cpus:g} CPU) was not scheduled within {timeout_s:g} s: the "
                               f"Ray cluster has {free:g} CPU(s) free. {fix}".rstrip()) from None

    def send(self, method: str, *args: Any) -> Any:
        """Start ``obj.method(*args)``; its future (a Ray ``ObjectRef``, or locally the value)."""
        if self.obj is not None:
            return getattr(self.obj, method)(*args)
        if self.actor is None:
            raise RuntimeError(f"the {self.name} was closed")
        future = getattr(self.actor, method).remote(*args)
        self._unread.append(future)
        return future

    def get(self, future: Any, *, timeout_s: float | None = None) -> Any:
        """The value of a future returned by `send`, after every send before it (whose errors it raises).

        Raises:
            HostDied: the actor is gone.
        """
        if self.obj is not None or self.actor is None:
            return future
        RayActorError, RayTaskError = hosting_ray.actor_errors()  # noqa: N806 - Ray's class names

        position = next((i for i, f in enumerate(self._unread) if f is future), None)
        refs = [future] if position is None else self._unread[:position + 1]
        if position is not None:
            del self._unread[:position + 1]
        try:
            values = self.ray.get(refs) if timeout_s is None else self.ray.get(refs, timeout=timeout_s)
            return values[-1]
        except RayActorError as exc:
            raise HostDied(f"the {self.name} actor died: {exc}") from None
        except RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    def call(self, method: str, *args: Any) -> Any:
        """``obj.method(*args)``, waited for (after every earlier send, whose errors it raises)."""
        return self.get(self.send(method, *args))

    def ready(self) -> None:
        """Wait until the hosted object is built (on Ray: its actor has started)."""
        if self.actor is not None:
            self.get(self.actor.__ray_ready__.remote())

    def put(self, value: Any) -> Any:
        """`value` as a future (on Ray stored once, so many actors can read it without copies from here)."""
        return value if self.obj is not None else self.ray.put(value)

    def cancel(self, future: Any) -> None:
        """Ask Ray to cancel the call behind `future` (best effort: it may have finished or failed); a later
        `get` no longer collects it."""
        if self.actor is None:
            return
        self._unread = [f for f in self._unread if f is not future]
        try:
            self.ray.cancel(future)
        except Exception:  # noqa: BLE001 - best effort
            pass

    def kill(self) -> None:
        """End the actor without waiting (a no-op for a local object or one already gone)."""
        if self.actor is not None:
            try:
                self.ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def close(self) -> None:
        """Stop the actor (local objects are simply dropped)."""
        self.kill()
        self.actor = None
        self.obj = None
        self._unread = []


def _ray(quiet: bool = False) -> Any:
    """The ray module, started (`init_ray`) if it is not running yet."""
    ray = hosting_ray.import_ray()
    if not ray.is_initialized():
        hosting_ray.init_ray(quiet=quiet)
    return ray


def first_done(futures: Sequence[Any], timeout_s: float | None = None) -> list[Any]:
    """The futures among `futures` (Ray's, from `Hosted.send`) that have finished: the first one, or none
    if nothing finished within `timeout_s`."""
    ray = hosting_ray.import_ray()
    if timeout_s is None:
        ready, _ = ray.wait(list(futures), num_returns=1)
    else:
        ready, _ = ray.wait(list(futures), num_returns=1, timeout=timeout_s)
    return list(ready)


def close_all(hosts: Sequence[Hosted], *, wait_s: float = 0.0) -> None:
    """Close every handle; with `wait_s`, wait (up to that long) until their actors are gone, so their CPUs
    are free again."""
    actors = [h.actor for h in hosts if h.actor is not None]
    for host in hosts:
        host.kill()
    if actors and wait_s > 0:
        ray = hosts[0].ray
        ray.wait([a.__ray_ready__.remote() for a in actors], num_returns=len(actors), timeout=wait_s)
    for host in hosts:
        host.close()


def connected() -> bool:
    """Whether this process is connected to Ray (False after a lost head disconnected it)."""
    return bool(hosting_ray.import_ray().is_initialized())


def head_error(cause: BaseException | None = None) -> BaseException | None:
    """`RayHeadLost` (this process disconnected, see `pbmarl.hosting.liveness`) when the Ray head is gone, else
    None. `cause` is an exception a Ray call raised: a raylet killed mid-wait surfaces as an OSError (broken
    pipe), sometimes before its process handle reads as exited, and counts as a lost head by itself."""
    ray = hosting_ray.import_ray()
    what = head_lost(ray)
    if what is None and isinstance(cause, OSError):
        what = f"the connection to the local raylet failed ({type(cause).__name__}: {cause})"
    if what is None:
        return None
    error = lost_error(ray, what)
    error.__cause__ = cause  # None where the check itself found the head gone
    return error


def check_actor_cpus(value: Any, name: str, per: str) -> float:
    """`value` as a float number of CPUs for each actor, or raise naming it: positive and finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of CPUs per {per} actor, got {value!r}")
    return float(value)
