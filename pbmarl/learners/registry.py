"""Learners by name, their specs (configs as JSON), and their folders on disk.

`make_learner(game, spec)` builds a learner from a JSON-able spec (what
`learner.spec()` returns, or a hand-written ``{"name": "dqn", "seed": 0, "budget": 20_000}``);
`save_learner` / `load_learner_state` are what `Learner.save` / `Learner.load` call.

A learner folder::

    learner.json      spec, rng state, counters, history, the open task (written LAST)
    state.pt          torch state dicts: warm-start networks, the task's networks and optimiser
    buffer.npz        the open task's replay buffer, if any
    opponent-S-K.npz  the open task's opponents (seat S, member K), if any

Nothing executes code on load: JSON, ``.npz`` without pickles, ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.io import read_json, read_npz, write_atomic, write_json, write_npz
from pbmarl.policies.base import new_policy_from_state
from pbmarl.policies.mixture import Mixture

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.learners.base import Learner, LearnerConfig

#: learner name -> (module, class)
LEARNERS: dict[str, tuple[str, str]] = {
    "dqn": ("pbmarl.learners.dqn", "DQN"),
    "ppo": ("pbmarl.learners.ppo", "PPO"),
    "a2c": ("pbmarl.learners.a2c", "A2C"),
    "exact": ("pbmarl.learners.exact", "ExactBestResponse"),
}
FORMAT = 1


def learner_class(name: str) -> type:
    """The class registered under `name`; unknown names raise with a suggestion."""
    if name not in LEARNERS:
        close = difflib.get_close_matches(str(name), LEARNERS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown learner {name!r}{hint} Known learners: {', '.join(LEARNERS)}")
    import importlib

    module, cls = LEARNERS[name]
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def make_learner(game: Game, spec: str | Mapping[str, Any]) -> Any:
    """A learner from a name or a spec dict.

    The spec holds ``name`` (``"dqn"``, ``"ppo"``, ``"a2c"``, ``"exact"``), optionally
    ``seed``, ``config`` (a dict of config fields, as `spec()` writes it) and any
    config field at the top level (overriding ``config``), e.g. a budget or a size.

    Example:
        >>> make_learner(game, {"name": "dqn", "seed": 0, "budget": 20_000, "hidden": [64, 64]})
        >>> make_learner(game, learner.spec())       # an equal, untrained learner
    """
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, Mapping):
        raise TypeError(f"a learner spec is a name or a dict with a 'name', got {type(spec).__name__}: {spec!r}")
    options = dict(spec)
    name = options.pop("name", None)
    cls = learner_class(name)  # type: ignore[arg-type]
    if name == "exact":
        options.pop("seed", None)  # exact best responses are deterministic
        if options:
            raise TypeError(f"the exact learner takes no options, got {sorted(options)}")
        return cls(game)
    seed = options.pop("seed", 0)
    config = options.pop("config", None) or {}
    if not isinstance(config, Mapping):
        raise TypeError(f"spec['config'] must be a dict of config fields, got {type(config).__name__}: {config!r}")
    return cls(game, seed=seed, **{**config, **options})


def load_learner(game: Game, folder: str | os.PathLike[str]) -> Learner:
    """Rebuild a learner saved with `Learner.save`, state included."""
    data = _read(Path(folder))
    learner = make_learner(game, data["spec"])
    return learner.load(folder)  # type: ignore[no-any-return]


def make_config(cls: type[LearnerConfig], config: LearnerConfig | None, options: dict[str, Any], *,
                owner: str) -> LearnerConfig:
    """`config` (default ``cls()``) with keyword `options` replacing its fields.

    Unknown options raise TypeError listing the valid ones; bad values raise
    ValueError from the config's own checks.
    """
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"config for {owner} must be a {cls.__name__}, got {type(config).__name__}")
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for "
                        f"{owner}; valid options: {', '.join(valid)}")
    if config is None:
        return cls(**options)
    return dataclasses.replace(config, **options) if options else config


def config_to_json(config: LearnerConfig) -> dict[str, Any]:
    """The config as a JSON-able dict (tuples become lists); `make_config` reads it back."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}


