"""The run folder: the one module that writes and reads every run's files.

Layout::

    run.json          type, format, pbmarl version, config, seed, game, and which state folder is current
    history.csv       one row per record, for people and pandas (never read back)
    state-NNNNNN/     the run's state at its last save:
        state.json    the run's JSON state (records, counters, random generators)
        arrays.npz    its arrays (uncompressed, no objects)
        <name>.pt     torch state dicts, loaded with ``weights_only=True``
        <name>/       sub-objects that write a folder of their own (a population, a payoff table)
        manifest.json every file above with its size and SHA-256

A save is one commit: the new state goes into a fresh ``state-NNNNNN/`` (written under a
temporary name, then renamed), and only then does ``run.json``, rewritten atomically, point to
it; older state folders are removed after. A process killed at any instant leaves a folder
that loads as the old save or the new one, never a mix, and a folder whose files do not match
its manifest is refused, naming them.

Reading treats the folder as untrusted. Nothing loaded executes code (JSON, ``.npz`` without
pickles, torch ``weights_only``); no name in ``run.json`` and no symlink leads out of the
folder; arrays are checked against the file's size before anything is decompressed. Every
refusal is a `RunFolderError` naming the file and the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pbmarl._version import __version__
from pbmarl.io import (
    MAX_ARRAY_BYTES,
    ArraySpec,
    ensure_writable_folder,
    read_json,
    read_npz,
    remove_stray_tmp,
    write_atomic,
    write_json,
    write_npz,
)
from pbmarl.runs.registry import run_class, type_name

__all__ = ["FORMAT", "RunFolderError", "SavedRun", "State", "load_run", "save_run"]

#: the folder format this release writes and reads
FORMAT = 2
_STATE = re.compile(r"state-\d{6}")


class RunFolderError(ValueError):
    """A run folder that pbmarl refuses to read: the message names the file and the reason."""


@contextlib.contextmanager
def refused_as(errors: tuple[type[Exception], ...], message: Callable[[Exception], str]) -> Iterator[None]:
    """Around the rebuild of a saved object: one of `errors` (a malformed save) is raised again as a
    `RunFolderError` with ``message(exc)``; a `RunFolderError` raised inside passes as it is."""
    try:
        yield
    except RunFolderError:
        raise
    except errors as exc:
        raise RunFolderError(message(exc)) from None


@dataclass
class State:
    """What a run hands the folder module to save (its `state()`).

    Attributes:
        data: JSON-ready state (records, counters, generator states, ...): ``state.json``.
        arrays: named arrays: ``arrays.npz``.
        modules: torch state dicts by name: ``<name>.pt`` each.
        folders: sub-objects that write a folder of their own: name -> ``write(folder)``.
        config: the run's config as a JSON-ready dict (``run.config.to_dict()``).
        seed: the seed the run was built with.
        game: the game's spec (``pbmarl.games.registry.game_spec``), when the run has one game.
    """

    data: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    modules: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    folders: dict[str, Callable[[Path], Any]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    game: dict[str, Any] | None = None


class SavedRun:
    """What `from_state` reads a saved run from; every accessor applies the folder's safety rules."""

    def __init__(self, folder: Path, meta: dict[str, Any], state_dir: Path, data: dict[str, Any],
                 manifest: dict[str, Any]) -> None:
        self.folder = folder
        self.meta = meta
        self.state_dir = state_dir
        self.data = data
        self._manifest = manifest

    @property
    def config(self) -> dict[str, Any]:
        """The saved config, as a dict of options."""
        config = self.meta.get("config", {})
        if not isinstance(config, dict):
            raise RunFolderError(f"{self._where('run.json')}: 'config' must be an object, got {config!r}")
        return config

    @property
    def seed(self) -> Any:
        return self.meta.get("seed")

    def game(self) -> Any:
        """The saved game, rebuilt from its spec."""
        from pbmarl.games.registry import game_from_spec

        spec = self.meta.get("game")
        if spec is None:
            raise RunFolderError(f"{self._where('run.json')} names no game")
        try:
            return game_from_spec(spec)
        except (ValueError, TypeError, KeyError) as exc:
            raise RunFolderError(f"{self._where('run.json')}: cannot rebuild its game {spec!r}: {exc}") from None

    def arrays(self, expect: Mapping[str, ArraySpec], *, max_bytes: int = MAX_ARRAY_BYTES) -> dict[str, np.ndarray]:
        """The arrays named in `expect` (name -> (shape or None, dtype kinds)); no other member is read."""
        path = self._file("arrays.npz")
        try:
            return read_npz(path, expect, max_bytes=max_bytes)
        except ValueError as exc:
            raise RunFolderError(str(exc)) from None

    def module(self, name: str) -> dict[str, Any]:
        """The torch state dict saved as `name`, loaded with ``weights_only=True`` onto the CPU (``map_location``);
        a run's ``load_state_dict`` copies it onto the run's own ``device``."""
        import pickle

        import torch

        path = self._file(f"{name}.pt")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as exc:
            raise RunFolderError(f"cannot read {str(path)!r} as a torch state dict: {str(exc).splitlines()[0]}") \
                from None
        if not isinstance(state, dict):
            raise RunFolderError(f"{str(path)!r} holds a {type(state).__name__}, not a state dict")
        return state

    def subfolder(self, name: str) -> Path:
        """The folder a sub-object wrote as `name` (refused if it, or anything in it, is a symlink)."""
        path = self.state_dir / name
        if name not in self._manifest.get("folders", []) or path.is_symlink() or not path.is_dir():
            raise RunFolderError(f"{str(path)!r} is not a folder of this save")
        for root, dirs, files in os.walk(path):
            for entry in dirs + files:
                if os.path.islink(os.path.join(root, entry)):
                    raise RunFolderError(f"{os.path.join(root, entry)!r} is a symlink; a run folder holds none")
        return path

    def _file(self, name: str) -> Path:
        if name not in self._manifest.get("files", {}):
            raise RunFolderError(f"{self._where(name)} is not part of this save (see its manifest.json)")
        return self.state_dir / name

    def _where(self, name: str) -> str:
        base = self.folder if name == "run.json" else self.state_dir
        return repr(str(base / name))


