"""`RunSpec`: one method of an experiment, a run type and its options, as JSON-ready data.

A spec is what a trial builds its run from, in a Ray worker, from JSON: so its options are
plain values (numbers, strings, lists, dicts) and nested specs for parts (a MARL run's group
learners). `check` refuses an unknown type or option, and a bad value, before any trial starts.

Example:
    >>> s = spec("PSRO", solver="nash")
    >>> s.label
    'PSRO(solver=nash)'
    >>> spec("PSRO", solvr="nash").check()
    Traceback (most recent call last):
    ...
    ValueError: run PSRO(solvr=nash): unknown option 'solvr' for PSRO; did you mean 'solver'? Accepted options: ...
    >>> RunSpec.from_dict(s.to_dict()) == s
    True
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pbmarl.config import build_config, did_you_mean
from pbmarl.runs.registry import RUN_TYPES, run_class

__all__ = ["PART_TYPES", "RunSpec", "spec"]

#: learners that are parts of a run (a MARL run's groups), by their name in `pbmarl.learners`
PART_TYPES: tuple[str, ...] = ("MAPPO", "IPPO", "RMAPPO", "QMIX", "IQL", "MADDPG", "Independent")

#: constructor arguments every run has, which a spec sets itself
_RESERVED = ("self", "game", "seed", "config", "options")


@dataclass(frozen=True)
class RunSpec:
    """A run type and its options; `build` makes the run of one trial.

    Attributes:
        type: a registered run type (``"PSRO"``, ``"SAC"``, ``"MARL"``, ...), or for a part a group learner.
        options: keyword options of the type's constructor (its config fields and named parts); a nested
            `RunSpec` (or a dict with ``type``) is built as a part with the trial's seed.
        name: the method's label in tables and plots (default: the type and its options).
    """

    type: str
    options: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None

    def __post_init__(self) -> None:
        cls = self.type if isinstance(self.type, str) else getattr(self.type, "__name__", self.type)
        object.__setattr__(self, "type", cls)
        object.__setattr__(self, "options", {k: _as_part(v) for k, v in dict(self.options).items()})

    # -- naming ------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """The method's name: `name`, or ``Type(option=value, ...)``."""
        if self.name:
            return self.name
        if not self.options:
            return str(self.type)
        return f"{self.type}({', '.join(f'{k}={_short(v)}' for k, v in sorted(self.options.items()))})"

    # -- data -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"type": ..., "name": ..., "options": {...}}`` (nested specs as dicts)."""
        out: dict[str, Any] = {"type": self.type, "options": {k: _plain(v) for k, v in self.options.items()}}
        if self.name:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        """From `to_dict`'s form, or a YAML entry ``{type: PSRO, name: ..., solver: nash}`` (options inline)."""
        if not isinstance(data, Mapping) or "type" not in data:
            raise ValueError(f"a run entry needs a 'type' (a run type such as PSRO or SAC), got {data!r}")
        rest = {k: v for k, v in data.items() if k not in ("type", "name", "options")}
        options = dict(data.get("options") or {}) | rest
        return cls(str(data["type"]), options, data.get("name"))

    # -- checking and building --------------------------------------------------------------------
    def check(self, *, part: bool = False) -> None:
        """Refuse an unknown type or option, or a value the type's config rejects (ValueError naming this spec)."""
        where = f"{'part' if part else 'run'} {self.label}"
        try:
            cls = _part_class(self.type) if part else run_class(self.type)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        config_cls = config_class(cls)
        fields = [f.name for f in dataclasses.fields(config_cls)] if config_cls is not None else []
        named = [p for p in inspect.signature(vars(_owner(cls, '__init__'))['__init__']).parameters if p not in _RESERVED]
        accepted = list(dict.fromkeys(named + fields))
        for key, value in self.options.items():
            if key not in accepted:
                raise ValueError(f"{where}: unknown option {key!r} for {self.type}{did_you_mean(key, accepted)} "
                                 f"Accepted options: {', '.join(accepted)}")
            _check_plain(where, key, value)
            if key in named:  # a part argument (PSRO's solver=); a config field (XDO's solver) is its config's to check
                _check_named_part(where, key, value)
            for sub in _parts(value):
                sub.check(part=True)
        if config_cls is not None:
            values = {k: _tuples(v) for k, v in self.options.items() if k in fields}
            try:
                build_config(config_cls, None, values, owner=str(self.type))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {exc}") from None

    def build(self, game: Any, *, seed: int) -> Any:
        """The run of one trial: ``Type(game, seed=seed, **options)``, parts built with the same seed."""
        cls = run_class(self.type)
        return cls(game, seed=seed, **{k: _build_value(v, seed) for k, v in self.options.items()})


