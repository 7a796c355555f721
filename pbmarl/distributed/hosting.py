"""One object, hosted in this process (``backend="local"``) or in a Ray actor (``"ray"``), called the same way.

The parameter server and Ape-X's replay are such objects: the learner talks to them
through a `Hosted` handle, so the local backend runs exactly the code that the Ray
actor runs. `send` starts a call and returns its *future*: on Ray an ``ObjectRef``
(which can be handed on to other actors without travelling through this process), locally
the value itself. `call` waits for the value. Calls from one handle run in the order they
were sent (Ray keeps a single caller's order per actor), so a `send` that nobody waits for
is still applied before a later `call` sees the object; `call` and `get` also collect the
results of the sends before theirs, so an error in one surfaces there instead of being lost
(and a caller that only ever sends and gets keeps no futures piling up).
Arguments reach a Ray actor deserialised from the object store, where numpy arrays are
read-only: a hosted class copies whatever it will write into.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["Hosted", "HostDied"]


class HostDied(RuntimeError):
    """The actor behind a `Hosted` handle is gone (its node died or it was killed)."""


class Hosted:
    """``cls(*args)`` in this process or as a Ray actor.

    Args:
        cls: the class to host.
        args: its constructor's arguments (copied: the object never shares state with the caller).
        backend: "local" or "ray".
        num_cpus: CPUs the Ray actor reserves. The server and the replay mostly wait for calls,
            so they reserve none by default and never keep a worker from being scheduled.
        name: how errors name the object ("parameter server", "replay").
    """

    def __init__(self, cls: type, args: tuple[Any, ...], *, backend: str, num_cpus: float = 0.0,
                 name: str = "") -> None:
        self.name = name or cls.__name__
        self.backend = backend
        self.obj: Any = None
        self.actor: Any = None
        self._unread: list[Any] = []  # futures of sends whose results nobody fetched yet
        if backend == "ray":
            from pbmarl.hosting.ray import import_ray as _import_ray
            from pbmarl.hosting.ray import init_ray

            self.ray: Any = _import_ray()
            if not self.ray.is_initialized():
                init_ray()
            self.actor = self.ray.remote(cls).options(num_cpus=num_cpus, max_restarts=0,
                                                      max_task_retries=0).remote(*args)
        elif backend == "local":
            self.obj = cls(*copy.deepcopy(args))
        else:
            raise ValueError(f"backend must be one of ('local', 'ray'), got {backend!r}")

    def send(self, method: str, *args: Any) -> Any:
        """Start ``obj.method(*args)``; its future (a Ray ``ObjectRef``, or locally the value)."""
        if self.obj is not None:
            return getattr(self.obj, method)(*args)
        if self.actor is None:
            raise RuntimeError(f"the {self.name} was closed")
        future = getattr(self.actor, method).remote(*args)
        self._unread.append(future)
        return future

    def get(self, future: Any) -> Any:
        """The value of a future returned by `send`, after every send before it (whose errors it raises)."""
        if self.obj is not None or self.actor is None:
            return future
        from ray.exceptions import RayActorError, RayTaskError

        position = next((i for i, f in enumerate(self._unread) if f is future), None)
        refs = [future] if position is None else self._unread[:position + 1]
        if position is not None:
            del self._unread[:position + 1]
        try:
            return self.ray.get(refs)[-1]
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

    def close(self) -> None:
        """Stop the actor (local objects are simply dropped)."""
        if self.actor is not None:
            try:
                self.ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actor = None
        self.obj = None
        self._unread = []
