"""Atomic, code-free file I/O: JSON metadata and `.npz` arrays.

Every write goes to a temporary file in the same folder and is renamed into place,
so a process killed mid-write leaves either the old file or the new one. Loading
never unpickles (``allow_pickle=False``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def write_atomic(path: str | os.PathLike[str], write: Callable[[Any], None], mode: str = "wb") -> Path:
    """Call `write(file)` on a temporary file beside `path`, fsync it, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def remove_stray_tmp(folder: str | os.PathLike[str]) -> int:
    """Delete the ``.*.tmp`` files an interrupted `write_atomic` left under `folder` (symlinks not
    followed); returns how many. Call it only where no other process is writing into `folder`."""
    removed = 0
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            if name.startswith(".") and name.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(root, name))
                    removed += 1
                except OSError:
                    pass  # a read-only folder keeps them; they are never read
    return removed


def ensure_writable_folder(path: str | os.PathLike[str], *, what: str = "folder") -> Path:
    """Create `path` if needed and check a file can be written there; raise OSError naming it."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise OSError(f"cannot write the {what} {str(folder)!r}: {exc.strerror or exc}") from None
    return folder


def write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write `data` as JSON, atomically."""
    text = json.dumps(data, indent=1, sort_keys=True, default=_json_default)
    return write_atomic(path, lambda fh: fh.write(text), "w")


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path) as fh:
        return json.load(fh)


def write_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> Path:
    """Write named arrays to an uncompressed `.npz`, atomically."""
    for name, value in arrays.items():
        if np.asarray(value).dtype == object:
            raise TypeError(f"array {name!r} has dtype object; only plain numeric/string arrays are stored")
    return write_atomic(path, lambda fh: np.savez(fh, **arrays), "wb")


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every array of an `.npz` (no pickles)."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in JSON: {value!r}")
