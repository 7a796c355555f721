"""What every benchmark row carries, and appending rows to ``benchmarks/results/<name>.csv``, in one place.

    from _rows import Stamp, append
    stamp = Stamp("benchmarks/mmd.py")                # date, commit, machine, command: fixed at the start
    append("mmd", [stamp.row(game="kuhn_poker", measure="time", load_avg=load_avg())], FIELDS)

Each CSV keeps the columns and the date format its rows already have (``iso=True`` for the files whose
dates are ISO timestamps), so new rows sort with the old ones; `append` refuses a header that differs
from the file's, naming both, instead of writing rows under the wrong columns.
"""

from __future__ import annotations

import csv
import datetime
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

__all__ = ["RESULTS", "Stamp", "append", "git_commit", "load_avg", "machine"]


def git_commit() -> str:
    """The short hash of the checked-out commit, or ``"unknown"`` outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> str:
    """Host name, architecture and CPU count: ``"vm x86_64 2 cpus"``."""
    return f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus"


def load_avg(*, minutes: int | None = None) -> str:
    """The load average now: the 1, 5 and 15-minute figures, or one of them (``minutes=1``). The machine is shared."""
    loads = dict(zip((1, 5, 15), os.getloadavg(), strict=True))
    if minutes is None:
        return " ".join(f"{x:.2f}" for x in loads.values())
    if minutes not in loads:
        raise ValueError(f"minutes must be 1, 5 or 15, got {minutes!r}")
    return f"{loads[minutes]:.1f}"


class Stamp:
    """The columns every row of one command shares: date (UTC, when the command started), commit, machine, command.

    Args:
        script: the script's path as a reader would type it (``"benchmarks/marl.py"``).
        argv: the arguments (default: this process's).
        iso: dates as ISO timestamps (``2026-11-29T10:00:00+00:00``) instead of ``2026-11-29 10:00``.
    """

    def __init__(self, script: str, argv: Sequence[str] | None = None, *, iso: bool = False) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        self.date = now.isoformat(timespec="seconds") if iso else now.strftime("%Y-%m-%d %H:%M")
        self.commit = git_commit()
        self.machine = machine()
        args = list(sys.argv[1:] if argv is None else argv)
        self.command = " ".join(["python", script, *(shlex.quote(a) for a in args)])

    def row(self, **values: Any) -> dict[str, Any]:
        """The shared columns followed by `values`."""
        return {"date": self.date, "commit": self.commit, "machine": self.machine, "command": self.command, **values}


def append(name: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> Path:
    """Append `rows` (keys beyond `fields` ignored, missing ones empty) to a results CSV; returns its path.

    `name` is a file in ``benchmarks/results`` without ``.csv`` (``"mmd"``), or a path. A new file gets
    `fields` as its header; an existing one must already have exactly that header.
    """
    path = RESULTS / f"{name}.csv" if isinstance(name, str) and os.sep not in name and not name.endswith(".csv") \
        else Path(name)
    rows = list(rows)
    if path.exists() and path.stat().st_size:
        with open(path, newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != list(fields):
            raise ValueError(f"{path} has the columns {header}, not {list(fields)}: append to it with its own columns, "
                             "or start a new file")
        new = False
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = True
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(fields), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)
    return path
