"""The grid of an experiment: games x methods x seeds, checked whole before any trial starts.

`Grid` is the JSON-ready description an experiment folder keeps (``experiment.json``) and a
YAML spec holds; `Grid.trials` expands it into `Trial` s, one run each.

Example:
    >>> from pbmarl.experiments.spec import spec
    >>> g = Grid("demo", games=("kuhn_poker",), runs=(spec("PSRO", solver="nash"),), seeds=(0, 1))
    >>> [t.key for t in g.trials]
    ['0000-kuhn_poker-PSRO_solver_nash-s0', '0001-kuhn_poker-PSRO_solver_nash-s1']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pbmarl.config import check_seed, did_you_mean
from pbmarl.experiments.spec import RunSpec
from pbmarl.runs.stop import Stop

__all__ = ["LOGGERS", "Grid", "Trial"]

#: what ``loggers=`` accepts in an experiment (CSV, the history, is always written)
LOGGERS = ("tensorboard", "mlflow", "wandb")
_FIELDS = ("name", "game", "run", "seeds", "stop", "resources", "max_failures", "loggers", "save_seconds")


@dataclass(frozen=True)
class Trial:
    """One run of the grid: what a Tune trial builds and how the tables name it."""

    index: int
    game: str
    spec: RunSpec
    seed: int

    @property
    def method(self) -> str:
        return self.spec.label

    @property
    def key(self) -> str:
        """The trial's folder name: index, game, method and seed, filesystem-safe."""
        return f"{self.index:04d}-{_slug(self.game)}-{_slug(self.method)}-s{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "key": self.key, "game": self.game, "method": self.method,
                "spec": self.spec.to_dict(), "seed": self.seed}


