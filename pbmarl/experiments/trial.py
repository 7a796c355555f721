"""One trial on Ray Tune: build (or reopen) a run in the trial's folder, step it to the stop, report its records.

`run_trial` is the Tune trainable (a function: Tune imports it by reference in each worker). Its
run folder is ``<experiment>/<trial>/run``, inside Tune's own trial folder, written directly to
the experiment's storage (the same machine, or a filesystem every node mounts: Tune's own rule
for a multi-node ``storage_path``). A trial that Tune starts again (a retry after a failure, or
a restore of an interrupted experiment) reopens its run folder and goes on from the last save;
a `pb.Stop` counts cumulatively, so it ends where one uninterrupted trial would.
"""

from __future__ import annotations

import math
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["run_trial", "trial_folder"]

RUN = "run"
ERRORS = "errors.txt"
FINISHED = "finished.json"
REPORT_SECONDS = 1.0
"""A trial sends Tune a result at most this often (its first record at once, and always its last): each
``tune.report`` of a function trainable waits for the driver to take the result, a round trip of
milliseconds that an iteration every few milliseconds would pay each time. The run's history keeps
every record; Tune's ``progress.csv`` keeps those sent."""
SAVE_SHARE = 0.02
"""Between its saves a trial runs at least ``1 / SAVE_SHARE`` times as long as its last save took (and at
least ``save_seconds``): a run folder that takes a second to write (PSRO's population, one file a
policy, each synced to disk) is then written at most every 50 s, about 2% of the trial's time, as
Tune spaces its own experiment checkpoints."""


def trial_folder() -> Path:
    """This trial's folder in the experiment's storage (Tune's trial folder)."""
    from ray import tune

    return Path(tune.get_context().get_storage().trial_fs_path)


def run_trial(config: dict[str, Any]) -> None:
    """Tune's trainable: ``config["trial"]`` is a `Trial.to_dict()` plus the grid's stop, loggers and folder."""
    started, cpu_started = time.time(), time.thread_time()  # before the imports: a fresh worker's first trial pays them
    from ray import tune

    from pbmarl.experiments.grid import as_stop
    from pbmarl.experiments.loggers import make_logger, scalars
    from pbmarl.experiments.spec import RunSpec
    from pbmarl.io import write_json
    from pbmarl.runs.folder import load_run

    t = config["trial"]
    folder = trial_folder()
    run_dir = folder / RUN
    _threads(t.get("cpus", 1))
    try:
        if (run_dir / "run.json").is_file():
            run = load_run(run_dir)
        else:
            run = RunSpec.from_dict(t["spec"]).build(t["game"], seed=int(t["seed"]))
    except BaseException:
        _keep_error(folder)
        raise
    built, cpu_built = time.time(), time.thread_time() - cpu_started
    params = {"game": t["game"], "method": t["method"], "seed": t["seed"], "spec": t["spec"]}
    loggers = [make_logger(name, Path(t["experiment_dir"]), experiment=t["experiment"], trial=t["key"],
                           params=params) for name in t.get("loggers", ())]
    stop, every = as_stop(t.get("stop")), float(t.get("save_seconds", 60.0))
    last_save, last_report, save_cost = time.monotonic(), -math.inf, 0.0
    unreported: Any = None  # the newest record Tune has not been sent yet
    spent = {"saving": 0.0, "reporting": 0.0}  # seconds in run.save and in Tune's result round trips

    def report(record: Any) -> None:
        nonlocal last_save, last_report, save_cost, unreported
        now = time.monotonic()
        if now - last_save >= max(every, save_cost / SAVE_SHARE):
            run.save(run_dir)
            last_save = time.monotonic()
            save_cost = last_save - now
            spent["saving"] += save_cost
            now = last_save
        if now - last_report < REPORT_SECONDS:
            unreported = record
            return
        tune.report(scalars(record))  # waits for Tune's driver to take the result: one round trip
        last_report, unreported = time.monotonic(), None
        spent["reporting"] += last_report - now

    try:
        records = run.run(until=stop, progress=False, callback=report, loggers=loggers)
        ran, cpu_ran = time.time(), time.thread_time() - cpu_started
        run.save(run_dir)
        last_row = run.records[-1].as_row() if run.records else {}
        import ray

        write_json(folder / FINISHED, {"stopped_by": records.stopped_by or "budget",
                                       "node": ray.get_runtime_context().get_node_id(),
                                       "iteration": last_row.get("iteration"), "env_steps": last_row.get("env_steps"),
                                       "wall_time": last_row.get("wall_time"),
                                       # where the trial's seconds went (Unix times, seconds, this thread's CPU
                                       # seconds since `started`): benchmarks/experiments.py reads them
                                       "started": started, "built": built, "ran": ran, "ended": time.time(),
                                       "cpu_built": cpu_built, "cpu_ran": cpu_ran,
                                       "cpu_ended": time.thread_time() - cpu_started,
                                       "saving_s": spent["saving"], "reporting_s": spent["reporting"],
                                       "worker_started": _process_started()})
        if unreported is not None:  # the last record always reaches Tune
            tune.report(scalars(unreported))
        elif not records and run.records:  # reopened after the stop was reached: report where it ended
            tune.report(scalars(run.records[-1]))
    except BaseException:
        _keep_error(folder)
        raise
    finally:
        for logger in loggers:
            logger.close()
        run.close()


def _threads(cpus: float) -> None:
    """A trial keeps to the CPUs it was given: torch's intra-op threads (when torch is already in use)."""
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(max(1, int(cpus)))


def _process_started() -> float | None:
    """When this worker process started (Unix time): before the experiment for a worker Ray started in advance."""
    try:
        import psutil  # type: ignore[import-untyped]  # a dependency of Ray

        return float(psutil.Process().create_time())
    except Exception:  # pragma: no cover - psutil missing or the process table unreadable
        return None


def _keep_error(folder: Path) -> None:
    """Append the error to ``errors.txt`` in the trial folder (Tune keeps only the last, in error.txt)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ERRORS, "a", encoding="utf-8") as fh:
        fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}\n{traceback.format_exc()}\n")
