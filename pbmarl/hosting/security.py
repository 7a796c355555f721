"""How pbmarl exposes an embedded Ray instance: token auth and a private token file.

`init_ray()` without an address starts Ray inside the process. Unless the user chose
``RAY_AUTH_MODE`` themselves, pbmarl sets it to ``"token"`` before Ray starts; when no
token exists yet (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``),
pbmarl writes ``~/.ray/auth_token`` itself with mode 0600 (Ray would write it
world-readable). Every request to the instance's GCS, raylet and workers must then carry
that token; a client without it is refused.

`loopback_only()` makes the embedded instance listen on 127.0.0.1 only. Ray binds its gRPC
servers (GCS, raylet, object manager, workers, driver, agents) to the node's address, and to
every interface only when that address is not a loopback one. ``ray.init(_node_ip_address=
"127.0.0.1")`` does not help: `ray._private.worker.init` passes it through
`ray._private.services.resolve_ip_for_localhost`, which swaps a loopback address for
`get_node_ip_address()`. That function returns the loopback address when
``ray._private.ray_constants.ENABLE_RAY_CLUSTER`` is false, which Ray reads from
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` (its single-machine default on macOS and Windows).
pbmarl sets both, for the start only: Ray's processes inherit the variable, and this process
gets its previous values back, so a later ``init_ray("auto")`` joins a cluster as before.
The dashboard agent cannot be left out (the raylet always starts it); it listens on loopback
too, and the dashboard itself is off.

Joining a cluster (``init_ray("auto")`` or an address) changes nothing: the cluster's own
settings apply (``RAY_AUTH_MODE=token`` and its token, where the cluster uses auth).
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

AUTH_MODE_VAR = "RAY_AUTH_MODE"
CLUSTER_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextmanager
def loopback_only() -> Iterator[None]:
    """While Ray starts inside: node address 127.0.0.1, so every Ray process listens on loopback only."""
    from ray._private import ray_constants

    saved_env, saved_flag = os.environ.get(CLUSTER_VAR), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[CLUSTER_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(CLUSTER_VAR, None)
        else:
            os.environ[CLUSTER_VAR] = saved_env


def default_token_path() -> Path:
    """Where Ray looks for a token when neither ``RAY_AUTH_TOKEN`` nor ``RAY_AUTH_TOKEN_PATH`` is set."""
    return Path.home() / ".ray" / "auth_token"


def prepare_embedded_auth() -> str:
    """Set ``RAY_AUTH_MODE`` for an embedded instance (``"token"`` unless the user set it); returns the mode.

    With token auth and no token anywhere, creates the default token file with mode 0600.
    """
    mode = os.environ.get(AUTH_MODE_VAR)
    if mode is None:
        mode = os.environ[AUTH_MODE_VAR] = "token"
        _refresh_ray_config()
    if mode.lower() == "token" and not _token_available():
        create_token_file(default_token_path())
    return mode


def _token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    custom = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if custom:
        return Path(custom).expanduser().is_file()
    return default_token_path().is_file()


def create_token_file(path: Path) -> Path:
    """Write a new random token (256 bits, hex) to `path`, readable by this user only (0600).

    The file is created with that mode (never widened afterwards), and never overwritten.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32))
    os.chmod(path, 0o600)  # in case a umask narrowed it further, or a filesystem ignored the mode
    return path


def _refresh_ray_config() -> None:
    """Ray caches its config at import; a mode set after ``import ray`` needs a refresh (as Ray does itself)."""
    if "ray._raylet" in sys.modules:
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")
