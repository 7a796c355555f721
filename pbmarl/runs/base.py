"""`Run`: the one base every run fills in (PSRO and its relatives, League, NFSP, MARL, every learner).

A run is built as ``Type(game, [parts], *, seed=0, config=None, **options)`` and then:

* ``step()`` does one unit of work and returns a frozen record (all-or-nothing: decorate it
  with `pbmarl.runs.transaction.all_or_nothing`);
* ``run(n)`` takes exactly `n` more steps, ``run()`` runs to the run's own budget (`done`),
  ``run(until=Stop(...))`` to the first condition reached; each returns the `Records` made
  and shows a progress bar in a notebook or a terminal (``progress=False`` hides it);
* ``history`` is a DataFrame of the records, the shared columns first (`pbmarl.runs.records`);
* ``evaluate(episodes, *, seed, deterministic)`` returns a `pb.EvalResult`;
* ``save(path)`` writes one run folder and ``Type.load(path)`` / ``pb.load_run(path)`` rebuild
  it (`pbmarl.runs.folder`);
* ``close()`` stops workers; ``with Type(...) as run:`` closes on the way out;
* ``run(..., loggers=[...])``, or ``run.loggers = [...]`` once, hands every record to trackers
  (`RunLogger`: TensorBoard, MLflow, W&B, CSV in `pbmarl.experiments.loggers`).

A subclass writes `step`, `evaluate`, `done` (when it has a budget), and `state` /
`from_state` for its folder. Everything else is here, once.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Tick(Record):
    ...     iteration: int
    ...     def as_row(self):
    ...         return shared_row(iteration=self.iteration, env_steps=0, episodes=0, wall_time=0.0)
    >>> class Counter(Run):
    ...     def __init__(self):
    ...         self.records = []
    ...     def step(self):
    ...         self.records.append(Tick(len(self.records) + 1))
    ...         return self.records[-1]
    >>> c = Counter()
    >>> c.run(3, progress=False)
    Records(3 steps, iterations 1-3; last: Tick(iteration=3))
    >>> c.run(until=Stop(iterations=5), progress=False).stopped_by
    'iterations 5'
    >>> list(c.history.index)
    [1, 2, 3, 4, 5]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import pandas as pd

from pbmarl.config import is_int
from pbmarl.progress import progress_bar
from pbmarl.runs.heap import frozen_heap
from pbmarl.runs.records import Record, RecordLike, Records, history_frame, shared_row
from pbmarl.runs.stop import Stop

if TYPE_CHECKING:  # pragma: no cover
    import os

    from pbmarl.rollout.results import EvalResult
    from pbmarl.runs.folder import SavedRun, State

__all__ = ["Record", "Run", "RunLogger", "Stop", "shared_row"]


@runtime_checkable
class RunLogger(Protocol):
    """A tracker that `Run.run` hands each new record to (the implementations live in `pbmarl.experiments`)."""

    def log(self, run: Any, record: Any) -> None:
        """Take one new record of `run` (its ``as_row()`` carries the shared history names)."""

    def flush(self) -> None:
        """Write out what is buffered; called when a `run(...)` call ends, however it ends."""


class Run:
    """The base of every run; see the module doc."""

    #: the record class `step` returns (its columns show on an empty `history`)
    history_columns: ClassVar[tuple[str, ...]] = ()
    records: list[Any]
    #: the trackers `run()` logs to when it is not given ``loggers=``; set it on an instance to log every call
    loggers: Sequence[RunLogger] = ()

    # -- what a run writes ---------------------------------------------------------------
    def step(self) -> Any:
        """One unit of work; returns its frozen record (also kept in `records`)."""
        raise NotImplementedError(f"{type(self).__name__} does not define step()")

    @property
    def done(self) -> bool:
        """Whether the run has reached its own budget (what `run()` with no argument runs to)."""
        raise ValueError(f"{type(self).__name__} has no budget of its own: give run() a number of steps "
                         "or until=pb.Stop(...)")

    def _budgeted(self, cfg: Any, stop: str) -> Any:
        """`cfg` (the run's config), once it sets a budget of its own: ``max_iterations`` or the threshold named
        `stop` (for `done`; a config with neither raises, saying what to set)."""
        if cfg.max_iterations is None and getattr(cfg, stop) is None:
            raise ValueError(f"{type(self).__name__} has no budget: set max_iterations or {stop}, or give run() a "
                             "number of steps or until=pb.Stop(...)")
        return cfg

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` fresh episodes of what the run has learned; returns a `pb.EvalResult`."""
        raise NotImplementedError(f"{type(self).__name__} does not define evaluate()")

    # -- the loop ----------------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        """The last record's iteration (0 before any)."""
        return int(self.records[-1].iteration) if self.records else 0

    def run(self, steps: int | None = None, *, until: Stop | None = None, progress: bool | None = None,
            callback: Callable[[Any], Any] | None = None, loggers: Sequence[RunLogger] | None = None) -> Records:
        """Step and return the new records.

        Args:
            steps: exactly this many more steps (fewer only if `until` is reached first).
                None: until `until`, or, without it, until the run's own budget (`done`).
            until: a `pb.Stop`: stop on the first of its conditions, checked after every step
                against the run's cumulative counts (so a resumed run stops where one run through would).
            progress: a progress bar; default on in a notebook or a terminal.
            callback: called with each record as it comes.
            loggers: `RunLogger` s that get each record and are flushed when the call ends
                (default: the run's `loggers` attribute).

        A Ctrl-C stops the loop: the step it interrupted is undone, the records before it are kept.
        """
        if steps is not None and (not is_int(steps) or steps < 0):
            raise ValueError(f"steps must be a non-negative int or None, got {steps!r}")
        if until is not None and not isinstance(until, Stop):
            raise TypeError(f"until must be a pb.Stop, got {type(until).__name__}: {until!r}")
        if steps is None and until is None:
            self.done  # noqa: B018 - a run without a budget says so before any work
        loggers = self.loggers if loggers is None else loggers
        for logger in loggers:
            if not isinstance(logger, RunLogger):
                raise TypeError(f"loggers must be pbmarl loggers (pb.experiments.TensorBoardLogger, pb.experiments.MLflowLogger, "
                                f"pb.experiments.WandbLogger, pb.experiments.CSVLogger), got {type(logger).__name__}: {logger!r}")
        out = Records()
        bar = progress_bar(progress, total=steps, desc=type(self).__name__)
        with frozen_heap():  # the objects alive now stay out of the GC's full passes (pbmarl.runs.heap)
            try:
                while True:
                    if steps is not None and len(out) >= steps:
                        break
                    if steps is None and until is None and self.done:
                        out.stopped_by = "budget"
                        break
                    if until is not None and self.records:
                        why = until.reached(self.records[-1].as_row())
                        if why:
                            out.stopped_by = why
                            break
                    record = self.step()
                    out.append(record)
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix_str(_postfix(record), refresh=False)
                    for logger in loggers:
                        logger.log(self, record)
                    if callback is not None:
                        callback(record)
            finally:
                for logger in loggers:
                    logger.flush()
                if bar is not None:
                    bar.close()
        return out

    @property
    def history(self) -> pd.DataFrame:
        """One row per record, indexed by ``iteration``, the shared columns first."""
        return history_frame(self.records, self.history_columns)

    # -- files ----------------------------------------------------------------------------------
    def state(self) -> State:
        """Everything `from_state` needs to rebuild the run (see `pbmarl.runs.folder.State`)."""
        raise NotImplementedError(f"{type(self).__name__} does not define state()")

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> Any:
        """Rebuild a run from a folder `state` wrote (see `pbmarl.runs.folder.SavedRun`)."""
        raise NotImplementedError(f"{cls.__name__} does not define from_state()")

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the run into the run folder `path`, as one commit (`pbmarl.runs.folder`)."""
        from pbmarl.runs.folder import save_run

        return save_run(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **overrides: Any) -> Any:
        """Rebuild a run saved with `save`; `pb.load_run(path)` does the same without naming the type."""
        from pbmarl.runs.folder import load_run

        return load_run(path, expect=cls, **overrides)

    # -- shutting down -------------------------------------------------------------------
    def close(self) -> None:
        """Stop the run's workers and actors (a run without any has nothing to stop)."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _postfix(record: RecordLike) -> str:
    row = record.as_row()
    parts = [f"it {row.get('iteration')}"]
    if row.get("env_steps"):
        parts.append(f"env {row['env_steps']:,}")
    for key in ("exploitability", "nash_conv"):
        if row.get(key) is not None:
            parts.append(f"{key} {row[key]:.4g}")
            break
    returns = [v for k, v in row.items() if k.startswith("return/") and isinstance(v, (int, float))]
    if returns:
        parts.append(f"return {sum(returns) / len(returns):.4g}")
    return ", ".join(parts)
