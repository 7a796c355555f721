"""Frozen records returned by `RolloutPool` calls."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class EvalResult:
    """Sampled payoffs of one profile.

    Attributes:
        mean: ``[P]`` mean episode return per seat.
        stderr: ``[P]`` standard error of each mean (NaN with fewer than two episodes).
        episodes: episodes played.
        steps: env decision steps taken (all seats).
        seconds: wall-clock time of the call.
        returns: ``[E, P]`` per-episode returns, when asked for (``keep_returns=True``).
        lengths: ``[E]`` per-episode decision steps, when asked for.
    """

    mean: np.ndarray
    stderr: np.ndarray
    episodes: int
    steps: int
    seconds: float = 0.0
    returns: np.ndarray | None = None
    lengths: np.ndarray | None = None

    @classmethod
    def from_returns(cls, returns: np.ndarray, lengths: np.ndarray, steps: int, seconds: float, *, keep: bool) -> EvalResult:
        E = len(returns)
        mean = returns.mean(axis=0)
        stderr = returns.std(axis=0, ddof=1) / np.sqrt(E) if E >= 2 else np.full(returns.shape[1], np.nan)
        return cls(mean, stderr, E, int(steps), float(seconds), returns if keep else None, lengths if keep else None)

    def __repr__(self) -> str:
        cells = ", ".join(f"{m:.4f} ± {s:.4f}" for m, s in zip(self.mean, self.stderr))
        return f"EvalResult([{cells}], {self.episodes} episodes, {self.steps} steps, {self.seconds:.2f}s)"


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
