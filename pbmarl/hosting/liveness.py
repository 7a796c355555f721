"""Noticing that the Ray head (GCS server or raylet) is gone while pbmarl waits on it.

When the head of an embedded Ray dies, Ray's core worker inside this process retries the
GCS for ``gcs_rpc_server_reconnect_timeout_s`` seconds and then ends the whole process with
status 1 and no Python exception (in a notebook: a dead kernel). `RayBackend.run` therefore
waits in short slices and, between them, asks `head_lost` whether the head still lives:

* an embedded instance (started by this process): has its ``gcs_server`` or ``raylet``
  process exited? (Ray keeps their handles in ``ray._private.worker._global_node``);
* any instance: does the GCS port still accept connections? Only a refusal counts as lost
  (a slow answer on a loaded machine does not).

On a loss the caller raises `RayHeadLost` (a `RuntimeError`) after ``ray.shutdown()``, which
ends the core worker's reconnect loop, so the process lives on and the exception can be caught.
``ray.shutdown()`` itself can wait on GCS requests (``RAY_gcs_server_request_timeout_seconds``,
60 s by default), as long as Ray's default reconnect time-out: measured, one kill in three
then ended the process first. An embedded instance is therefore started with
`patient_gcs_clients` (a reconnect time-out of `GCS_RECONNECT_S`, unless the user set one).

What this cannot prevent: when the raylet dies and a write to its socket (``ray.wait`` on
objects in the store, freeing them) fails before the next check, Ray's core worker ends the
process itself (status 1; its driver log says "Exiting because the Raylet IPC connection
failed and the local Raylet is dead"). A CI run once ended so (status 1 mid-fill, no
traceback); the table a fill was writing is then lost with the process.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: seconds between two liveness checks while waiting for results
CHECK_EVERY_S = 1.0
#: seconds Ray's processes of an embedded instance retry a lost GCS before ending themselves (Ray's default: 60)
GCS_RECONNECT_S = 300
RECONNECT_VAR = "RAY_gcs_rpc_server_reconnect_timeout_s"


@contextmanager
def env_default(name: str, value: str) -> Iterator[None]:
    """Within the block, environment variable `name` is `value` unless the user set it; restored after.

    Ray reads its ``RAY_<setting>`` variables when a process initialises its config or connects.
    """
    saved = os.environ.get(name)
    if saved is None:
        os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)


def patient_gcs_clients() -> contextlib.AbstractContextManager[None]:
    """While Ray starts inside: Ray's processes (this one included) wait `GCS_RECONNECT_S` for a lost GCS
    (the user's own ``RAY_gcs_rpc_server_reconnect_timeout_s`` is kept)."""
    return env_default(RECONNECT_VAR, str(GCS_RECONNECT_S))


class RayHeadLost(RuntimeError):
    """The Ray head this process uses (GCS server or raylet) died during a call; nothing was stored."""


def head_lost(ray: Any) -> str | None:
    """What is gone (e.g. ``"gcs_server (pid 123) exited with -9"``), or None while the head looks alive."""
    node = getattr(getattr(ray, "_private", None) and ray._private.worker, "_global_node", None)
    processes = getattr(node, "all_processes", None) or {}
    for kind in ("gcs_server", "raylet"):
        for info in processes.get(kind, []):
            popen = getattr(info, "process", None)
            if popen is not None and popen.poll() is not None:
                return f"the head's {kind} (pid {popen.pid}) exited with {popen.poll()}"
    try:
        gcs = str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - no context at all: nothing to probe
        return None
    host, sep, port = gcs.rpartition(":")
    if not sep or not port.isdigit():
        return None
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=0.5):
            return None
    except ConnectionRefusedError:
        return f"nothing listens at the GCS address {gcs} any more"
    except OSError:  # time-out or unreachable: not proof that the head is gone
        return None


def lost_error(ray: Any, what: str) -> RayHeadLost:
    """Shut Ray's connection down (so the core worker does not end the process) and build the error."""
    try:
        ray.shutdown()
    except Exception:  # noqa: BLE001 - best effort: the head is gone
        pass
    return RayHeadLost(
        f"the Ray head died during this call ({what}); nothing was stored (the table is as it was). "
        "pbmarl disconnected from it so that this process survives. To go on: pb.init_ray() (or "
        "init_ray(address=...) once the cluster is back) and a new RolloutPool(backend='ray'), or "
        "RolloutPool(backend='local') without Ray"
    )
