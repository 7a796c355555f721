"""`Experiment`: a grid of runs (games x methods x seeds) executed by Ray Tune, one run folder per trial.

    exp = pb.Experiment("leduc-solvers", game="leduc_poker",
                        run=[pb.spec(pb.PSRO, solver="nash"), pb.spec(pb.PSRO, solver="rm")],
                        seeds=range(5), stop=pb.Stop(iterations=30), root="experiments")
    exp.run()                          # embedded local Ray; exp.run(address="auto") on a cluster
    exp.results                        # one long DataFrame
    exp = pb.Experiment.load("experiments/leduc-solvers"); exp.run()   # resumes what did not finish

The experiment folder is Tune's (``<root>/<name>``): ``experiment.json`` (the grid), Tune's
state, and a folder per trial holding Tune's ``params.json`` / ``progress.csv`` /
``result.json``, the pbmarl run folder ``run/`` (`pb.load_run` opens it), ``finished.json``
when it is done, ``errors.txt`` when it failed, and the trial's tracker output.

What the runner costs (``benchmarks/experiments.py`` measures it; 0.77 s a 30-s trial, 2.6%, on a quiet
2-core machine with 4 trials): a one-off start for each trial slot of an ``exp.run()`` (Tune's driver,
then a new worker process for the trial actor, which imports Ray and Ray Tune, then pbmarl, and builds
the game in its first trial: about 2 s here; Tune's actors carry their own runtime environment, so Ray's
idle workers cannot take them. ``constraints.txt`` keeps jsonschema below 4.24, whose import builds an
IRI grammar in every Ray process where ``rfc3987-syntax`` is installed, as the Jupyter packages have it:
that doubled the start); after that, with ``reuse_actors``, tens of milliseconds between trials, and a
result round trip (milliseconds: a function trainable's ``tune.report`` waits for the driver) at most
once a second, as a trial reports (`pbmarl.experiments.trial.REPORT_SECONDS`). A trial's worker holds
twice the objects of a plain process (Ray, Tune), which the GC's full passes walked: `Run.run` freezes
them for its duration (`pbmarl.runs.heap`). Tune's result buffering (``TUNE_RESULT_BUFFER_LENGTH``)
measured slower here and stays off; Tune's checkpoints are unused
(each trial saves its own run folder every ``save_seconds``, or less often when saving is slow:
`pbmarl.experiments.trial.SAVE_SHARE`), and local storage syncs nothing. The progress bar is Tune's
progress reporter, and the JSON/CSV loggers Tune's automatic ones, because a run config with
callbacks costs a second of CPU at each start (`pbmarl.experiments.progress`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pbmarl.experiments.grid import Grid, Trial, as_stop
from pbmarl.experiments.spec import RunSpec
from pbmarl.runs.stop import Stop

__all__ = ["Experiment"]

GRID_FILE = "experiment.json"
FINISHED = "finished.json"


class Experiment:
    """Games x methods x seeds, each trial a run executed by Ray Tune; see the module doc.

    Args:
        name: the experiment's folder name under `root`.
        game: a game name, or a list of them (``pb.load_game`` names).
        run: a ``pb.spec(RunType, **options)``, or a list of them: the methods.
        seeds: the seeds every method runs on every game.
        stop: a `pb.Stop` (or a dict of its conditions) for every trial; None: each run's own budget.
        root: where experiment folders go.
        resources: per trial, ``{"cpu": 1, "gpu": 0}``; Tune runs as many trials at once as fit.
        max_failures: how many times a failed trial is retried (from its last save).
        loggers: trackers each trial also writes: ``"tensorboard"``, ``"mlflow"``, ``"wandb"`` (offline).
        save_seconds: a running trial saves its run folder at most this often (and always at the end), and
            further apart when saving is slow: at most about 2% of its time (`pbmarl.experiments.trial.SAVE_SHARE`).

    Raises:
        ValueError, TypeError: a bad grid (unknown run type, option, game or stop key, an empty grid,
            a duplicate trial), before any trial starts; the message names the entry.
    """

    def __init__(self, name: str, game: str | Sequence[str], run: RunSpec | Sequence[RunSpec],
                 seeds: Iterable[int] = range(5), stop: Stop | Mapping[str, Any] | None = None, *,
                 root: str | os.PathLike[str] = "experiments", resources: Mapping[str, float] | None = None,
                 max_failures: int = 1, loggers: Sequence[str] = (), save_seconds: float = 60.0,
                 _check_games: bool = True) -> None:
        runs = (run,) if isinstance(run, (RunSpec, Mapping)) else tuple(run)
        self.grid = Grid(name=name, games=(game,) if isinstance(game, str) else tuple(game),
                         runs=tuple(r if isinstance(r, RunSpec) else RunSpec.from_dict(r) for r in runs),
                         seeds=tuple(seeds), stop=as_stop(stop), resources=dict(resources or {"cpu": 1}),
                         max_failures=max_failures, loggers=(loggers,) if isinstance(loggers, str) else tuple(loggers),
                         save_seconds=float(save_seconds))
        self.grid.check(games=_check_games)
        self.root = Path(root).resolve()
        self.errors: dict[str, str] = {}

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, root: str | os.PathLike[str] | None = None) -> Experiment:
        """From a YAML/JSON spec's mapping (keys: name, game, run, seeds, stop, resources, max_failures, loggers)."""
        grid = Grid.from_dict(data)
        return cls._from_grid(grid, root if root is not None else data.get("root", "experiments"))

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Experiment:
        """From a YAML spec file (see ``examples/experiments/*.yaml``)."""
        import yaml  # type: ignore[import-untyped]

        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        return cls.from_dict(data, root=root)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Experiment:
        """Reopen an experiment folder: its results read at once, and `run()` resumes what did not finish."""
        folder = Path(path).resolve()
        if not (folder / GRID_FILE).is_file():
            raise FileNotFoundError(f"{folder} is not an experiment folder: it has no {GRID_FILE}")
        data = json.loads((folder / GRID_FILE).read_text(encoding="utf-8"))
        return cls._from_grid(Grid.from_dict(data), folder.parent, check_games=False)

    @classmethod
    def _from_grid(cls, grid: Grid, root: Any, *, check_games: bool = True) -> Experiment:
        return cls(grid.name, grid.games, grid.runs, grid.seeds, grid.stop, root=root, resources=grid.resources,
                   max_failures=grid.max_failures, loggers=grid.loggers, save_seconds=grid.save_seconds,
                   _check_games=check_games)

    # -- where things are ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.grid.name

    @property
    def path(self) -> Path:
        """The experiment folder (Tune's experiment folder)."""
        return self.root / self.grid.name

    @property
    def trials(self) -> list[Trial]:
        return self.grid.trials

    def trial_dir(self, trial: Trial | str | int) -> Path:
        """A trial's folder (by `Trial`, key or index); its run folder is ``<trial_dir>/run``."""
        return self.path / self._trial(trial).key

    def load_run(self, trial: Trial | str | int) -> Any:
        """A trial's run, rebuilt from its run folder (``pb.load_run(exp.trial_dir(t) / "run")``)."""
        from pbmarl.runs.folder import load_run

        return load_run(self.trial_dir(trial) / "run")

    def _trial(self, trial: Trial | str | int) -> Trial:
        if isinstance(trial, Trial):
            return trial
        for t in self.trials:
            if trial in (t.key, t.index):
                return t
        raise KeyError(f"no trial {trial!r} in experiment {self.name!r}; trials are {self.trials[0].key} ...")

    # -- running ----------------------------------------------------------------------------
    def run(self, *, address: str | None = None, num_cpus: int | None = None, progress: bool | None = None,
            max_concurrent: int | None = None) -> Experiment:
        """Run every trial that has not finished, on Ray Tune; returns self.

        Args:
            address: None for an embedded local Ray (`num_cpus` of this machine's), ``"auto"`` or
                ``"host:port"`` for a cluster (`pb.init_ray`). On a cluster, `root` must be a folder every
                node sees (a shared filesystem), as Tune requires of its storage.
            progress: one bar for the experiment (trials done, running, failed); default in a notebook
                or a terminal.
            max_concurrent: at most this many trials at once (default: as many as `resources` allow).

        A folder that already holds this experiment resumes it through Tune's restore: finished
        trials are kept as they are, unfinished and failed ones go on from their last save.
        """
        from ray import tune

        from pbmarl.experiments.progress import TrialProgress
        from pbmarl.experiments.trial import run_trial
        from pbmarl.hosting import init_ray

        init_ray(address, num_cpus, quiet=True)
        self._write_grid()
        trainable = tune.with_resources(run_trial, {k: float(v) for k, v in self.grid.resources.items()})
        callbacks = _tune_loggers()
        with _quiet_tune(auto_loggers=callbacks is None):
            if tune.Tuner.can_restore(str(self.path)):
                tuner = tune.Tuner.restore(str(self.path), trainable, resume_unfinished=True, resume_errored=True)
            else:
                tuner = tune.Tuner(
                    trainable, param_space={"trial": tune.grid_search(self._trial_configs())},
                    tune_config=tune.TuneConfig(trial_dirname_creator=trial_key, trial_name_creator=trial_key,
                                                max_concurrent_trials=max_concurrent, reuse_actors=True),
                    run_config=tune.RunConfig(name=self.name, storage_path=str(self.root), verbose=1,
                                              failure_config=tune.FailureConfig(max_failures=self.grid.max_failures),
                                              callbacks=callbacks,
                                              progress_reporter=TrialProgress(len(self.trials), progress=progress)))
            grid = tuner.fit()
        self.errors = {trial_key_of(r): str(r.error).strip().splitlines()[-1] if str(r.error).strip() else repr(r.error)
                       for r in (grid[i] for i in range(len(grid))) if r.error is not None}
        return self

    def _trial_configs(self) -> list[dict[str, Any]]:
        stop = self.grid.to_dict()["stop"]
        return [t.to_dict() | {"stop": stop, "loggers": list(self.grid.loggers), "experiment": self.name,
                               "experiment_dir": str(self.path), "save_seconds": self.grid.save_seconds,
                               "cpus": float(self.grid.resources.get("cpu", 1))} for t in self.trials]

    def _write_grid(self) -> None:
        from pbmarl.io import write_json

        data = self.grid.to_dict()
        target = self.path / GRID_FILE
        if target.is_file():
            old = json.loads(target.read_text(encoding="utf-8"))
            if [t["key"] for t in old.get("trials", [])] != [t["key"] for t in data["trials"]] or \
                    old.get("stop") != data["stop"]:
                raise ValueError(f"{self.path} already holds experiment {old.get('name')!r} with another grid or stop; "
                                 "give another name or root, or reopen it with pb.Experiment.load(path)")
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(target, data)

    # -- reading ---------------------------------------------------------------------------------
    @property
    def status(self) -> pd.DataFrame:
        """One row per trial: game, method, seed, state (finished / running or interrupted / failed / not started),
        its last iteration and its last error."""
        rows = []
        for t in self.trials:
            folder = self.path / t.key
            finished = folder / FINISHED
            errors = folder / "errors.txt"
            history = folder / "run" / "history.csv"
            if finished.is_file():
                state = "finished"
            elif errors.is_file():
                state = "failed"
            elif history.is_file():
                state = "unfinished"
            else:
                state = "not started"
            last = errors.read_text(encoding="utf-8").strip().splitlines()[-1] if errors.is_file() else ""
            iters = int(pd.read_csv(history)["iteration"].max()) if history.is_file() else 0
            rows.append({"trial": t.key, "game": t.game, "method": t.method, "seed": t.seed, "state": state,
                         "iteration": iters, "error": last})
        return pd.DataFrame(rows).set_index("trial")

    @property
    def results(self) -> pd.DataFrame:
        """One long DataFrame of every trial's history: experiment, trial, game, method, options, seed,
        iteration, then the history columns (the shared ones first)."""
        from pbmarl.runs.records import order_columns

        frames = []
        for t in self.trials:
            history = self.path / t.key / "run" / "history.csv"
            if not history.is_file():
                continue
            h = pd.read_csv(history)
            h.insert(0, "experiment", self.name)
            h.insert(1, "trial", t.key)
            h.insert(2, "game", t.game)
            h.insert(3, "method", t.method)
            h.insert(4, "options", json.dumps(t.spec.to_dict()["options"], sort_keys=True))
            h.insert(5, "seed", t.seed)
            frames.append(h)
        head = ["experiment", "trial", "game", "method", "options", "seed"]
        if not frames:
            return pd.DataFrame(columns=head + ["iteration", "env_steps", "episodes", "wall_time"])
        out = pd.concat(frames, ignore_index=True)
        rest = order_columns([c for c in out.columns if c not in head])
        return out[head + rest]

    def save_results(self, folder: str | os.PathLike[str], *, metric: str | None = None, description: str = "",
                     source: Mapping[str, Any] | None = None) -> Path:
        """Write `results` and the grid to a small folder (``results.csv``, ``results.json``) that can be committed;
        `pb.compare` and ``pbmarl report`` read it as they read this experiment. See `pbmarl.experiments.saved`."""
        from pbmarl.experiments.saved import save_results

        status = self.status
        states = {k: s for k, s in status["state"].items() if s != "finished"}
        return save_results(self.results, folder, name=self.name, metric=metric, description=description,
                            source={"grid": self.grid.to_dict(), **dict(source or {})}, states=states)

    def __repr__(self) -> str:
        g = self.grid
        return (f"Experiment({self.name!r}: {len(g.games)} game(s) x {len(g.runs)} method(s) x {len(g.seeds)} seed(s) "
                f"= {len(self.trials)} trials, {self.path})")