def spec(run_type: Any, *, name: str | None = None, **options: Any) -> RunSpec:
    """One method of an experiment: ``pb.spec(pb.PSRO, solver="nash")``; see `RunSpec`.

    Args:
        run_type: a run class (``pb.PSRO``) or its name; for a part (a MARL group), a group learner (``pb.MAPPO``).
        name: the label in tables and plots (default ``Type(option=value, ...)``).
        options: the run's keyword options, plain values; parts as nested ``pb.spec(...)``.
    """
    return RunSpec(run_type, options, name)


def config_class(cls: type) -> type | None:
    """The config dataclass a run or learner class builds its options into (its ``config=`` type)."""
    declared = getattr(cls, "config_class", None)
    if isinstance(declared, type) and dataclasses.is_dataclass(declared):
        return declared
    try:
        hint = typing.get_type_hints(vars(_owner(cls, '__init__'))['__init__']).get("config")
    except Exception:  # noqa: BLE001 - an unresolvable annotation: only the constructor's names are checked
        return None
    for arg in typing.get_args(hint) or (hint,):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def _owner(cls: type, name: str) -> type:
    """The class along `cls`'s MRO that defines `name` itself."""
    return next(c for c in cls.__mro__ if name in vars(c))


def _part_class(name: str) -> type:
    if name in PART_TYPES:
        import pbmarl.learners

        cls: type = getattr(pbmarl.learners, name)
        return cls
    raise ValueError(f"unknown part type {name!r}{did_you_mean(name, PART_TYPES)} Known part types: "
                     f"{', '.join(PART_TYPES)}")


def _as_part(value: Any) -> Any:
    if isinstance(value, RunSpec):
        return value
    if isinstance(value, Mapping):
        if "type" in value and isinstance(value["type"], str) and value["type"] in PART_TYPES + tuple(RUN_TYPES):
            return RunSpec.from_dict(value)
        return {k: _as_part(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_as_part(v) for v in value]
    if isinstance(value, list):
        return [_as_part(v) for v in value]
    return value


def _parts(value: Any) -> list[RunSpec]:
    if isinstance(value, RunSpec):
        return [value]
    if isinstance(value, Mapping):
        return [p for v in value.values() for p in _parts(v)]
    if isinstance(value, list):
        return [p for v in value for p in _parts(v)]
    return []


def _plain(value: Any) -> Any:
    if isinstance(value, RunSpec):  # a part, inline: {type: MAPPO, hidden: [64]}
        data = value.to_dict()
        return data | data.pop("options")
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _check_plain(where: str, key: str, value: Any) -> None:
    """Options travel to the trials as JSON: objects (a Game, a policy, a solver) cannot."""
    if isinstance(value, RunSpec):
        return
    if isinstance(value, Mapping):
        for v in value.values():
            _check_plain(where, key, v)
        return
    if isinstance(value, list):
        for v in value:
            _check_plain(where, key, v)
        return
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"{where}: option {key!r} must be plain data (a number, string, list or dict, or a "
                         f"pb.spec(...) for a part), got {type(value).__name__}: {value!r}")


def _check_named_part(where: str, key: str, value: Any) -> None:
    """A part named by text (a meta-solver, an oracle learner) is checked by the factory that will build it."""
    if not isinstance(value, str):
        return
    try:
        if key == "solver":
            from pbmarl.solvers import MetaSolver

            MetaSolver(value)
        elif key == "learner":
            from pbmarl.learners.common.registry import LEARNERS

            if value not in LEARNERS:
                raise ValueError(f"unknown learner {value!r}{did_you_mean(value, list(LEARNERS))} "
                                 f"Accepted: {', '.join(LEARNERS)}")
        elif key == "evaluator" and value not in ("exact", "rollout"):
            raise ValueError(f"unknown evaluator {value!r}{did_you_mean(value, ['exact', 'rollout'])} "
                             "Accepted: exact, rollout")
    except ValueError as exc:
        raise ValueError(f"{where}: option {key!r}: {exc}") from None


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _build_value(value: Any, seed: int) -> Any:
    if isinstance(value, RunSpec):
        cls = _part_class(value.type)
        return cls(seed=seed, **{k: _build_value(v, seed) for k, v in value.options.items()})
    if isinstance(value, Mapping):
        return {k: _build_value(v, seed) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_build_value(v, seed) for v in value)
    return value


def _short(value: Any) -> str:
    if isinstance(value, RunSpec):
        return value.label
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(_plain(value))
    except TypeError:  # not plain data: `check` refuses it, naming it
        return getattr(value, "__name__", type(value).__name__)
