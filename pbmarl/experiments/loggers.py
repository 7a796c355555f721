"""Trackers for every run: CSV, TensorBoard, MLflow and W&B, under the shared history names.

Each logger takes a run's records one by one (``run.run(..., loggers=[...])``, or
``run.loggers = [...]``) and writes every number of a record's ``as_row()`` under its history
name (``exploitability``, ``nash_conv``, ``return/<group>``, ``loss/<name>``, ``time/<phase>``,
...), against ``env_steps`` as the step. A run that plays no environment steps (an exact PSRO)
steps by ``iteration`` instead; `step_of` says which, and ``env_steps``, ``iteration`` and
``wall_time`` are logged as metrics too, so any of them can be the x axis.

A PSRO-family run (PSRO, SelfPlay, FictitiousPlay, P2SRO, JPSRO) also writes its payoff table
(CSV) and meta-strategy (JSON) once per iteration: TensorBoard text, MLflow artifacts
``payoff_table/iteration_NNNN.csv``, W&B tables.

MLflow and W&B are optional extras, imported only when such a logger is made; a missing one
says what to install. TensorBoard needs the ``tensorboard`` package (``torch.utils.tensorboard``).

Example:
    >>> import pbmarl as pb, tempfile
    >>> run = pb.PSRO("kuhn_poker", seed=0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     tb = pb.experiments.TensorBoardLogger(d)
    ...     _ = run.run(3, progress=False, loggers=[tb])
    ...     tb.close()
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["CSVLogger", "MLflowLogger", "TensorBoardLogger", "WandbLogger", "artifacts", "make_logger", "scalars",
           "step_of"]


def scalars(record: Any) -> dict[str, float]:
    """The finite numbers of a record's history row, by their history names (bools and text left out)."""
    out: dict[str, float] = {}
    for key, value in record.as_row().items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                import numpy as np

                if not isinstance(value, np.number) or isinstance(value, np.bool_):
                    continue
            except ImportError:  # pragma: no cover - numpy is a dependency
                continue
        number = float(value)
        if math.isfinite(number):
            out[str(key)] = number
    return out


def step_of(row: dict[str, float], axis: str) -> int:
    """The step a row is logged at: its ``env_steps`` or its ``iteration`` (`axis`)."""
    return int(row.get(axis, row.get("iteration", 0)))


def _axis(run: Any, row: dict[str, float]) -> str:
    """``env_steps``, unless the run counts none (an exact PSRO iteration plays no game): then ``iteration``."""
    if row.get("env_steps", 0) > 0:
        return "env_steps"
    return "iteration" if row.get("iteration", 0) >= 1 else ""


def artifacts(run: Any) -> dict[str, str]:
    """A PSRO-family run's payoff table (CSV) and meta-strategy (JSON) as text; ``{}`` for other runs."""
    from pbmarl.algorithms.jpsro import JPSRO
    from pbmarl.algorithms.psro.psro import PSRO

    if not isinstance(run, (PSRO, JPSRO)) or run.meta_strategy is None:
        return {}
    sigma = run.meta_strategy
    meta = {f"player_{p}": {pid: float(w) for pid, w in zip(run.population.ids(p), sigma[p], strict=False)}
            for p in range(run.game.num_players)}
    return {"payoff_table.csv": run.table.to_frame().to_csv(), "meta_strategy.json": json.dumps(meta, indent=1)}


