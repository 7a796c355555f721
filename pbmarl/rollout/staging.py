"""Staged payoff-table updates: nothing reaches the table until a call has succeeded.

`fill` stages each unit's returns under its key as the unit completes (a unit
that is run twice after a worker failure arrives only once, and a repeat would
be refused); running statistics for ``until_stderr`` combine the table's own
counts with the staged returns; `commit` folds everything in, cell by cell in
key order (so results do not depend on which worker finished first), with
Ctrl-C held back until the last cell is written.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from pbmarl.payoffs import PayoffTable


class Staging:
    """Returns per cell, keyed by unit, waiting to be folded into `table`."""

    def __init__(self, table: PayoffTable) -> None:
        self.table = table
        self.num_players = table.num_players
        self._staged: dict[tuple[int, ...], dict[tuple[int, ...], np.ndarray]] = {}
        counts, values, stderr = table.counts, table.values, table.stderr
        self._base: dict[tuple[int, ...], tuple[int, np.ndarray, np.ndarray]] = {}
        self._counts, self._values, self._stderr = counts, values, stderr

    def add(self, cell: tuple[int, ...], key: tuple[int, ...], returns: np.ndarray) -> None:
        units = self._staged.setdefault(cell, {})
        if key in units:
            raise RuntimeError(f"unit {key} of cell {cell} arrived twice; refusing to count it again")
        units[key] = np.asarray(returns, dtype=float)

    def _base_stats(self, cell: tuple[int, ...]) -> tuple[int, np.ndarray, np.ndarray]:
        hit = self._base.get(cell)
        if hit is None:
            n = int(self._counts[cell])
            mean = np.nan_to_num(self._values[cell]) if n else np.zeros(self.num_players)
            se = self._stderr[cell]
            m2 = np.nan_to_num(se**2 * n * (n - 1)) if n >= 2 else np.zeros(self.num_players)
            hit = self._base[cell] = (n, mean, m2)
        return hit

    def stats(self, cell: tuple[int, ...]) -> tuple[int, np.ndarray, np.ndarray]:
        """(count, mean [P], sum of squared deviations [P]) of table and staged returns together."""
        n, mean, m2 = self._base_stats(cell)
        for key in sorted(self._staged.get(cell, {})):
            r = self._staged[cell][key]
            nb = len(r)
            if nb == 0:
                continue
            mb = r.mean(axis=0)
            m2b = ((r - mb) ** 2).sum(axis=0)
            total = n + nb
            delta = mb - mean
            mean = mean + delta * nb / total
            m2 = m2 + m2b + delta**2 * n * nb / total
            n = total
        return n, mean, m2

    def max_stderr(self, cell: tuple[int, ...]) -> float:
        """The largest standard error over players (NaN with fewer than two samples)."""
        n, _, m2 = self.stats(cell)
        if n < 2:
            return float("nan")
        return float(np.max(np.sqrt(m2 / (n - 1) / n)))

    @property
    def cells(self) -> list[tuple[int, ...]]:
        return sorted(self._staged)

    def commit(self) -> None:
        """Fold every staged cell into the table (Ctrl-C waits until all are in)."""
        batches = [
            (cell, np.concatenate([self._staged[cell][k] for k in sorted(self._staged[cell])]))
            for cell in self.cells
        ]
        with deferred_interrupt():
            for cell, returns in batches:
                if len(returns):
                    self.table.update(cell, returns)
        self._staged.clear()


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) inside the block and raise it right after (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
