"""Frozen records returned by `RolloutPool` calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True, eq=False)
class EvalResult:
    """Sampled returns of one profile: what every run's `evaluate` and `RolloutPool.evaluate` return.

    Attributes:
        mean: mean episode return, a Series indexed by player (0, 1, ...) or group name.
        stderr: the standard error of each mean, the same index (NaN with fewer than two episodes).
        episodes: episodes played.
        steps: env decision steps taken (all seats).
        seconds: wall-clock time of the call.
        returns: ``[E, P]`` per-episode returns, when asked for (``keep_returns=True``).
        lengths: ``[E]`` per-episode decision steps, when asked for.

    Example:
        >>> r = EvalResult(np.array([1.0, -1.0]), np.array([0.1, 0.1]), episodes=10, steps=40)
        >>> float(r.mean[0]), list(r.mean.index)
        (1.0, [0, 1])
        >>> r.to_frame()["mean"].tolist()
        [1.0, -1.0]
    """

    mean: pd.Series
    stderr: pd.Series
    episodes: int
    steps: int
    seconds: float = 0.0
    returns: np.ndarray | None = None
    lengths: np.ndarray | None = None

    def __post_init__(self) -> None:
        mean = self.mean if isinstance(self.mean, pd.Series) else pd.Series(
            np.asarray(self.mean, dtype=float), index=pd.RangeIndex(np.size(self.mean), name="player"), name="mean")
        stderr = self.stderr if isinstance(self.stderr, pd.Series) else pd.Series(
            np.asarray(self.stderr, dtype=float), index=mean.index, name="stderr")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "stderr", stderr)

    @classmethod
    def from_returns(cls, returns: np.ndarray, lengths: np.ndarray, steps: int, seconds: float, *, keep: bool,
                     index: Sequence[Any] | None = None) -> EvalResult:
        """From ``[E, P]`` per-episode returns; `index` names the columns (default the players 0..P-1)."""
        E = len(returns)
        mean = returns.mean(axis=0)
        stderr = returns.std(axis=0, ddof=1) / np.sqrt(E) if E >= 2 else np.full(returns.shape[1], np.nan)
        idx = pd.RangeIndex(returns.shape[1], name="player") if index is None else pd.Index(list(index), name="group")
        return cls(pd.Series(mean, index=idx, name="mean"), pd.Series(stderr, index=idx, name="stderr"), E,
                   int(steps), float(seconds), returns if keep else None, lengths if keep else None)

    def to_frame(self) -> pd.DataFrame:
        """One row per player or group: ``mean``, ``stderr``, ``episodes``."""
        frame = pd.DataFrame({"mean": self.mean, "stderr": self.stderr})
        frame["episodes"] = self.episodes
        return frame

    def __repr__(self) -> str:
        cells = ", ".join(f"{k}: {m:.4f} ± {s:.4f}" for k, m, s in zip(self.mean.index, self.mean, self.stderr))
        return f"EvalResult({{{cells}}}, {self.episodes} episodes, {self.steps} steps, {self.seconds:.2f}s)"


@dataclass(frozen=True, eq=False)
class FillResult:
    """What `RolloutPool.fill` did to a table.

    Attributes:
        cells: index tuples of the cells that received episodes.
        episodes: episodes played in total.
        steps: env decision steps taken.
        rounds: sampling rounds (1 without ``until_stderr``).
        seconds: wall-clock time of the call.
        max_stderr: the largest standard error (over the cells sampled and players) afterwards.
    """

    cells: tuple[tuple[int, ...], ...]
    episodes: int
    steps: int
    rounds: int
    seconds: float
    max_stderr: float

    def __repr__(self) -> str:
        return (
            f"FillResult({len(self.cells)} cells, {self.episodes} episodes, {self.steps} steps, "
            f"{self.rounds} round(s), max stderr {self.max_stderr:.4g}, {self.seconds:.2f}s)"
        )
