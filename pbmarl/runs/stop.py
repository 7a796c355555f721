"""`Stop`: when `run(until=...)` ends, the first of several conditions reached.

Counts are the run's own cumulative ones, the shared history columns: a run resumed from a
folder, or stepped by hand before, stops at the same place as one run straight through.

Example:
    >>> s = Stop(iterations=3, exploitability=0.1)
    >>> s.reached({"iteration": 2, "exploitability": 0.2})
    ''
    >>> s.reached({"iteration": 3, "exploitability": 0.2})
    'iterations 3'
    >>> s.reached({"iteration": 1, "exploitability": 0.05})
    'exploitability 0.05 <= 0.1'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pbmarl.config import is_int, is_real

__all__ = ["Stop"]

_COUNTS = {"iterations": "iteration", "env_steps": "env_steps", "episodes": "episodes", "seconds": "wall_time"}


@dataclass(frozen=True)
class Stop:
    """Stop a run on the first condition reached (None: that condition is off).

    Attributes:
        iterations: the run's iteration (its step count) reaches this.
        env_steps: cumulative environment steps reach this.
        episodes: cumulative episodes reach this.
        seconds: cumulative wall time (the run's own, across resumes) reaches this.
        exploitability: measured exploitability falls to or below this.
        nash_conv: measured NashConv falls to or below this.
        mean_return: the mean of the record's ``return/<...>`` columns rises to or above this.
    """

    iterations: int | None = None
    env_steps: int | None = None
    episodes: int | None = None
    seconds: float | None = None
    exploitability: float | None = None
    nash_conv: float | None = None
    mean_return: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name in ("iterations", "env_steps", "episodes"):
                if not is_int(value) or value < 0:
                    raise ValueError(f"Stop({f.name}=...) must be a non-negative int or None, got {value!r}")
            elif f.name == "mean_return":
                if not is_real(value):
                    raise ValueError(f"Stop(mean_return=...) must be a finite number or None, got {value!r}")
            elif not is_real(value) or value < 0:
                raise ValueError(f"Stop({f.name}=...) must be a non-negative number or None, got {value!r}")
        if all(getattr(self, f.name) is None for f in fields(self)):
            raise ValueError("Stop() needs at least one condition: iterations, env_steps, episodes, seconds, "
                             "exploitability, nash_conv or mean_return")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Stop:
        """A Stop from a dict (a YAML or JSON spec); an unknown key is refused with the accepted ones."""
        from pbmarl.config import did_you_mean

        names = [f.name for f in fields(cls)]
        for key in data:
            if key not in names:
                raise ValueError(f"unknown stop condition {key!r}{did_you_mean(key, names)} "
                                 f"Accepted: {', '.join(names)}")
        return cls(**data)

    def reached(self, row: Mapping[str, Any]) -> str:
        """Which condition a history row (a record's `as_row()`) meets, as text; ``""`` if none."""
        for name, column in _COUNTS.items():
            limit = getattr(self, name)
            if limit is not None and _num(row.get(column)) >= limit:
                return f"{name} {limit}"
        for name in ("exploitability", "nash_conv"):
            limit = getattr(self, name)
            value = _num(row.get(name), default=math.inf)
            if limit is not None and value <= limit:
                return f"{name} {value:.4g} <= {limit}"
        if self.mean_return is not None:
            returns = [_num(v, default=math.nan) for k, v in row.items() if str(k).startswith("return/")]
            returns = [r for r in returns if not math.isnan(r)]
            if returns and sum(returns) / len(returns) >= self.mean_return:
                return f"mean_return {sum(returns) / len(returns):.4g} >= {self.mean_return}"
        return ""


def _num(value: Any, default: float = -math.inf) -> float:
    if value is None:
        return default
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(out) else out
