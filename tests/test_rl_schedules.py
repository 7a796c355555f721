"""pbmarl.rl.schedules: a linear ramp over the first fraction of training, flat after."""

from __future__ import annotations

import pytest

from pbmarl.rl.schedules import linear_schedule


def test_linear_schedule_ramps_then_holds() -> None:
    assert linear_schedule(1.0, 0.1, 0.5, 0.0) == 1.0
    assert linear_schedule(1.0, 0.1, 0.5, 0.25) == pytest.approx(0.55)
    assert linear_schedule(1.0, 0.1, 0.5, 0.9) == pytest.approx(0.1)
    assert linear_schedule(1.0, 0.1, 0.0, 0.0) == pytest.approx(0.1)  # no ramp: the end value at once