# -- writing -----------------------------------------------------------------------------------
def save_run(run: Any, path: str | os.PathLike[str]) -> Path:
    """Write `run` (its `state()`) into the run folder `path` as one commit; see the module doc."""
    folder = ensure_writable_folder(path, what="run folder")
    kind = type_name(run)
    state: State = run.state()
    _remove_stray(folder)
    names = _state_names(folder)
    name = f"state-{(int(names[-1][6:]) + 1) if names else 1:06d}"
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=f".{name}.", suffix=".tmp"))
    try:
        _write_state(tmp, state)
        os.replace(tmp, folder / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(folder)
    history = run.history
    write_atomic(folder / "history.csv", lambda fh: history.to_csv(fh), "w")
    write_json(folder / "run.json", {
        "type": kind, "format": FORMAT, "pbmarl": __version__, "config": state.config, "seed": state.seed,
        "game": state.game, "iteration": int(run.iteration), "state": name,
    })
    for old in names:  # the commit is done: older saves go
        shutil.rmtree(folder / old, ignore_errors=True)
    return folder


def _write_state(folder: Path, state: State) -> None:
    files: dict[str, Any] = {}
    write_json(folder / "state.json", state.data)
    if state.arrays:
        write_npz(folder / "arrays.npz", state.arrays)
    if state.modules:
        import torch

        for key, module in state.modules.items():
            _check_name(key)
            _save_torch(torch, folder / f"{key}.pt", dict(module))
    for key, write in state.folders.items():
        _check_name(key)
        write(folder / key)
    for entry in sorted(folder.iterdir()):
        if entry.is_file():
            files[entry.name] = [entry.stat().st_size, _sha256(entry)]
    write_json(folder / "manifest.json", {"files": files, "folders": sorted(state.folders)})


def _save_torch(torch: Any, path: Path, state_dict: dict[str, Any]) -> None:
    from pbmarl.torchutil import on_cpu

    cpu = on_cpu(state_dict)  # written from CPU tensors: a run trained on a GPU loads on a machine without one
    write_atomic(path, lambda fh: torch.save(cpu, fh))


def _check_name(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name) or name in ("state.json", "manifest.json"):
        raise ValueError(f"a saved part's name must be a plain file name, got {name!r}")


# -- reading -----------------------------------------------------------------------------------
def load_run(path: str | os.PathLike[str], *, expect: type | None = None, **overrides: Any) -> Any:
    """Rebuild the run saved in folder `path`: ``run.json`` names its type, whose `from_state` rebuilds it.

    `expect` (what ``Type.load`` passes) refuses a folder of another type. `overrides` go to
    `from_state` (parts that cannot be saved, such as a user-made learner, or options to change).
    """
    saved = open_run(path)
    cls: Any = run_class(saved.meta.get("type"))
    if expect is not None and not issubclass(cls, expect):
        raise RunFolderError(f"{str(saved.folder)!r} holds a {cls.__name__} run, not a {expect.__name__}; "
                             f"load it with pb.load_run or {cls.__name__}.load")
    return cls.from_state(saved, **overrides)


def open_run(path: str | os.PathLike[str]) -> SavedRun:
    """Read and check a run folder's ``run.json``, current state folder and manifest (nothing else)."""
    folder = Path(path)
    meta_path = folder / "run.json"
    if not folder.is_dir():
        raise RunFolderError(f"{str(folder)!r} is not a folder")
    if meta_path.is_symlink() or not meta_path.is_file():
        raise RunFolderError(f"{str(folder)!r} is not a pbmarl run folder (no run.json)")
    meta = _read_checked(meta_path)
    if meta.get("format") != FORMAT:
        raise RunFolderError(
            f"{str(meta_path)!r} has folder format {meta.get('format')!r}; this pbmarl ({__version__}) reads format "
            f"{FORMAT}. A folder of an earlier pbmarl converts by loading it with that release and continuing the "
            "run from its records, or by rerunning it (runs are seeded: the same seed gives the same run)")
    name = meta.get("state")
    if not isinstance(name, str) or not _STATE.fullmatch(name):
        raise RunFolderError(f"{str(meta_path)!r}: 'state' must name a state-NNNNNN folder, got {name!r}")
    state_dir = folder / name
    if state_dir.is_symlink() or not state_dir.is_dir():
        raise RunFolderError(f"{str(state_dir)!r} (named by run.json) is missing or a symlink")
    manifest = _read_checked(state_dir / "manifest.json")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise RunFolderError(f"{str(state_dir / 'manifest.json')!r} lists no files")
    bad = []
    for fname, entry in files.items():
        fpath = state_dir / str(fname)
        if "/" in str(fname) or fpath.is_symlink() or not fpath.is_file():
            bad.append(f"{fname} (missing or not a plain file)")
        elif not (isinstance(entry, list) and len(entry) == 2) or fpath.stat().st_size != entry[0] \
                or _sha256(fpath) != entry[1]:
            bad.append(f"{fname} (size or checksum differs from the manifest)")
    if bad:
        raise RunFolderError(f"{str(state_dir)!r} does not match its manifest: {'; '.join(bad)}; the save is "
                             "incomplete or was changed after it was written")
    data = _read_checked(state_dir / "state.json")
    _check_widths_fit(meta_path, meta.get("config"), data, _folder_bytes(state_dir))
    return SavedRun(folder, meta, state_dir, data, manifest)


#: bytes a saved weight takes at the least (half precision), for `_check_widths_fit`
_WEIGHT_BYTES = 2


def _check_widths_fit(meta_path: Path, config: Any, data: Any, saved: int) -> None:
    """Refuse a save whose config (or a learner's config in its state) names hidden layers whose weights alone
    would take more than `MAX_ARRAY_BYTES` and more than every file of the save together: networks are built
    from the config before their weights are read, so a changed width (``"hidden": [16384, 16384]`` in a
    folder of a few kB) would allocate gigabytes before any check."""
    for where, key, value in _hidden_entries(config, "config", 0) + _hidden_entries(data, "state.json", 0):
        widths = [value, value] if isinstance(value, int) else list(value)
        need = _WEIGHT_BYTES * sum(a * b for a, b in zip(widths, widths[1:]))
        if need > MAX_ARRAY_BYTES and need > saved:
            raise RunFolderError(
                f"{str(meta_path)!r}: {where} {key!r} is {value!r}, layers whose weights alone take at least "
                f"{need / 2**30:.2f} GB, but every file of the save together holds {saved:,} bytes; the widths were "
                "changed after the save (they are checked before any network is built)")


def _hidden_entries(value: Any, where: str, depth: int) -> list[tuple[str, str, Any]]:
    """(where, key, widths) of every ``*hidden`` entry holding layer widths (a list of ints, or one int)."""
    out: list[tuple[str, str, Any]] = []
    if depth > 8:
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and key.endswith("hidden") and _widths(item):
                out.append((where, key, item))
            elif isinstance(item, (dict, list)):
                out += _hidden_entries(item, where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                out += _hidden_entries(item, where, depth + 1)
    return out


def _widths(value: Any) -> bool:
    def width(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x > 0

    return width(value) or (isinstance(value, list) and len(value) > 0 and all(width(x) for x in value))


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total


def _read_checked(path: Path) -> dict[str, Any]:
    if path.is_symlink() or not path.is_file():
        raise RunFolderError(f"{str(path)!r} is missing or a symlink")
    try:
        data = read_json(path)
    except ValueError as exc:
        raise RunFolderError(str(exc)) from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{str(path)!r} must hold a JSON object")
    return data


def _remove_stray(folder: Path) -> None:
    """Remove what a save killed part-way left: ``.*.tmp`` files and ``.state-*.tmp`` folders (never read)."""
    remove_stray_tmp(folder)
    for entry in folder.iterdir():
        if entry.name.startswith(".state-") and entry.name.endswith(".tmp") and entry.is_dir() \
                and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _state_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if _STATE.fullmatch(p.name) and p.is_dir() and not p.is_symlink())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
