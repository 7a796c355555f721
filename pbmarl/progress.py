"""Progress bars shown where a person watches: a notebook kernel or a terminal.

`progress_bar` is the one switch every long loop uses (a run's `run`, a tree walk, a pool's fill):
``progress=True`` shows a tqdm bar, ``False`` hides it, ``None`` shows it when `interactive()`.

Example:
    >>> progress_bar(False, total=10, desc="demo") is None
    True
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["interactive", "progress_bar"]


def progress_bar(progress: bool | None, *, total: int | None, desc: str, unit: str = "step") -> Any:
    """A tqdm bar: on when `progress` is True, off when False, and when None on in a notebook or a terminal."""
    if progress is False:
        return None
    if progress is None and not interactive():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit=unit, leave=True)


def interactive() -> bool:
    """A notebook kernel, or a terminal on stderr."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)()) or "ipykernel" in sys.modules
