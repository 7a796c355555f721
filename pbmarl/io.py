"""Atomic, code-free file I/O: JSON metadata and `.npz` arrays.

Every write goes to a temporary file in the same folder and is renamed into place,
so a process killed mid-write leaves either the old file or the new one.

Reading treats a folder as untrusted input: loading never unpickles; `inside` refuses
any name (symlinks included) that leads out of its folder; `read_npz` reads only the
arrays asked for, checking each one's shape, dtype and size from its header before
its data is decompressed; `read_json` names the file in every error.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy_format


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


#: the most bytes one array of a `.npz` may hold once loaded, unless a caller allows more
MAX_ARRAY_BYTES = 256 * 2**20
#: the largest JSON metadata file read
MAX_JSON_BYTES = 64 * 2**20
#: (shape or None for any, accepted dtype kinds such as "f", "iu", "b", "U"): what `read_npz` checks
ArraySpec = tuple["tuple[int, ...] | None", str]


def inside(folder: str | os.PathLike[str], name: Any, *, entry: str) -> Path:
    """``folder / name``, refusing a name that is not a plain relative path or that leads (through
    ``..`` or a symlink) outside `folder`. The error names `entry`, never where the name points.

    >>> inside("/runs/a", "table-0001.npz", entry="run.json 'table'").name
    'table-0001.npz'
    >>> inside("/runs/a", "../../etc/passwd", entry="run.json 'table'")
    Traceback (most recent call last):
    ...
    ValueError: run.json 'table' must name a file inside the run folder, got '../../etc/passwd'
    """
    root = Path(folder)
    if not isinstance(name, str) or not name or os.path.isabs(name) or "\x00" in name:
        raise ValueError(f"{entry} must name a file inside the run folder, got {name!r}")
    path = root / name
    try:
        resolved, base = path.resolve(), root.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise ValueError(f"{entry} must name a file inside the run folder, got {name!r}") from None
    if resolved != base and base not in resolved.parents:
        raise ValueError(f"{entry} must name a file inside the run folder, got {name!r}")
    return path


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file; any failure is a ValueError (or FileNotFoundError) that names the file."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ValueError(f"{str(path)!r} is larger than {MAX_JSON_BYTES} bytes; not pbmarl metadata")
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{str(path)!r} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{str(path)!r} is not valid JSON (not UTF-8 text)") from None


def write_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> Path:
    """Write named arrays to an uncompressed `.npz`, atomically."""
    for name, value in arrays.items():
        if np.asarray(value).dtype == object:
            raise TypeError(f"array {name!r} has dtype object; only plain numeric/string arrays are stored")
    def write(fh: Any) -> None:
        np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy's stub types the first keyword as allow_pickle

    return write_atomic(path, write, "wb")


def read_npz(path: str | os.PathLike[str], expect: Mapping[str, ArraySpec] | None = None, *,
             max_bytes: int = MAX_ARRAY_BYTES) -> dict[str, np.ndarray]:
    """Read the arrays of an `.npz`: those named in `expect` (all of them when None), never pickles.

    Every header is read first: object dtypes, a shape or dtype kind that `expect`
    does not allow, an array above `max_bytes`, a stored size that disagrees with the
    header, or arrays that together would take more than `max_bytes` or twice the file's
    size are refused with a ValueError naming the file (and the array), before any data
    is decompressed. Arrays not asked for are never read.
    """
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, ValueError):
        raise ValueError(f"{str(path)!r} is not an .npz archive") from None
    with archive:
        members = {info.filename[:-4]: info for info in archive.infolist() if info.filename.endswith(".npy")}
        names = list(members) if expect is None else list(expect)
        total = 0
        for name in names:  # every header first: nothing is decompressed before the whole read is known to fit
            info = members.get(name)
            if info is None:
                raise ValueError(f"{str(path)!r} has no array {name!r} (it holds {sorted(members)})")
            total += _check_header(archive, info, path, name, None if expect is None else expect[name], max_bytes)
        allowed = max(max_bytes, 2 * path.stat().st_size)
        if total > allowed:
            raise ValueError(f"the arrays of {str(path)!r} would take {total:,} bytes, more than the {allowed:,} "
                             "allowed for a file of its size")
        out: dict[str, np.ndarray] = {}
        for name in names:
            info = members[name]
            with archive.open(info) as fh:
                try:
                    out[name] = npy_format.read_array(fh, allow_pickle=False)
                except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                    raise ValueError(f"cannot read array {name!r} of {str(path)!r}: {exc}") from None
        return out


def _check_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, name: str,
                  spec: ArraySpec | None, max_bytes: int) -> int:
    what = f"array {name!r} of {str(path)!r}"
    with archive.open(info) as fh:
        try:
            version = npy_format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = npy_format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = npy_format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            header_bytes = fh.tell()
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{what} has an unreadable header: {exc}") from None
    if dtype.hasobject:
        raise ValueError(f"{what} holds Python objects (pickled data); pbmarl never loads those")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max_bytes:
        raise ValueError(f"{what} would take {nbytes:,} bytes (shape {shape}), more than the {max_bytes:,} allowed")
    if info.file_size != header_bytes + nbytes:
        raise ValueError(f"{what} declares shape {shape} of {dtype} but stores {info.file_size - header_bytes:,} "
                         f"bytes instead of {nbytes:,}")
    if spec is not None:
        want_shape, kinds = spec
        if want_shape is not None and tuple(shape) != tuple(want_shape):
            raise ValueError(f"{what} has shape {tuple(shape)}; the metadata says {tuple(want_shape)}")
        if dtype.kind not in kinds:
            raise ValueError(f"{what} has dtype {dtype}; expected a dtype of kind {kinds!r}")
    return nbytes


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in JSON: {value!r}")
