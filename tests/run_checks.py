"""Checks several test files share: record-by-record equality, and a run resumed from a checkpoint."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import pbmarl as pb


def assert_same_fields(a: Any, b: Any) -> None:
    """Every field of two dataclass records (e.g. `Trajectories`) is equal; arrays element for element."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


def marl_straight_and_resumed(make: Callable[[], pb.MARL], folder: Path, *, total: int = 3,
                              before_save: int = 1) -> tuple[pb.MARL, pb.MARL]:
    """`make()` run `total` steps straight, and `make()` run `before_save` steps, saved to `folder`,
    loaded and run to `total`; the caller compares the two."""
    straight = make()
    for _ in straight.run(total):
        pass
    first = make()
    for _ in range(before_save):
        first.step()
    first.save(folder)
    resumed = pb.MARL.load(folder)
    for _ in resumed.run(total - before_save):
        pass
    return straight, resumed