# -- the folder ------------------------------------------------------------------
def _torch_save_atomic(obj: Any, path: Path) -> None:
    import torch

    write_atomic(path, lambda fh: torch.save(obj, fh))


def save_learner(learner: Learner, folder: Path) -> Path:
    """Write `learner` into `folder`; see the module doc for the layout."""
    folder.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"warm": {str(p): sd for p, sd in learner._warm.items()}}
    task_json = None
    task = learner.task
    if task is not None:
        state["task"] = {name: module.state_dict() for name, module in learner._modules().items()}
        buffer = learner._buffer()
        if buffer is not None:
            write_npz(folder / "buffer.npz", buffer.state_arrays())
        seats = []
        for seat, mix in enumerate(task.opponents):
            if mix is None:
                seats.append(None)
                continue
            members = []
            for k, policy in enumerate(mix.policies):
                file = f"opponent-{seat}-{k}.npz"
                write_npz(folder / file, policy.arrays())
                members.append({"file": file, "meta": policy.meta()})
            seats.append({"weights": mix.weights.tolist(), "members": members})
        task_json = {**task.to_json(), "opponents": seats, "buffer": buffer is not None}
    _torch_save_atomic(state, folder / "state.pt")
    write_json(folder / "learner.json", {
        "format": FORMAT,
        "spec": learner.spec(),
        "rng": learner.rng.bit_generator.state,
        "tasks_done": learner.tasks_done,
        "last_value": learner.last_value,
        "last_env_steps": learner.last_env_steps,
        "records": [dataclasses.asdict(r) for r in learner.records],
        "task": task_json,
    })
    return folder


def _read(folder: Path) -> dict[str, Any]:
    if not (folder / "learner.json").exists():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved learner (no learner.json)")
    data = read_json(folder / "learner.json")
    if data.get("format") != FORMAT:
        raise ValueError(f"learner folder {str(folder)!r} has format {data.get('format')!r}; this pbmarl reads {FORMAT}")
    return data  # type: ignore[no-any-return]


def load_learner_state(learner: Learner, folder: Path) -> None:
    """Restore into `learner` what `save_learner` wrote (see `Learner.load`)."""
    import torch

    from pbmarl.learners.base import Task

    data = _read(folder)
    spec = data["spec"]
    if spec["name"] != learner.name:
        raise ValueError(f"{str(folder)!r} holds a {spec['name']!r} learner, not {learner.name!r}")
    saved_hidden = tuple(spec["config"]["hidden"])
    if saved_hidden != learner.config.hidden:
        raise ValueError(f"{str(folder)!r} holds networks with hidden={saved_hidden}, "
                         f"but this learner has hidden={learner.config.hidden}")
    state = torch.load(folder / "state.pt", weights_only=True)
    learner._warm = {int(p): sd for p, sd in state["warm"].items()}
    learner.records = [learner.record_class(**r) for r in data["records"]]
    learner.tasks_done = int(data["tasks_done"])
    learner.last_value = float(data["last_value"])
    learner.last_env_steps = int(data["last_env_steps"])
    learner.task = None
    saved = data["task"]
    if saved is not None:
        opponents = [None if s is None else _load_mixture(learner.game, folder, s) for s in saved["opponents"]]
        fields = {k: v for k, v in saved.items() if k not in ("opponents", "buffer")}
        learner.task = Task(**fields, opponents=opponents)
        learner._init_task(learner.task.player, None)  # fresh modules to load into (rng restored below)
        for name, module in learner._modules().items():
            module.load_state_dict(state["task"][name])
        if saved["buffer"]:
            learner._buffer().load_state_arrays(read_npz(folder / "buffer.npz"))
    learner.rng.bit_generator.state = data["rng"]


def _load_mixture(game: Game, folder: Path, seat: dict[str, Any]) -> Mixture:
    policies = [new_policy_from_state(game, read_npz(folder / m["file"]), m["meta"]) for m in seat["members"]]
    return Mixture(policies, np.asarray(seat["weights"], dtype=float))