class _Logger:
    """What every logger shares: the step axis, chosen at the first counted record."""

    def __init__(self) -> None:
        self.axis = ""

    def log(self, run: Any, record: Any) -> None:
        row = scalars(record)
        if not self.axis:
            self.axis = _axis(run, row)
        step = step_of(row, self.axis or "iteration")
        self.write(row, step)
        extra = artifacts(run)
        if extra:
            self.write_artifacts(extra, int(row.get("iteration", 0)), step)

    def write(self, row: dict[str, float], step: int) -> None:  # pragma: no cover - each logger writes
        raise NotImplementedError

    def write_artifacts(self, files: dict[str, str], iteration: int, step: int) -> None:
        """By default a logger keeps no artifacts."""

    def flush(self) -> None:
        """By default nothing is buffered."""

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CSVLogger(_Logger):
    """The run's whole history as CSV at `path`, rewritten (atomically) after every record.

    A run folder always has its ``history.csv``; this one is for a run not saved, or watched live.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        self._run: Any = None

    def log(self, run: Any, record: Any) -> None:
        self._run = run
        self.flush()

    def write(self, row: dict[str, float], step: int) -> None:  # pragma: no cover - log writes the history
        pass

    def flush(self) -> None:
        if self._run is None:
            return
        from pbmarl.io import write_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = self._run.history.to_csv()
        write_atomic(self.path, lambda fh: fh.write(text), mode="w")


class TensorBoardLogger(_Logger):
    """TensorBoard event files in `logdir` (``torch.utils.tensorboard``); ``tensorboard --logdir`` shows them.

    Scalars under the history names; a PSRO-family run's payoff table and meta-strategy as text, per iteration.
    """

    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        super().__init__()
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ImportError("TensorBoardLogger needs torch and tensorboard: pip install 'pbmarl[torch,tracking]' "
                              f"({exc})") from None
        self.logdir = Path(logdir)
        self.writer = SummaryWriter(log_dir=str(self.logdir))

    def write(self, row: dict[str, float], step: int) -> None:
        for key, value in row.items():
            self.writer.add_scalar(key, value, global_step=step)

    def write_artifacts(self, files: dict[str, str], iteration: int, step: int) -> None:
        table = files["payoff_table.csv"]
        self.writer.add_text("payoff_table", _markdown_csv(table), global_step=iteration)
        self.writer.add_text("meta_strategy", "```\n" + files["meta_strategy.json"] + "\n```", global_step=iteration)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class MLflowLogger(_Logger):
    """An MLflow run: metrics under the history names, artifacts per iteration, through `MlflowClient`.

    Args:
        tracking_uri: where the runs go; default a local store in `folder` (``sqlite:///<folder>/mlflow.db``,
            the local store MLflow 3 keeps up; its old ``./mlruns`` file store is in maintenance mode).
        folder: the local store's folder (default ``mlruns``), artifacts under ``<folder>/artifacts``.
        experiment: the MLflow experiment (created when missing); run_name: the run's name.
        params: logged once as the run's parameters (a run's config, say).
    """

    def __init__(self, folder: str | os.PathLike[str] = "mlruns", *, experiment: str = "pbmarl",
                 run_name: str | None = None, tracking_uri: str | None = None,
                 params: dict[str, Any] | None = None) -> None:
        super().__init__()
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ImportError("MLflowLogger needs MLflow: pip install 'pbmarl[tracking]' (or pip install mlflow)") \
                from None
        folder = Path(folder).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        self.tracking_uri = tracking_uri or f"sqlite:///{folder / 'mlflow.db'}"
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        found = self.client.get_experiment_by_name(experiment)
        if found is not None:
            experiment_id = found.experiment_id
        else:
            try:
                experiment_id = self.client.create_experiment(experiment, artifact_location=(folder / "artifacts").as_uri())
            except Exception:  # noqa: BLE001 - another trial created it first
                got = self.client.get_experiment_by_name(experiment)
                if got is None:
                    raise
                experiment_id = got.experiment_id
        self.run_id: str = self.client.create_run(experiment_id, run_name=run_name).info.run_id
        if params:
            from mlflow.entities import Param

            self.client.log_batch(self.run_id, params=[Param(k, json.dumps(v)[:6000]) for k, v in params.items()])
        self._pending: list[Any] = []

    def write(self, row: dict[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        # MLflow keys allow letters, digits, _ - . space / only
        self._pending += [Metric(_mlflow_key(k), v, now, step) for k, v in row.items()]
        if len(self._pending) >= 500:
            self.flush()

    def write_artifacts(self, files: dict[str, str], iteration: int, step: int) -> None:
        for name, text in files.items():
            stem, ext = name.rsplit(".", 1)
            self.client.log_text(self.run_id, text, f"{stem}/iteration_{iteration:04d}.{ext}")

    def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:1000], self._pending[1000:]
            self.client.log_batch(self.run_id, metrics=batch)

    def close(self) -> None:
        self.flush()
        self.client.set_terminated(self.run_id)


class WandbLogger(_Logger):
    """A W&B run, offline by default (``wandb sync <dir>/wandb/offline-run-*`` uploads it later).

    Metrics under the history names, each against ``env_steps`` (W&B's ``define_metric``); a PSRO-family
    run's payoff table and meta-strategy as W&B tables, per iteration.
    """

    def __init__(self, folder: str | os.PathLike[str] = ".", *, project: str = "pbmarl", name: str | None = None,
                 group: str | None = None, mode: str = "offline", config: dict[str, Any] | None = None) -> None:
        super().__init__()
        try:
            import wandb
        except ImportError:
            raise ImportError("WandbLogger needs W&B: pip install 'pbmarl[tracking]' (or pip install wandb)") from None
        Path(folder).mkdir(parents=True, exist_ok=True)
        self._wandb = wandb
        self.run = wandb.init(mode=mode, dir=str(folder), project=project, name=name, group=group,  # type: ignore[arg-type]
                              config=config or {}, reinit="create_new",
                              settings=wandb.Settings(silent=True, console="off", x_disable_stats=True))
        self._defined = False

    def write(self, row: dict[str, float], step: int) -> None:
        if not self._defined:
            self.run.define_metric(self.axis or "iteration")
            self.run.define_metric("*", step_metric=self.axis or "iteration")
            self._defined = True
        self.run.log(row)

    def write_artifacts(self, files: dict[str, str], iteration: int, step: int) -> None:
        import io

        import pandas as pd

        table = pd.read_csv(io.StringIO(files["payoff_table.csv"]))
        self.run.log({"payoff_table": self._wandb.Table(dataframe=table),
                      "meta_strategy": self._wandb.Html("<pre>" + files["meta_strategy.json"] + "</pre>"),
                      self.axis or "iteration": step})

    def close(self) -> None:
        self.run.finish()


def make_logger(name: str, folder: Path, *, experiment: str, trial: str, params: dict[str, Any]) -> Any:
    """The logger an experiment's trial asks for by name, writing under the experiment folder."""
    if name == "tensorboard":
        return TensorBoardLogger(folder / trial / "tensorboard")
    if name == "mlflow":
        return MLflowLogger(folder / "mlflow", experiment=experiment, run_name=trial, params=params)
    if name == "wandb":
        return WandbLogger(folder / trial, project=experiment, name=trial, group=experiment, config=params)
    raise ValueError(f"unknown logger {name!r}; accepted: tensorboard, mlflow, wandb")


def _mlflow_key(key: str) -> str:
    return "".join(c if c.isalnum() or c in "_-. /" else "_" for c in key)


def _markdown_csv(text: str) -> str:
    lines = [line.split(",") for line in text.strip().splitlines()]
    if not lines:
        return ""
    head = "| " + " | ".join(lines[0]) + " |"
    rule = "|" + "---|" * len(lines[0])
    return "\n".join([head, rule] + ["| " + " | ".join(cells) + " |" for cells in lines[1:]])