@dataclass(frozen=True)
class Grid:
    """Games x methods x seeds, a stop condition and the resources of each trial."""

    name: str
    games: tuple[str, ...]
    runs: tuple[RunSpec, ...]
    seeds: tuple[int, ...]
    stop: Stop | None = None
    resources: Mapping[str, float] = field(default_factory=lambda: {"cpu": 1})
    max_failures: int = 1
    loggers: tuple[str, ...] = ()
    save_seconds: float = 60.0

    @property
    def trials(self) -> list[Trial]:
        out, i = [], 0
        for game in self.games:
            for run in self.runs:
                for seed in self.seeds:
                    out.append(Trial(i, game, run, seed))
                    i += 1
        return out

    # -- checks --------------------------------------------------------------------------------------------
    def check(self, *, games: bool = True) -> None:
        """Refuse a bad grid before any trial starts; each message names the entry and what is accepted."""
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.name):
            raise ValueError(f"experiment name must be letters, digits, '.', '_' or '-' (a folder name), "
                             f"got {self.name!r}")
        for what, entries in (("game", self.games), ("run", self.runs), ("seeds", self.seeds)):
            if not entries:
                raise ValueError(f"empty grid: {what}= has no entries; give at least one "
                                 f"{'seed' if what == 'seeds' else what}")
        for i, game in enumerate(self.games):
            if not isinstance(game, str) or not game:
                raise ValueError(f"game entry {i} must be a game name such as 'leduc_poker' (see pb.load_game), "
                                 f"got {game!r}")
            if games:
                _check_game(i, game)
        for i, run in enumerate(self.runs):
            if not isinstance(run, RunSpec):
                raise TypeError(f"run entry {i} must be pb.spec(RunType, **options), got {type(run).__name__}: "
                                f"{run!r}")
            run.check()
        for i, seed in enumerate(self.seeds):
            check_seed(seed, name=f"seeds entry {i}")
        _no_duplicates("game", list(self.games))
        _no_duplicates("seeds", list(self.seeds))
        _no_duplicates("run", [r.label for r in self.runs], same="label")
        _no_duplicates("run", [repr(r.to_dict() | {"name": None}) for r in self.runs], labels=[r.label for r in self.runs])
        keys = [t.key for t in self.trials]
        _no_duplicates("trial", keys)
        for name in self.loggers:
            if name not in LOGGERS:
                raise ValueError(f"unknown logger {name!r}{did_you_mean(name, LOGGERS)} Accepted loggers: "
                                 f"{', '.join(LOGGERS)} (CSV, the history, is always written)")
        bad = [k for k in self.resources if k not in ("cpu", "gpu")]
        if bad or not all(isinstance(v, (int, float)) and v >= 0 for v in self.resources.values()):
            raise ValueError(f"resources must be {{'cpu': n, 'gpu': m}} with non-negative numbers, got "
                             f"{dict(self.resources)!r}")
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) or self.max_failures < 0:
            raise ValueError(f"max_failures must be a non-negative int, got {self.max_failures!r}")

    # -- data ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, in the YAML spec's own keys (and the expanded trials, for people reading the folder)."""
        stop = None if self.stop is None else {k: v for k, v in vars(self.stop).items() if v is not None}
        return {"name": self.name, "game": list(self.games), "run": [r.to_dict() for r in self.runs],
                "seeds": list(self.seeds), "stop": stop, "resources": dict(self.resources),
                "max_failures": self.max_failures, "loggers": list(self.loggers), "save_seconds": self.save_seconds,
                "trials": [t.to_dict() for t in self.trials]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grid:
        """From a YAML or JSON spec; an unknown key is refused with the accepted ones."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an experiment spec must be a mapping with keys {', '.join(_FIELDS)}, got {data!r}")
        for key in data:
            if key not in _FIELDS and key != "trials":
                raise ValueError(f"unknown experiment key {key!r}{did_you_mean(key, _FIELDS)} Accepted keys: "
                                 f"{', '.join(_FIELDS)}")
        if "name" not in data:
            raise ValueError("an experiment spec needs a 'name'")
        runs = data.get("run") or []
        if isinstance(runs, Mapping):
            runs = [runs]
        return cls(
            name=data["name"], games=_tuple(data.get("game")),
            runs=tuple(r if isinstance(r, RunSpec) else RunSpec.from_dict(r) for r in runs),
            seeds=_seeds(data.get("seeds", (0,))), stop=as_stop(data.get("stop")),
            resources=dict(data.get("resources") or {"cpu": 1}), max_failures=data.get("max_failures", 1),
            loggers=_tuple(data.get("loggers")), save_seconds=float(data.get("save_seconds", 60.0)))


def as_stop(stop: Any) -> Stop | None:
    """A `Stop` from a Stop, a dict (unknown keys refused) or None."""
    if stop is None or isinstance(stop, Stop):
        return stop
    if isinstance(stop, Mapping):
        return Stop.from_dict(stop)
    raise TypeError(f"stop must be a pb.Stop or a dict of its conditions, got {type(stop).__name__}: {stop!r}")


def _tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _seeds(value: Any) -> tuple[int, ...]:
    if isinstance(value, Mapping) and set(value) <= {"start", "stop"}:  # YAML: seeds: {start: 0, stop: 5}
        return tuple(range(int(value.get("start", 0)), int(value["stop"])))
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return tuple(value) if isinstance(value, Iterable) else (value,)


def _check_game(i: int, game: str) -> None:
    from pbmarl.games.registry import load_game

    try:
        load_game(game)
    except (ValueError, KeyError, TypeError, ImportError) as exc:
        raise ValueError(f"game entry {i} {game!r}: {exc}") from None


def _no_duplicates(what: str, values: list[Any], *, same: str = "", labels: list[str] | None = None) -> None:
    seen: dict[Any, int] = {}
    for i, value in enumerate(values):
        if value in seen:
            shown = labels[i] if labels else value
            extra = f" (the same {same}; give one of them name=...)" if same else ""
            raise ValueError(f"duplicate trial: {what} entries {seen[value]} and {i} are both {shown!r}{extra}")
        seen[value] = i


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_")[:48] or "x"
