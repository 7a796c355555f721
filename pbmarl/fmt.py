"""How pbmarl shows a number to a person: floating-point noise reads as 0.

Every place that formats a value for display (the command line, dashboards, plot
labels, table styles) goes through `clean` and `fmt`, so `-2.775558e-17` never
reaches a reader.

    >>> fmt(-2.775558e-17)
    '0'
    >>> fmt(0.123456)
    '0.123'
    >>> clean(-1e-15)
    0.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: values whose magnitude is below this are shown as exactly 0
DISPLAY_TOLERANCE = 1e-12


def clean(value: float, *, tol: float = DISPLAY_TOLERANCE) -> float:
    """`value`, with anything smaller than `tol` in magnitude replaced by 0.0 (NaN and inf kept)."""
    v = float(value)
    if math.isfinite(v) and abs(v) < tol:
        return 0.0
    return v


def clean_array(values: Any, *, tol: float = DISPLAY_TOLERANCE) -> np.ndarray:
    """An array copy of `values` with entries below `tol` in magnitude set to 0.0 (no negative zeros)."""
    arr = np.array(values, dtype=float, copy=True)
    small = np.isfinite(arr) & (np.abs(arr) < tol)
    arr[small] = 0.0
    return arr


def fmt(value: float | None, spec: str = ".3g", *, tol: float = DISPLAY_TOLERANCE, missing: str = "—") -> str:
    """`value` formatted with `spec`; below `tol` it reads ``0``; None or NaN reads `missing`.

    >>> fmt(None)
    '—'
    >>> fmt(float("nan"))
    '—'
    >>> fmt(1234.5678, ".2f")
    '1234.57'
    """
    if value is None:
        return missing
    v = float(value)
    if math.isnan(v):
        return missing
    v = clean(v, tol=tol)
    if v == 0.0:
        return "0"
    return format(v, spec)
