"""`XDO`'s iteration record and run folder.

Layout (the same habits as PSRO's, `pbmarl.algorithms.checkpoint`)::

    run.json          options, tau, the records and the solution file (written LAST, atomically)
    population/       the best responses (append-only; members after run.json's sizes are ignored)
    solution-NNNN.npz each player's realisation plan of the restricted-game solution
    learner-NNNN/     the RL oracle's state after iteration NNNN, when it has one (``learner=``)
    history.csv       one row per iteration, for people and pandas
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pbmarl.algorithms.checkpoint import learner_spec, rebuild_learner
from pbmarl.algorithms.driver_io import (
    check_overrides,
    load_learner,
    read_run_json,
    remove_stale,
    save_learner,
    write_history,
)
from pbmarl.algorithms.records import _fmt
from pbmarl.games.registry import game_from_spec, game_spec
from pbmarl.io import ensure_writable_folder, inside, read_npz, write_json, write_npz
from pbmarl.population import Population

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.xdo import XDO

FORMAT = 1
OPTIONS = ("solver", "check_every", "max_inner", "stop_exploitability", "max_iterations")


@dataclass(frozen=True)
class XDORecord:
    """One XDO iteration.

    Attributes:
        iteration: 0 for the initial population, then 1, 2, ...
        sizes: best responses per player.
        nash_conv, exploitability: of the restricted-game solution in the full game (exact).
        restricted_exploitability: of the solution inside the restricted game (<= `tau` unless
            `max_inner` ran out; 0 up to rounding with the LP).
        tau: the tolerance this iteration's restricted game was solved to.
        inner_iterations: CFR+ iterations spent on this restricted game (0 with the LP).
        total_inner_iterations: inner iterations of the run so far.
        restricted_actions: (information state, action) pairs in the restricted game.
        seconds: wall seconds per phase (oracle, solve, measure); wall_time: cumulative.
        new_ids: ids of the best responses added.
        solver: ``"cfr+"`` or ``"lp"``.
        env_steps: environment steps the RL oracle has taken so far (0 with exact best responses).
    """

    iteration: int
    sizes: tuple[int, ...]
    nash_conv: float
    exploitability: float
    restricted_exploitability: float
    tau: float
    inner_iterations: int
    total_inner_iterations: int
    restricted_actions: int
    seconds: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    new_ids: tuple[str, ...] = ()
    solver: str = "cfr+"
    env_steps: int = 0

    def as_row(self) -> dict[str, Any]:
        row = {k: v for k, v in asdict(self).items() if k not in ("seconds", "sizes", "new_ids")}
        row.update({f"size_{p}": n for p, n in enumerate(self.sizes)})
        row.update({f"seconds_{k}": v for k, v in self.seconds.items()})
        row["new_ids"] = list(self.new_ids)
        return row

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes"], data["new_ids"] = list(self.sizes), list(self.new_ids)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> XDORecord:
        return cls(**{**data, "sizes": tuple(data["sizes"]), "new_ids": tuple(data["new_ids"])})

    def __str__(self) -> str:
        return (f"iter {self.iteration:>3} | sizes {self.sizes} | exploitability {_fmt(self.exploitability)} | "
                f"restricted {_fmt(self.restricted_exploitability, 3)} | tau {self.tau:.3g} | "
                f"inner {self.inner_iterations} | "
                + (f"{self.env_steps:,} env steps | " if self.env_steps else "")
                + f"{sum(self.seconds.values()):.3f}s")


def save_xdo(run: XDO, folder: Path) -> Path:
    ensure_writable_folder(folder, what="run folder")
    run.population.save(folder / "population")
    solution = f"solution-{run.iteration:04d}.npz"
    write_npz(folder / solution, {f"plan_{p}": x for p, x in enumerate(run.plans)})
    learner_dir = None
    if run.learner is not None:
        learner_dir = save_learner(run.learner, folder / f"learner-{run.iteration:04d}")
    write_history(folder, run.history)
    write_json(folder / "run.json", {
        "format": FORMAT, "kind": "XDO", "game": game_spec(run.game),
        "options": {name: getattr(run, name) for name in OPTIONS},
        "learner": None if run.learner is None else learner_spec(run.learner), "learner_state": learner_dir,
        "tau": run.tau, "iteration": run.iteration, "sizes": list(run.population.sizes), "solution": solution,
        "wall_time": run._wall, "inner_total": run._inner_total, "env_steps": run._env_steps,
        "records": [r.to_json() for r in run.records],
    })
    remove_stale(folder, ("solution-*.npz", "learner-*"), keep=(solution, learner_dir))
    return folder


def load_xdo(cls: type[XDO], folder: Path, **overrides: Any) -> XDO:
    data = read_run_json(folder, "XDO", format=FORMAT)
    check_overrides(overrides, ("save_dir", "tau", "learner", *OPTIONS))
    game = game_from_spec(data["game"])
    learner = overrides.pop("learner", None)
    if learner is None and data.get("learner") is not None:
        learner = rebuild_learner(game, data["learner"])
    options = {**data["options"], "tau": data["tau"], "save_dir": folder, **overrides}
    run = cls(game, learner=learner, **options)
    if data.get("learner_state") is not None:
        load_learner(run.learner, folder, inside(folder, data["learner_state"], entry="run.json 'learner_state'").name)
    run.population = Population.load(folder / "population", run.game, sizes=data["sizes"])
    P = run.game.num_players
    expect = {f"plan_{p}": ((run.tree.num_sequences(p),), "f") for p in range(P)}
    arrays = read_npz(inside(folder, data["solution"], entry="run.json 'solution'"), expect)
    run.plans = tuple(arrays[f"plan_{p}"] for p in range(P))
    run.records = [XDORecord.from_json(r) for r in data["records"]]
    run._wall, run._inner_total = float(data["wall_time"]), int(data["inner_total"])
    run._env_steps = int(data.get("env_steps", 0))
    return run
