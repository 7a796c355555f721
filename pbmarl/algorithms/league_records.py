"""The frozen records a `League` step returns, and their table forms."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from pbmarl.fmt import fmt


@dataclass(frozen=True)
class MatchRecord:
    """One match of a league round."""

    agent: str
    opponent: str
    branch: str
    """Which rule drew the opponent: ``pfsp``, ``selfplay``, ``verification_exploiters``, ..."""
    win_rate: float
    """The agent's win rate in this match, after its training (both seatings)."""
    steps: int
    """Environment steps the agent's training took (0 for the exact oracle)."""


@dataclass(frozen=True)
class LeagueRecord:
    """One league round: its matches, the snapshots taken, the agents reset."""

    iteration: int
    matches: tuple[MatchRecord, ...]
    snapshots: tuple[str, ...]
    resets: tuple[str, ...]
    league_size: int
    exploitability: float | None
    """Exploitability of the main agent's policy (`League.main_policy`), where measured exactly."""
    main_strategy: tuple[tuple[float, ...], ...] = ()
    """Per seat, the main policy's weights over the main agent's snapshots."""
    seconds: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    env_steps: int = 0

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"iteration": self.iteration, "exploitability": self.exploitability,
                               "league_size": self.league_size, "snapshots": list(self.snapshots),
                               "resets": list(self.resets), "wall_time": self.wall_time, "env_steps": self.env_steps}
        for m in self.matches:
            row[f"opponent[{m.agent}]"] = m.opponent
            row[f"win_rate[{m.agent}]"] = m.win_rate
        for phase, sec in self.seconds.items():
            row[f"seconds_{phase}"] = sec
        return row

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["matches"] = [asdict(m) for m in self.matches]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LeagueRecord:
        return cls(iteration=int(data["iteration"]), matches=tuple(MatchRecord(**m) for m in data["matches"]),
                   snapshots=tuple(data["snapshots"]), resets=tuple(data["resets"]),
                   league_size=int(data["league_size"]), exploitability=data["exploitability"],
                   main_strategy=tuple(tuple(float(x) for x in d) for d in data["main_strategy"]),
                   seconds=dict(data["seconds"]), wall_time=float(data["wall_time"]), env_steps=int(data["env_steps"]))

    def __str__(self) -> str:
        plays = ", ".join(f"{m.agent}->{m.opponent} ({m.branch}) {fmt(m.win_rate, '.3f')}" for m in self.matches)
        snaps = f" | snapshots {', '.join(self.snapshots)}" if self.snapshots else ""
        resets = f" | reset {', '.join(self.resets)}" if self.resets else ""
        expl = f" | exploitability {fmt(self.exploitability, '.4g')}" if self.exploitability is not None else ""
        return f"round {self.iteration:>3} | league {self.league_size}{expl} | {plays}{snaps}{resets}"


def league_frame(records: list[LeagueRecord]) -> pd.DataFrame:
    if not records:
        return pd.DataFrame(columns=["exploitability", "league_size", "wall_time", "env_steps"])
    return pd.DataFrame([r.as_row() for r in records]).set_index("iteration")


def matches_frame(records: list[LeagueRecord]) -> pd.DataFrame:
    rows = [{"iteration": r.iteration, **asdict(m)} for r in records for m in r.matches]
    return pd.DataFrame(rows, columns=["iteration", "agent", "opponent", "branch", "win_rate", "steps"])
