"""What every ``pbmarl`` command shares: the one drive loop, `CliError`, and the option parsers.

`drive` steps any run (`pbmarl.runs.Run`) the command line starts or resumes: one line a step,
a progress bar on a terminal, the run folder saved after every step, the run closed at the end.
What a command writes when the loop ends (plots, the trained policy, an evaluation) is its own.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pbmarl.fmt import fmt

#: written when a command starts, so `pbmarl resume` can say how to start a run that never finished a step
STARTED = "started.json"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def int_at_least(low: int, what: str) -> Callable[[str], int]:
    """An argparse type: an int >= `low`, refused naming the option `what`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= {low}, got {value}")
        return value

    return parse


def add_server_options(parser: Any) -> None:
    """``--workers``, ``--sync``, ``--staleness``, ``--backend``: a learner on the parameter server
    (``pbmarl train`` and ``pbmarl marl``)."""
    parser.add_argument("--workers", type=int_at_least(1, "--workers"), default=1,
                        help="gradient workers; more than 1 trains on a parameter server (default: 1)")
    parser.add_argument("--sync", choices=("bsp", "asp", "bap"), default="bsp",
                        help="how the server applies the workers' gradients (with --workers > 1)")
    parser.add_argument("--staleness", type=int_at_least(0, "--staleness"), default=1, help="the BAP bound")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="workers in this process or as Ray actors (default: local)")


def add_run_folder_options(parser: Any, name: str) -> None:
    """``--out`` (default: ``runs/NAME-TIME``) and ``--quiet``: a command that writes a run folder."""
    parser.add_argument("--out", type=Path, default=None, help=f"run folder (default: runs/{name}-TIME)")
    parser.add_argument("--quiet", action="store_true", help="only the first and the final line")


def add_training_options(parser: Any) -> None:
    """What ``pbmarl train`` and ``pbmarl marl`` end with: the parameter-server options (`add_server_options`),
    then ``--out`` (default: ``runs/GAME-ALGO-TIME``) and ``--quiet``."""
    add_server_options(parser)
    add_run_folder_options(parser, "GAME-ALGO")

def add_training_parser(sub: Any, command: str, *, help: str, game: str, algos: Sequence[str],
                        algo: str) -> Any:
    """The parser of a command that trains with a learner on a game (``pbmarl train``, ``pbmarl marl``):
    ``--game`` (`game`: its help) and ``--algo`` (one of `algos`; `algo`: its help), both required."""
    parser = sub.add_parser(command, help=help)
    parser.add_argument("--game", required=True, help=game)
    parser.add_argument("--algo", required=True, choices=algos, help=algo)
    return parser


def default_out(name: str, tag: str) -> Path:
    """``runs/NAME-TAG-TIME``, `name` made safe for a folder name."""
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_")
    return Path("runs") / f"{slug}-{tag}-{time.strftime('%Y%m%d-%H%M%S')}"


@contextlib.contextmanager
def set_up_in(out: Path) -> Iterator[None]:
    """Around a command's set-up: if it fails (bad input), a run folder it created is removed again,
    so a refused command leaves nothing behind (a folder it did not create is left as it was)."""
    fresh = not out.exists()
    try:
        yield
    except Exception:
        if fresh and out.is_dir() and {p.name for p in out.iterdir()} <= {STARTED}:
            shutil.rmtree(out, ignore_errors=True)
        raise


def drive(run: Any, first: str, *, save: Callable[[], Any], quiet: bool, steps: int | None = None,
          until: Any = None, total: int | None = None, line: Callable[[Any], str] = str) -> Any:
    """Step `run` (`steps` more, or to `until`, or to its own budget) and close it; returns the new `Records`.

    Prints `first`, then `line(record)` after every step (none when `quiet`), calling `save()` after
    every step so the folder always holds the last completed one. On a terminal a progress bar of
    `total` steps runs on stderr. A run without a budget of its own, given neither `steps` nor
    `until`, is refused before any work.
    """
    from tqdm.auto import tqdm

    print(first, flush=True)
    if steps is None and until is None:
        try:
            run.done  # noqa: B018 - a run without a budget of its own says so before any work
        except ValueError as exc:
            run.close()
            raise CliError(f"{exc}; with pbmarl resume: --iterations N or --steps N") from None
    # a bar only on a terminal: in a log file its redraws would mix into the per-step lines
    bar = tqdm(total=total if steps is None else steps, disable=quiet or not sys.stderr.isatty(), unit="it",
               dynamic_ncols=True, file=sys.stderr)

    def show(record: Any) -> None:
        save()
        bar.update(1)
        row = record.as_row()
        if row.get("exploitability") is not None:
            bar.set_postfix(exploitability=fmt(row["exploitability"]))
        if not quiet:
            tqdm.write(line(record), file=sys.stdout)
            sys.stdout.flush()

    try:
        return run.run(steps, until=until, progress=False, callback=show)
    finally:
        bar.close()
        run.close()  # workers, actors and parameter servers stop
