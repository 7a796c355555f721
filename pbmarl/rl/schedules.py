"""Schedules of a hyperparameter over training progress (exploration epsilon, learning rates).

Example:
    >>> linear_schedule(1.0, 0.1, 0.5, 0.25)
    0.55
"""

from __future__ import annotations

__all__ = ["linear_schedule"]


def linear_schedule(start: float, end: float, fraction: float, progress: float) -> float:
    """``start + min(progress / fraction, 1) * (end - start)``: a linear ramp over the first `fraction`."""
    frac = 1.0 if fraction <= 0 else min(max(progress, 0.0) / fraction, 1.0)
    return start + frac * (end - start)
