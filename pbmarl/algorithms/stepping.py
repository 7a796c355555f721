"""The `run(n)` loop that drivers share: step until `n` records, convergence or `max_iterations`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar

import numpy as np

R_co = TypeVar("R_co", covariant=True)


class Steppable(Protocol[R_co]):
    """A driver that steps one iteration at a time and knows when to stop."""

    max_iterations: int | None

    @property
    def converged(self) -> bool: ...

    @property
    def iteration(self) -> int: ...

    def step(self) -> R_co: ...


def run_steps(driver: Steppable[R_co], iterations: int) -> Iterator[R_co]:
    """Yield the records of up to `iterations` more steps (stops when converged or at `max_iterations`)."""
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise ValueError(f"iterations must be a non-negative int, got {iterations!r}")
    for _ in range(int(iterations)):
        if driver.converged or (driver.max_iterations is not None and driver.iteration >= driver.max_iterations):
            return
        yield driver.step()
