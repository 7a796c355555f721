"""How pbmarl exposes an embedded Ray instance: token auth and a private token file.

`init_ray()` without an address starts Ray inside the process. Unless the user chose
``RAY_AUTH_MODE`` themselves, pbmarl sets it to ``"token"`` before Ray starts; when no
token exists yet (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``),
pbmarl writes ``~/.ray/auth_token`` itself with mode 0600 (Ray would write it
world-readable). Every request to the instance's GCS, raylet and workers must then carry
that token; a client without it is refused.

What Ray 2.60 does not allow, measured: binding to loopback only. Its gRPC servers (GCS,
raylet, workers, driver) listen on every interface whatever the node address, and
``ray.init(_node_ip_address="127.0.0.1")`` is rewritten to the machine's routable address
(`ray._private.services.resolve_ip_for_localhost`), so pbmarl does not pretend to pass it.
Nor can the dashboard agent be left out (the raylet always starts it); the dashboard
itself is off. Token auth is therefore what keeps other machines out.

Joining a cluster (``init_ray("auto")`` or an address) changes nothing: the cluster's own
settings apply (``RAY_AUTH_MODE=token`` and its token, where the cluster uses auth).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

AUTH_MODE_VAR = "RAY_AUTH_MODE"


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
