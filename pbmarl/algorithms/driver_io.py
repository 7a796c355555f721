"""Small file helpers shared by the League, NFSP and P2SRO run folders.

Policies go to ``.npz`` arrays plus their JSON meta (never pickles); learners save
themselves where they can. Every file is written atomically by `pbmarl.io`.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.io import read_json, read_npz, write_json, write_npz
from pbmarl.policies.base import Policy, new_policy_from_state
from pbmarl.protocols import Checkpointed


def save_policies(folder: Path, name: str, policies: Sequence[Policy]) -> list[dict[str, Any]]:
    """Write each policy as ``{name}-{i}.npz``; returns the JSON entries that `load_policies` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, policy in enumerate(policies):
        file = f"{name}-{i}.npz"
        write_npz(folder / file, policy.arrays())
        entries.append({"file": file, "meta": policy.meta()})
    return entries


def load_policies(game: Game, folder: Path, entries: Sequence[dict[str, Any]]) -> list[Policy]:
    return [new_policy_from_state(game, read_npz(folder / e["file"]), e["meta"]) for e in entries]


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


def rng_from_state(state: dict[str, Any]) -> np.random.Generator:
    rng = np.random.default_rng()
    rng.bit_generator.state = state
    return rng


def learner_copy(learner: Any, offset: int) -> Any:
    """A learner like `learner` with its own random stream: an RL `Learner` is rebuilt from its
    config with ``seed + offset`` (sharing its pool); a stateless oracle (exact BR) is shared."""
    from pbmarl.learners.oracles.base import Learner

    if isinstance(learner, Learner):
        return type(learner)(learner.game, config=learner.config, seed=learner.seed + offset, pool=learner.pool)
    return learner


def make_factory(learner: Any) -> Callable[[int], Any]:
    """``offset -> learner``: `learner` itself if it is a callable factory, else copies of it."""
    from pbmarl.protocols import Oracle

    if isinstance(learner, Oracle):
        return lambda offset: learner_copy(learner, offset)
    if callable(learner):
        return learner
    raise TypeError(f"learner must be an Oracle (with respond(player, opponents)) or a factory offset -> Oracle, "
                    f"got {type(learner).__name__}: {learner!r}")


def save_learner(learner: Any, folder: Path) -> str | None:
    """Save `learner` into `folder` if it keeps state; the folder name, or None."""
    if isinstance(learner, Checkpointed):
        learner.save(folder)
        return folder.name
    return None


def load_learner(learner: Any, folder: Path, saved: str | None) -> Any:
    if saved and isinstance(learner, Checkpointed):
        learner.load(folder / saved)
    return learner


def write_run_json(folder: Path, data: dict[str, Any]) -> None:
    write_json(folder / "run.json", data)


def read_run_json(folder: Path, kind: str, *, format: int | None = None) -> dict[str, Any]:
    """`folder`'s run.json, checked to hold a `kind` run (and of `format`, when given)."""
    if not (folder / "run.json").exists():
        raise FileNotFoundError(f"{str(folder)!r} is not a pbmarl run folder (no run.json)")
    data: dict[str, Any] = read_json(folder / "run.json")
    if data.get("kind") != kind or (format is not None and data.get("format") != format):
        wanted = f"a {kind!r} run" + (f" of format {format}" if format is not None else "")
        raise ValueError(f"run folder {str(folder)!r} holds a {data.get('kind')!r} run (format "
                         f"{data.get('format')!r}), not {wanted}")
    return copy.deepcopy(data)


def check_overrides(overrides: dict[str, Any], accepted: Sequence[str]) -> None:
    """Raise TypeError naming any override a loader does not accept."""
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:
        raise TypeError(f"unknown overrides {unknown}; accepted: {', '.join(accepted)}")


def write_history(folder: Path, history: Any) -> None:
    """Write a history DataFrame to ``history.csv`` atomically (a temporary file, then a rename)."""
    tmp = folder / ".history.csv.tmp"
    history.to_csv(tmp)
    tmp.replace(folder / "history.csv")


def remove_stale(folder: Path, patterns: Sequence[str], keep: Sequence[str | None]) -> None:
    """Delete files and folders matching `patterns` in `folder` except those named in `keep`
    (superseded snapshots; a None in `keep` names nothing)."""
    for pattern in patterns:
        for old in folder.glob(pattern):
            if old.name in keep:
                continue
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)


def config_with(cls: type, config: Any, options: dict[str, Any], *, owner: str) -> Any:
    """`config` (default ``cls()``) with keyword `options` replacing its fields; unknown names raise TypeError."""
    import dataclasses

    if config is not None and not isinstance(config, cls):
        raise TypeError(f"config for {owner} must be a {cls.__name__}, got {type(config).__name__}")
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(map(repr, unknown))} for {owner}; accepted: {', '.join(valid)}")
    base: Any = config if config is not None else cls()
    return dataclasses.replace(base, **options)


def config_json(config: Any) -> dict[str, Any]:
    """A config dataclass as a JSON-able dict (tuples become lists)."""
    import dataclasses

    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}
