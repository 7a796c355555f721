"""What an RL oracle learner puts in its run folder, and how it is rebuilt: `Learner.state` / `Learner.from_state`.

The folder layout is `pbmarl.runs.folder`'s; this module only says what the learner's state is:

* ``state.json``: the random generator, the records, the life counters, the tasks done, the open
  task (its counters and its opponents' policy metadata), the algorithm's other task state;
* ``arrays.npz``: the replay buffer (``buffer.<field>``), the opponents' and the own task's
  policies (``opponent.<which>.<seat>.<member>.<name>``), array-valued task state (``extra.<key>``);
* ``<name>.pt``: the task's networks and optimiser (``task-<name>``) and the warm starts
  (``warm-<player>-<name>``).

A learner loaded from its folder steps exactly as the saved one would have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.runs.folder import SavedRun, State, refused_as

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.learners.oracles.base import Learner
    from pbmarl.policies.mixture import Mixture

__all__ = ["learner_from_state", "learner_state"]

_KINDS = ("b", "i", "u", "f")


def learner_state(learner: Learner) -> State:
    """The learner's `State` (see the module doc)."""
    from pbmarl.games.registry import game_spec

    arrays: dict[str, np.ndarray] = {}
    modules: dict[str, Mapping[str, Any]] = {}
    for player, dicts in learner._warm.items():
        for name, sd in dicts.items():
            modules[f"warm-{player}-{name}"] = sd
    data: dict[str, Any] = {
        "rng": learner.rng.bit_generator.state, "records": [_jsonable(dataclasses.asdict(r)) for r in learner.records],
        "life": dataclasses.asdict(learner.life), "tasks_done": learner.tasks_done, "last_value": learner.last_value,
        "last_env_steps": learner.last_env_steps, "warm": {str(p): sorted(d) for p, d in learner._warm.items()},
        "opponents": _mixtures(learner.opponents, "own", arrays), "task": None,
    }
    task = learner.task
    if task is not None:
        for name, module in learner._modules().items():
            modules[f"task-{name}"] = module.state_dict()
        buffer = learner._buffer()
        if buffer is not None:
            arrays.update({f"buffer.{k}": np.asarray(v) for k, v in buffer.state_arrays().items()})
        extra_json = {}
        for key, value in learner._task_extra().items():
            if isinstance(value, np.ndarray):
                arrays[f"extra.{key}"] = value
            else:
                extra_json[key] = _jsonable(value)
        data["task"] = {**task.to_json(), "opponents": _mixtures(task.opponents, "task", arrays),
                        "modules": sorted(learner._modules()), "buffer": buffer is not None, "extra": extra_json}
    data["arrays"] = {name: a.dtype.kind for name, a in arrays.items()}
    return State(data=data, arrays=arrays, modules=modules, config=learner.config.to_dict(), seed=learner.seed,
                 game=game_spec(learner.game))


def learner_from_state(cls: type[Learner], saved: SavedRun, **overrides: Any) -> Learner:
    """Rebuild a learner of `cls` from its folder; `overrides`: ``pool=``, or config options to change."""
    from pbmarl.learners.oracles.task import Life, Task

    data = saved.data
    where = f"state.json in {str(saved.state_dir)!r}"
    with refused_as((KeyError, TypeError, ValueError, AttributeError),
                    lambda exc: f"{where} does not describe a {cls.__name__} ({type(exc).__name__}: {exc})"):
        kinds = {str(k): str(v) for k, v in data["arrays"].items()}
        if any(v not in _KINDS for v in kinds.values()):
            raise ValueError(f"array kinds must be among {_KINDS}, got {sorted(set(kinds.values()))}")
        arrays = saved.arrays({k: (None, v) for k, v in kinds.items()}) if kinds else {}
        options = {**saved.config, **{k: v for k, v in overrides.items() if k != "pool"}}
        game = saved.game()
        learner = cls(game, seed=saved.seed, pool=overrides.get("pool"),
                      opponents=_read_mixtures(game, data["opponents"], arrays, "own"), **options)
        learner.records = [learner.record_class(**r) for r in data["records"]]
        learner.life = Life(**data["life"])
        learner.tasks_done, learner.last_value = int(data["tasks_done"]), float(data["last_value"])
        learner.last_env_steps = int(data["last_env_steps"])
        learner._warm = {int(p): {n: saved.module(f"warm-{p}-{n}") for n in names} for p, names in data["warm"].items()}
        saved_task = data["task"]
        if saved_task is not None:
            fields = {k: v for k, v in saved_task.items() if k not in ("opponents", "modules", "buffer", "extra")}
            learner.task = Task(**fields, opponents=_read_mixtures(game, saved_task["opponents"], arrays, "task"))
            learner._init_task(learner.task.player, None)  # fresh modules to load into (the rng is set below)
            modules = {name: saved.module(f"task-{name}") for name in learner._modules()}
            buffer = {k[7:]: v for k, v in arrays.items() if k.startswith("buffer.")} if saved_task["buffer"] else None
            extra = {**saved_task["extra"], **{k[6:]: v for k, v in arrays.items() if k.startswith("extra.")}}
            learner._load_task(modules, buffer, extra)
        learner.rng.bit_generator.state = data["rng"]
    return learner


def _mixtures(mixtures: list[Mixture | None], which: str, arrays: dict[str, np.ndarray]) -> list[Any]:
    """Seat by seat: None, or the mixture's weights and members' metadata (their arrays go into `arrays`)."""
    out: list[Any] = []
    for seat, mix in enumerate(mixtures):
        if mix is None:
            out.append(None)
            continue
        members = []
        for k, policy in enumerate(mix.policies):
            prefix = f"opponent.{which}.{seat}.{k}."
            own = policy.arrays()
            arrays.update({prefix + name: np.asarray(a) for name, a in own.items()})
            members.append({"meta": _jsonable(policy.meta()), "arrays": sorted(own)})
        out.append({"weights": np.asarray(mix.weights, dtype=float).tolist(), "members": members})
    return out


def _read_mixtures(game: Any, seats: list[Any], arrays: dict[str, np.ndarray], which: str) -> list[Any]:
    from pbmarl.policies.base import new_policy_from_state
    from pbmarl.policies.mixture import Mixture

    out: list[Any] = []
    for seat, entry in enumerate(seats):
        if entry is None:
            out.append(None)
            continue
        policies = []
        for k, member in enumerate(entry["members"]):
            prefix = f"opponent.{which}.{seat}.{k}."
            policies.append(new_policy_from_state(game, {n: arrays[prefix + n] for n in member["arrays"]},
                                                  member["meta"]))
        out.append(Mixture(policies, np.asarray(entry["weights"], dtype=float)))
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
