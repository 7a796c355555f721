"""One trial on Ray Tune: build (or reopen) a run in the trial's folder, step it to the stop, report each record.

`run_trial` is the Tune trainable (a function: Tune imports it by reference in each worker). Its
run folder is ``<experiment>/<trial>/run``, inside Tune's own trial folder, written directly to
the experiment's storage (the same machine, or a filesystem every node mounts: Tune's own rule
for a multi-node ``storage_path``). A trial that Tune starts again (a retry after a failure, or
a restore of an interrupted experiment) reopens its run folder and goes on from the last save;
a `pb.Stop` counts cumulatively, so it ends where one uninterrupted trial would.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["run_trial", "trial_folder"]

RUN = "run"
ERRORS = "errors.txt"
FINISHED = "finished.json"


def trial_folder() -> Path:
    """This trial's folder in the experiment's storage (Tune's trial folder)."""
    from ray import tune

    return Path(tune.get_context().get_storage().trial_fs_path)


def run_trial(config: dict[str, Any]) -> None:
    """Tune's trainable: ``config["trial"]`` is a `Trial.to_dict()` plus the grid's stop, loggers and folder."""
    started = time.time()  # before the imports: a fresh worker's first trial pays them
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
    built = time.time()
    params = {"game": t["game"], "method": t["method"], "seed": t["seed"], "spec": t["spec"]}
    loggers = [make_logger(name, Path(t["experiment_dir"]), experiment=t["experiment"], trial=t["key"],
                           params=params) for name in t.get("loggers", ())]
    stop, every = as_stop(t.get("stop")), float(t.get("save_seconds", 30.0))
    last = [time.monotonic()]

    def report(record: Any) -> None:
        if time.monotonic() - last[0] >= every:
            run.save(run_dir)
            last[0] = time.monotonic()
        tune.report(scalars(record))

    try:
        records = run.run(until=stop, progress=False, callback=report, loggers=loggers)
        run.save(run_dir)
        last_row = run.records[-1].as_row() if run.records else {}
        import ray

        write_json(folder / FINISHED, {"stopped_by": records.stopped_by or "budget",
                                       "node": ray.get_runtime_context().get_node_id(),
                                       "iteration": last_row.get("iteration"), "env_steps": last_row.get("env_steps"),
                                       "wall_time": last_row.get("wall_time"),
                                       # where the trial's seconds went (Unix times): benchmarks/experiments.py reads them
                                       "started": started, "built": built, "ended": time.time()})
        if not records and run.records:  # reopened after the stop was reached: report where it ended
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


def _keep_error(folder: Path) -> None:
    """Append the error to ``errors.txt`` in the trial folder (Tune keeps only the last, in error.txt)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ERRORS, "a", encoding="utf-8") as fh:
        fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}\n{traceback.format_exc()}\n")
