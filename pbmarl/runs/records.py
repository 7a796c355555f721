"""What every run's record and history share: the shared columns, in one order.

Every run's `step()` returns a frozen record whose `as_row()` starts with the shared
columns, with the same names and meanings in every run:

* ``iteration``: 1, 2, ... (0 for an initial population);
* ``env_steps``, ``episodes``: cumulative over the run;
* ``wall_time``: cumulative seconds of the run's own stepping;
* then, where they apply: ``exploitability``, ``nash_conv``, ``return/<player or group>``,
  ``loss/<name>``, ``time/<phase>``;

and then the run's own columns. `history_frame` makes the DataFrame, indexed by ``iteration``.

Example:
    >>> row = shared_row(iteration=1, env_steps=10, episodes=2, wall_time=0.5,
    ...                  returns={0: 1.0}, losses={"policy": 0.2}, times={"collect": 0.1}, extra={"lr": 1e-3})
    >>> list(row)
    ['iteration', 'env_steps', 'episodes', 'wall_time', 'return/0', 'loss/policy', 'time/collect', 'lr']
    >>> list(order_columns(["lr", "return/0", "wall_time", "iteration", "env_steps"]))
    ['iteration', 'env_steps', 'wall_time', 'return/0', 'lr']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pandas as pd

__all__ = ["SHARED", "MeasuredRecord", "Record", "RecordLike", "Records", "history_frame", "order_columns",
           "shared_row"]

#: the shared columns, always present, in this order
SHARED = ("iteration", "env_steps", "episodes", "wall_time")
#: columns present where they apply, right after the shared ones
_MEASURES = ("exploitability", "nash_conv")
_PREFIXES = ("return/", "loss/", "time/")


def shared_row(*, iteration: int, env_steps: int, episodes: int, wall_time: float,
               exploitability: float | None = None, nash_conv: float | None = None, measured: bool = False,
               returns: Mapping[Any, float] | None = None, losses: Mapping[str, float] | None = None,
               times: Mapping[str, float] | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One history row: the shared columns first, then the measures (when `measured` or given), then `extra`."""
    row: dict[str, Any] = {"iteration": int(iteration), "env_steps": int(env_steps), "episodes": int(episodes),
                           "wall_time": float(wall_time)}
    if measured or exploitability is not None or nash_conv is not None:
        row["exploitability"] = exploitability
        row["nash_conv"] = nash_conv
    for key, value in (returns or {}).items():
        row[f"return/{key}"] = value
    for key, value in (losses or {}).items():
        row[f"loss/{key}"] = value
    for key, value in (times or {}).items():
        row[f"time/{key}"] = value
    row.update(extra or {})
    return row


def order_columns(columns: Iterable[str]) -> list[str]:
    """`columns` in the shared order: shared ones, measures, returns, losses, times, then the rest as given."""
    cols = list(dict.fromkeys(columns))

    def rank(col: str) -> tuple[int, int]:
        if col in SHARED:
            return 0, SHARED.index(col)
        if col in _MEASURES:
            return 1, _MEASURES.index(col)
        for i, prefix in enumerate(_PREFIXES):
            if col.startswith(prefix):
                return 2 + i, cols.index(col)
        return 9, cols.index(col)

    return sorted(cols, key=rank)


@runtime_checkable
class RecordLike(Protocol):
    """What a run's `step()` returns: a frozen record that flattens into one history row."""

    @property
    def iteration(self) -> int: ...

    def as_row(self) -> dict[str, Any]: ...


class Record:
    """Mixin for a run's frozen record dataclass: ``record["return/0"]`` reads a history column."""

    def as_row(self) -> dict[str, Any]:  # pragma: no cover - every record defines it
        raise NotImplementedError

    def __getitem__(self, column: str) -> Any:
        row = self.as_row()
        if column not in row:
            raise KeyError(f"{type(self).__name__} has no column {column!r}; it has {', '.join(map(str, row))}")
        return row[column]

    def _repr_html_(self) -> str:
        return str(pd.DataFrame([self.as_row()]).set_index("iteration")._repr_html_())


@dataclass(frozen=True)
class MeasuredRecord(Record):
    """A record whose fields start with the shared columns and the exact measures, in the history's order.

    A run's record extends it with its own fields (after these, so they may have defaults).

    Attributes:
        iteration: 1, 2, ... (0 for an initial population).
        env_steps, episodes: cumulative over the run.
        wall_time: cumulative seconds of the run's own stepping.
        exploitability, nash_conv: where measured exactly, else None.
    """

    iteration: int
    env_steps: int
    episodes: int
    wall_time: float
    exploitability: float | None
    nash_conv: float | None

    def measured_row(self, **parts: Any) -> dict[str, Any]:
        """`shared_row` of these fields and `parts` (``returns``, ``losses``, ``times``, ``extra``)."""
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, exploitability=self.exploitability, nash_conv=self.nash_conv,
                          **parts)


def history_frame(records: Sequence[RecordLike], columns: Sequence[str] = ()) -> pd.DataFrame:
    """Records as a DataFrame indexed by ``iteration``, columns in the shared order.

    `columns` names the columns an empty history still shows (the shared ones always).
    """
    if not records:
        cols = order_columns(list(SHARED) + list(columns))
        return pd.DataFrame(columns=cols[1:], index=pd.Index([], name="iteration"))
    frame = pd.DataFrame([r.as_row() for r in records])
    frame = frame[order_columns(frame.columns)]
    return frame.set_index("iteration")


class Records(list[Any]):
    """The records one `run(...)` call produced: a list, shown briefly; `frame()` is their table."""

    stopped_by: str = ""

    def frame(self) -> pd.DataFrame:
        """These records as a history DataFrame."""
        return history_frame(self)

    def __repr__(self) -> str:
        if not self:
            return "Records(0 steps)"
        why = f", stopped by {self.stopped_by}" if self.stopped_by else ""
        first, last = self[0], self[-1]
        return (f"Records({len(self)} steps, iterations {getattr(first, 'iteration', '?')}-"
                f"{getattr(last, 'iteration', '?')}{why}; last: {last})")

    def _repr_html_(self) -> str:
        return str(self.frame()._repr_html_())