def trial_key(trial: Any) -> str:
    """Tune's trial folder and name: the grid's key for the trial."""
    return str(trial.config["trial"]["key"])


def trial_key_of(result: Any) -> str:
    return str(result.config["trial"]["key"]) if result.config else str(result.path)


def _tune_loggers() -> list[Any] | None:
    """Tune's JSON and CSV loggers (params.json, result.json, progress.csv); pbmarl writes TensorBoard itself.

    None: Tune's automatic loggers, which are exactly those two where tensorboardX is not installed
    (its TensorBoard one then fails to start, quietly). Passing callbacks costs a second of CPU at
    each start (see `pbmarl.experiments.progress`), so they are passed only where tensorboardX would
    add Tune's own TensorBoard files beside pbmarl's."""
    import importlib.util

    if importlib.util.find_spec("tensorboardX") is None:
        return None
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    return [JsonLoggerCallback(), CSVLoggerCallback()]


@contextlib.contextmanager
def _quiet_tune(*, auto_loggers: bool = False) -> Iterator[None]:
    """Tune's automatic loggers on only when asked (see `_tune_loggers`), its legacy output (printing only
    through pbmarl's progress reporter) and its INFO lines hidden."""
    names = ("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "RAY_AIR_NEW_OUTPUT")  # the new output prints a box even at verbose=0
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update({"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "0" if auto_loggers else "1", "RAY_AIR_NEW_OUTPUT": "0"})
    loggers = [logging.getLogger(n) for n in ("ray.tune", "ray.train", "ray.air", "ray.tune.utils.callback")]
    levels = [lg.level for lg in loggers]
    for lg in loggers[:-1]:
        lg.setLevel(logging.WARNING)
    loggers[-1].setLevel(logging.ERROR)  # its warning that the TensorBoard logger (tensorboardX) cannot start
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
