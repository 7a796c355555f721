"""What a solver function hands back beyond the distributions, and how it fails."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np


class SolverResult(NamedTuple):
    """One distribution per player, the algorithm that produced them, and details.

    `method` names what actually ran (``"lp"``, ``"lemke_howson"``, ``"prd-fallback"``, ...),
    so a fallback is always visible; `info` holds numbers such as iterations or the label
    that worked.
    """

    distributions: tuple[np.ndarray, ...]
    method: str
    info: Mapping[str, Any]


class SolverError(RuntimeError):
    """A meta-solver could not produce an answer it can stand behind (the message says why)."""
