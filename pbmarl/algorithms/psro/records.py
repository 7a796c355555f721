"""The frozen record a PSRO-family `step()` returns (PSRO, SelfPlay, FictitiousPlay, P2SRO).

Its history row starts with the shared columns of every run (`pbmarl.runs.records`):
``iteration``, ``env_steps``, ``episodes``, ``wall_time``, ``exploitability``, ``nash_conv``,
``time/<phase>``; then PSRO's own: ``meta_nash_conv``, ``size_<p>``, ``sigma_<p>``, ``solver``,
``new_ids``, ``br_values``, ``br_gain``, ``br_gain_stderr``.

Example:
    >>> r = IterationRecord(iteration=1, sizes=(2, 2), meta_strategy=((0.5, 0.5), (1.0, 0.0)), nash_conv=0.5,
    ...                     exploitability=0.25, meta_nash_conv=0.0, times={"oracle": 0.1})
    >>> list(r.as_row())[:8]
    ['iteration', 'env_steps', 'episodes', 'wall_time', 'exploitability', 'nash_conv', 'time/oracle', 'meta_nash_conv']
    >>> IterationRecord.from_json(r.to_json()) == r
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pbmarl.fmt import fmt
from pbmarl.runs.records import Record, shared_row


def _fmt(value: float | None, digits: int = 4) -> str:
    return fmt(value, f".{digits}g")


@dataclass(frozen=True)
class IterationRecord(Record):
    """One iteration of a PSRO-family run.

    Attributes:
        iteration: 0 for the initial population, then 1, 2, ...
        sizes: population size per player after this iteration.
        meta_strategy: one distribution per player over the population (tuple of tuples).
        nash_conv: NashConv of the meta-strategy mixture in the full game (sum over players of
            best-response gains); None where the game is too large to measure exactly.
        exploitability: ``nash_conv / num_players``.
        meta_nash_conv: NashConv of the meta-strategy inside the empirical (meta) game.
        times: wall seconds per phase of this iteration (oracle, evaluate, solve, measure).
        wall_time: cumulative wall seconds of the run.
        env_steps: cumulative environment steps spent by oracles and evaluators.
        episodes: cumulative episodes the sampling evaluator played (0 when the table is exact).
        new_ids: ids of the policies added this iteration.
        br_values: value each new best response achieved against its opponents.
        solver: the meta-solver's name.
        br_gains: per new policy, its gain over the meta-strategy it answered, read from the
            payoff table (`pbmarl.algorithms.psro.gains.br_gains`): a sampled progress measure.
        br_gain_stderr: the standard error of each gain (0 where the table is exact).
    """

    iteration: int
    sizes: tuple[int, ...]
    meta_strategy: tuple[tuple[float, ...], ...]
    nash_conv: float | None
    exploitability: float | None
    meta_nash_conv: float | None
    times: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    env_steps: int = 0
    episodes: int = 0
    new_ids: tuple[str, ...] = ()
    br_values: tuple[float, ...] = ()
    solver: str = ""
    br_gains: tuple[float, ...] = ()
    br_gain_stderr: tuple[float, ...] = ()

    @property
    def br_gain(self) -> float | None:
        """The summed gain of this iteration's best responses (None at iteration 0)."""
        return float(sum(self.br_gains)) if self.br_gains else None

    def as_row(self) -> dict[str, Any]:
        """A flat dict: one history row (the shared columns first)."""
        extra: dict[str, Any] = {"meta_nash_conv": self.meta_nash_conv}
        extra.update({f"size_{p}": n for p, n in enumerate(self.sizes)})
        extra.update({f"sigma_{p}": list(dist) for p, dist in enumerate(self.meta_strategy)})
        extra["solver"] = self.solver
        extra["new_ids"] = list(self.new_ids)
        extra["br_values"] = list(self.br_values)
        extra["br_gain"] = self.br_gain
        extra["br_gain_stderr"] = float(np.sqrt(sum(s * s for s in self.br_gain_stderr))) \
            if self.br_gain_stderr else None
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, exploitability=self.exploitability, nash_conv=self.nash_conv,
                          measured=True, times=self.times, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data (`from_json` reads it back)."""
        return {
            "iteration": self.iteration, "sizes": list(self.sizes),
            "meta_strategy": [list(d) for d in self.meta_strategy],
            "nash_conv": self.nash_conv, "exploitability": self.exploitability,
            "meta_nash_conv": self.meta_nash_conv, "times": dict(self.times),
            "wall_time": self.wall_time, "env_steps": self.env_steps, "episodes": self.episodes,
            "new_ids": list(self.new_ids), "br_values": list(self.br_values), "solver": self.solver,
            "br_gains": list(self.br_gains), "br_gain_stderr": list(self.br_gain_stderr),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IterationRecord:
        """A record from `to_json`'s data; a malformed entry raises KeyError, TypeError or ValueError."""
        return cls(
            iteration=int(data["iteration"]), sizes=tuple(int(n) for n in data["sizes"]),
            meta_strategy=tuple(tuple(float(x) for x in d) for d in data["meta_strategy"]),
            nash_conv=_opt_float(data["nash_conv"]), exploitability=_opt_float(data["exploitability"]),
            meta_nash_conv=_opt_float(data["meta_nash_conv"]),
            times={str(k): float(v) for k, v in dict(data["times"]).items()},
            wall_time=float(data["wall_time"]), env_steps=int(data["env_steps"]), episodes=int(data["episodes"]),
            new_ids=tuple(str(i) for i in data["new_ids"]), br_values=tuple(float(v) for v in data["br_values"]),
            solver=str(data["solver"]), br_gains=tuple(float(x) for x in data["br_gains"]),
            br_gain_stderr=tuple(float(x) for x in data["br_gain_stderr"]),
        )

    def __str__(self) -> str:
        secs = sum(self.times.values())
        return (
            f"iter {self.iteration:>3} | sizes {self.sizes} | NashConv {_fmt(self.nash_conv)} | "
            f"exploitability {_fmt(self.exploitability)} | meta-NashConv {_fmt(self.meta_nash_conv, 3)} | "
            f"{secs:.3f}s"
        )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)
