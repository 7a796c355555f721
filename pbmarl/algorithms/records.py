"""The frozen record every outer-loop `step()` returns, and its table form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.fmt import fmt


def _fmt(value: float | None, digits: int = 4) -> str:
    return fmt(value, f".{digits}g")


@dataclass(frozen=True)
class IterationRecord:
    """One iteration of a population-based loop.

    Attributes:
        iteration: 0 for the initial population, then 1, 2, ...
        sizes: population size per player after this iteration.
        meta_strategy: one distribution per player over the population (tuple of tuples).
        nash_conv: NashConv of the meta-strategy mixture in the full game (sum over players of
            best-response gains); None where the game is too large to measure exactly.
        exploitability: ``nash_conv / num_players``.
        meta_nash_conv: NashConv of the meta-strategy inside the empirical (meta) game.
        seconds: wall seconds per phase of this iteration (oracle, evaluate, solve, measure).
        wall_time: cumulative wall seconds of the run.
        env_steps: cumulative environment steps spent by oracles and evaluators.
        new_ids: ids of the policies added this iteration.
        br_values: value each new best response achieved against its opponents.
        solver: the meta-solver's name.
        br_gains: per new policy, its gain over the meta-strategy it answered, read from the
            payoff table (`pbmarl.algorithms.progress.br_gains`): a sampled progress measure.
        br_gain_stderr: the standard error of each gain (0 where the table is exact).
    """

    iteration: int
    sizes: tuple[int, ...]
    meta_strategy: tuple[tuple[float, ...], ...]
    nash_conv: float | None
    exploitability: float | None
    meta_nash_conv: float | None
    seconds: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    env_steps: int = 0
    new_ids: tuple[str, ...] = ()
    br_values: tuple[float, ...] = ()
    solver: str = ""
    br_gains: tuple[float, ...] = ()
    br_gain_stderr: tuple[float, ...] = ()

    def as_row(self) -> dict[str, Any]:
        """A flat dict: one history row."""
        row: dict[str, Any] = {
            "iteration": self.iteration,
            "nash_conv": self.nash_conv,
            "exploitability": self.exploitability,
            "meta_nash_conv": self.meta_nash_conv,
            "wall_time": self.wall_time,
            "env_steps": self.env_steps,
            "solver": self.solver,
        }
        for p, n in enumerate(self.sizes):
            row[f"size_{p}"] = n
        for phase, sec in self.seconds.items():
            row[f"seconds_{phase}"] = sec
        for p, dist in enumerate(self.meta_strategy):
            row[f"sigma_{p}"] = list(dist)
        row["new_ids"] = list(self.new_ids)
        row["br_values"] = list(self.br_values)
        row["br_gain"] = float(sum(self.br_gains)) if self.br_gains else None
        row["br_gain_stderr"] = float(np.sqrt(sum(s * s for s in self.br_gain_stderr))) if self.br_gain_stderr else None
        return row

    def to_json(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration, "sizes": list(self.sizes),
            "meta_strategy": [list(d) for d in self.meta_strategy],
            "nash_conv": self.nash_conv, "exploitability": self.exploitability,
            "meta_nash_conv": self.meta_nash_conv, "seconds": dict(self.seconds),
            "wall_time": self.wall_time, "env_steps": self.env_steps,
            "new_ids": list(self.new_ids), "br_values": list(self.br_values), "solver": self.solver,
            "br_gains": list(self.br_gains), "br_gain_stderr": list(self.br_gain_stderr),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IterationRecord:
        return cls(
            iteration=int(data["iteration"]), sizes=tuple(data["sizes"]),
            meta_strategy=tuple(tuple(float(x) for x in d) for d in data["meta_strategy"]),
            nash_conv=data["nash_conv"], exploitability=data["exploitability"],
            meta_nash_conv=data["meta_nash_conv"], seconds=dict(data["seconds"]),
            wall_time=float(data["wall_time"]), env_steps=int(data["env_steps"]),
            new_ids=tuple(data["new_ids"]), br_values=tuple(data["br_values"]), solver=data.get("solver", ""),
            br_gains=tuple(float(x) for x in data.get("br_gains", ())),
            br_gain_stderr=tuple(float(x) for x in data.get("br_gain_stderr", ())),
        )

    def __str__(self) -> str:
        secs = sum(self.seconds.values())
        return (
            f"iter {self.iteration:>3} | sizes {self.sizes} | NashConv {_fmt(self.nash_conv)} | "
            f"exploitability {_fmt(self.exploitability)} | meta-NashConv {_fmt(self.meta_nash_conv, 3)} | "
            f"{secs:.3f}s"
        )

    def _repr_html_(self) -> str:
        return str(pd.DataFrame([self.as_row()]).set_index("iteration")._repr_html_())


def history_frame(records: list[IterationRecord]) -> pd.DataFrame:
    """Records as a DataFrame indexed by iteration."""
    if not records:
        return pd.DataFrame(columns=["nash_conv", "exploitability", "meta_nash_conv", "wall_time", "env_steps"])
    return pd.DataFrame([r.as_row() for r in records]).set_index("iteration")
