"""Ray itself: `import_ray`, `init_ray` (start or join, once per process) and what cleans up after a start.

`pbmarl.hosting` is the one package that imports Ray, and only inside functions, so importing
it (or anything above it) does not load Ray. An embedded instance listens on loopback only and
uses token auth with a private token file (`pbmarl.hosting.security`); joining a cluster follows
the cluster's settings. A head that dies during a call is reported as `RayHeadLost`
(`pbmarl.hosting.liveness`). Actors are made and called through `pbmarl.hosting.hosted.Hosted`;
code elsewhere needs at most `init_ray`, `node_id()` and `free_cpus()`. Everything in `pbmarl.hosting`
reaches Ray through `import_ray()` (tests swap it for an in-process fake).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from typing import Any

from pbmarl.hosting.liveness import env_default, patient_gcs_clients

AUTH_MODE_VAR = "RAY_AUTH_MODE"
_CONTEXT: tuple[str, Any] | None = None  # (GCS address, context) of the session init_ray made or found


def import_ray() -> Any:
    """The `ray` module (imported here, on first use)."""
    import ray

    return ray


def actor_errors() -> tuple[type[Any], type[Any]]:
    """Ray's ``(RayActorError, RayTaskError)``: an actor died; a call on it raised."""
    from ray.exceptions import RayActorError, RayTaskError

    return RayActorError, RayTaskError


def node_id() -> str:
    """The Ray node this process runs on (inside an actor: the actor's node)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def init_ray(
    address: str | None = None, num_cpus: int | None = None, *, timeout_s: float = 5.0, quiet: bool = False
) -> Any:
    """Start or join Ray, once per process; returns Ray's context (a second call returns the same).

    * no `address` and no ``RAY_ADDRESS``: an embedded local Ray instance with
      `num_cpus` CPUs (default: all of this machine's), dashboard off;
    * ``"auto"``, ``"host:port"`` (or ``RAY_ADDRESS``): join that running cluster
      (`num_cpus` must then be None: a cluster's size is set where it was started).

    With ``quiet=True`` Ray's own INFO start-up lines stay out of the output (a notebook shows
    them as a red stderr box) and pbmarl prints one line instead: what started or was joined,
    its address, nodes and CPUs.

    Raises:
        ConnectionError: within about `timeout_s` seconds when no cluster answers at the address.
        ValueError: `num_cpus` given together with a cluster address, or a bad `num_cpus`.

    Example:
        >>> pb.init_ray()                       # local, all cores  # doctest: +SKIP
        >>> pb.init_ray(address="auto")         # the cluster this machine belongs to  # doctest: +SKIP
    """
    global _CONTEXT
    ray = import_ray()
    target = address if address is not None else (os.environ.get("RAY_ADDRESS") or None)
    if ray.is_initialized():
        current = str(ray.get_runtime_context().gcs_address)
        wanted = target[len("ray://"):] if target and target.startswith("ray://") else target
        if wanted not in (None, "auto", "local", current):
            raise ValueError(
                f"Ray is already connected to the cluster at {current!r}, not {target!r}; "
                "call ray.shutdown() first to switch clusters"
            )
        if _CONTEXT is None or _CONTEXT[0] != current:  # Ray was started by someone else
            _CONTEXT = (current, ray.init(ignore_reinit_error=True, **_logging(quiet)))
        _summary(ray, "already connected to Ray", quiet)
        return _CONTEXT[1]
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1):
        raise ValueError(f"num_cpus must be a positive int, got {num_cpus!r}")
    if target is None or target == "local":
        context = _start_embedded(ray, num_cpus or os.cpu_count() or 1, quiet)
        _CONTEXT = (str(ray.get_runtime_context().gcs_address), context)
        _summary(ray, "started a local Ray instance", quiet)
        return context
    if num_cpus is not None:
        raise ValueError(
            f"num_cpus={num_cpus} applies only to a local Ray instance; joining the cluster at {target!r} "
            "uses the CPUs it was started with (leave num_cpus=None)"
        )
    gcs = _resolve(target)
    _probe(gcs, target, timeout_s)
    try:
        with _gcs_wait(timeout_s):
            context = ray.init(address=target, **_logging(quiet))
    except ConnectionError as exc:  # the port answers, but no Ray GCS behind it (or not within timeout_s)
        raise ConnectionError(
            f"something answers at {target!r} ({gcs}) but no Ray cluster replied within about {timeout_s:g} s "
            f"({exc}). Check the address (`ray status` on the head prints it), or raise timeout_s for a head "
            "that is still starting"
        ) from None
    _CONTEXT = (str(ray.get_runtime_context().gcs_address), context)
    _summary(ray, f"joined the Ray cluster at {target}", quiet)
    return context


#: seconds the raylet waits for its agents on the second try (Ray's default is 10; a loaded machine can need more)
RETRY_AGENT_TIMEOUT_S = 120


def _start_embedded(ray: Any, num_cpus: int, quiet: bool) -> Any:
    """Start a local instance listening on loopback only, with token auth (see `pbmarl.hosting.security`); retry once,
    more patiently, on a start-up time-out; then raise a RuntimeError that says what to try."""
    from pbmarl.hosting.security import loopback_only, prepare_embedded_auth

    prepare_embedded_auth()
    options = {"address": "local", "num_cpus": num_cpus, "include_dashboard": False, **_logging(quiet)}
    for attempt in range(2):
        extra = {"_system_config": {"agent_register_timeout_ms": RETRY_AGENT_TIMEOUT_S * 1000}} if attempt else {}
        before = set(child_processes())
        try:
            with loopback_only(), patient_gcs_clients():
                return ray.init(**options, **extra)
        except Exception as exc:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) and "Timed out" not in str(exc):
                raise
            ray.shutdown()
            # a start that timed out can leave its gcs_server/raylet running: ray.shutdown() does not know them
            stop_processes(pid for pid, name in child_processes().items() if pid not in before and name in RAY_DAEMONS)
            if attempt:
                raise RuntimeError(
                    f"Ray did not start on this machine, twice (the second time waiting {RETRY_AGENT_TIMEOUT_S} s "
                    f"for its agents): {exc} The machine is probably overloaded. Try: fewer processes running at "
                    "once, init_ray(num_cpus=2), starting Ray once with `ray start --head` and then "
                    "init_ray(address='auto'), or RolloutPool(backend='local') without Ray"
                ) from None
    raise AssertionError("unreachable")


#: names of the daemons an embedded Ray start launches as children of this process
RAY_DAEMONS = ("gcs_server", "raylet", "plasma_store", "dashboard", "log_monitor", "monitor")


def child_processes() -> dict[int, str]:
    """``{pid: name}`` of this process's direct children, read from /proc ({} where there is none)."""
    me, found = os.getpid(), {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        name, _, rest = stat[stat.index("(") + 1:].rpartition(")")
        fields = rest.split()
        if len(fields) > 1 and fields[1] == str(me):
            found[int(entry)] = name
    return found


def stop_processes(pids: Any, grace_s: float = 3.0) -> None:
    """SIGTERM each pid, then SIGKILL what is still running after `grace_s`; reaps our own children."""
    import signal

    pids = [pid for pid in pids if _alive(pid)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = [pid for pid in pids if _alive(pid)]
    for pid in pids:
        _signal(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (reaping it first if it is our exited child)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _logging(quiet: bool) -> dict[str, Any]:
    """`ray.init` options that keep Ray's INFO start-up lines out of the output when `quiet`."""
    import logging

    return {"logging_level": logging.WARNING} if quiet else {}


def _summary(ray: Any, what: str, quiet: bool) -> None:
    """pbmarl's one line in place of Ray's start-up log (only when `quiet`)."""
    if quiet:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        cpus = ray.cluster_resources().get("CPU", 0)
        print(f"pbmarl: {what} (GCS {ray.get_runtime_context().gcs_address}): {len(nodes)} node(s), {cpus:g} CPUs")


def _resolve(address: str) -> str:
    """host:port of the cluster's GCS for `address` ("auto" reads Ray's record of the running cluster)."""
    if address.startswith("ray://"):
        return address[len("ray://"):]
    if address == "auto":
        from ray._private import services

        try:
            return str(services.canonicalize_bootstrap_address_or_die("auto"))
        except ConnectionError as exc:
            raise ConnectionError(f"address='auto' found no running Ray cluster on this machine: {exc}") from None
    return address


#: Ray's own setting (read when a driver connects): seconds, one try each, it asks a GCS for its cluster id
GCS_WAIT_VAR = "RAY_gcs_server_port_wait_time_s"


def _gcs_wait(timeout_s: float) -> contextlib.AbstractContextManager[None]:
    """While joining a cluster: Ray gives up on a GCS that does not answer after about `timeout_s` seconds
    (its default is about 20; a user's own ``RAY_gcs_server_port_wait_time_s`` is kept)."""
    return env_default(GCS_WAIT_VAR, str(max(1, math.ceil(timeout_s))))


def _probe(gcs: str, address: str, timeout_s: float) -> None:
    host, sep, port = gcs.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"cannot read a Ray address from {address!r}; expected 'host:port', 'ray://host:port' or 'auto'")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s) as conn:
            speaks = _speaks_http2(conn)
    except OSError as exc:
        raise ConnectionError(
            f"no Ray cluster answers at {address!r} ({gcs}): {exc}. Start one with `ray start --head`, "
            "or call init_ray() without an address for a local instance"
        ) from None
    if not speaks:
        raise ConnectionError(
            f"something listens at {address!r} ({gcs}) but it is not a Ray cluster: it did not answer gRPC's "
            f"handshake within {timeout_s:g} s. Check the address (`ray status` on the head prints it)"
        )


#: an HTTP/2 client's connection preface and an empty SETTINGS frame (RFC 9113, sections 3.4 and 6.5)
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _speaks_http2(conn: socket.socket) -> bool:
    """Whether the server on `conn` answers an HTTP/2 preface with a frame (a Ray GCS is a gRPC server, and
    gRPC servers send their SETTINGS frame first). A silent or non-HTTP/2 service fails it within the socket's
    timeout. With ``RAY_USE_TLS`` set the server speaks TLS first, and the check is skipped."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return True
    try:
        conn.sendall(_HTTP2_HELLO)
        head = b""
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:  # a time-out or a reset: not an HTTP/2 server
        return False
    return head[3] == 0x04  # the frame type: SETTINGS


def free_cpus(wanted: float, *, grace_s: float) -> tuple[float, float]:
    """``(free, total)``: Ray's free and total CPUs (Ray started first if it is not running), waiting up to
    `grace_s` for recently released ones to show up when fewer than `wanted` are free."""
    ray = import_ray()
    if not ray.is_initialized():
        init_ray()
    deadline = time.monotonic() + grace_s
    while True:
        free = float(ray.available_resources().get("CPU", 0.0))
        if free + 1e-9 >= wanted or time.monotonic() > deadline:
            return free, float(ray.cluster_resources().get("CPU", 0.0))
        time.sleep(0.2)
