"""Experiment results kept as a table: a folder with ``results.csv`` and ``results.json``.

``results.csv`` is the long format of `Experiment.results` (experiment, trial, game, method, options,
seed, iteration, env_steps, episodes, wall_time, then the metrics); ``results.json`` says what the
runs are, the metric they are compared on, and where the rows came from. Such a folder is small
enough to commit, `pb.compare` reads its table, and ``pbmarl report DIR`` writes its report as it
does an experiment folder's. An experiment writes one with `Experiment.save_results`; a converter
writes one from rows measured elsewhere (``benchmarks/to_experiments.py``).

Example:
    >>> import pandas as pd, tempfile
    >>> rows = pd.DataFrame({"trial": ["a0", "a1"], "game": "g", "method": "a", "seed": [0, 1],
    ...                      "iteration": 1, "return": [1.0, 2.0]})
    >>> folder = save_results(rows, tempfile.mkdtemp(), name="demo", metric="return")
    >>> SavedResults.load(folder).results[["trial", "return"]].to_dict("list")
    {'trial': ['a0', 'a1'], 'return': [1.0, 2.0]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["RESULTS_CSV", "RESULTS_JSON", "SavedResults", "save_results"]

RESULTS_CSV = "results.csv"
RESULTS_JSON = "results.json"
#: the columns every results table has, in this order (`Experiment.results` writes them all)
HEAD = ("experiment", "trial", "game", "method", "options", "seed", "iteration", "env_steps", "episodes", "wall_time")
_REQUIRED = ("trial", "game", "method", "seed", "iteration")


@dataclass(frozen=True)
class SavedResults:
    """A results folder, read: its name, folder, table and description (``results.json``)."""

    name: str
    path: Path
    results: pd.DataFrame
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SavedResults:
        folder = Path(path).resolve()
        if not (folder / RESULTS_CSV).is_file():
            raise FileNotFoundError(f"{folder} is not a results folder: it has no {RESULTS_CSV}")
        meta = json.loads((folder / RESULTS_JSON).read_text(encoding="utf-8")) if (folder / RESULTS_JSON).is_file() \
            else {}
        results = pd.read_csv(folder / RESULTS_CSV, dtype={"options": str, "trial": str, "method": str, "game": str})
        return cls(str(meta.get("name", folder.name)), folder, results, meta)

    @property
    def metric(self) -> str | None:
        """The metric the rows are compared on, when ``results.json`` names one."""
        return self.meta.get("metric")

    @property
    def status(self) -> pd.DataFrame:
        """One row per trial, as `Experiment.status` has it (a trial not named in ``results.json`` is finished)."""
        states = self.meta.get("states", {})
        last = self.results.groupby("trial", sort=False).agg(game=("game", "first"), method=("method", "first"),
                                                              seed=("seed", "first"), iteration=("iteration", "max"))
        last["state"] = [states.get(t, "finished") for t in last.index]
        last["error"] = ""
        return last[["game", "method", "seed", "state", "iteration", "error"]]

    def describe(self) -> str:
        """One sentence: how many games, methods and runs, and what ``results.json`` says of them."""
        r = self.results
        text = (f"{r['game'].nunique()} game(s) x {r['method'].nunique()} method(s), {r['trial'].nunique()} runs "
                f"({r.groupby(['game', 'method'])['trial'].nunique().min()}-"
                f"{r.groupby(['game', 'method'])['trial'].nunique().max()} per method).")
        return f"{text} {self.meta['description']}" if self.meta.get("description") else text


def save_results(results: pd.DataFrame, folder: str | os.PathLike[str], *, name: str | None = None,
                 metric: str | None = None, description: str = "", source: Mapping[str, Any] | None = None,
                 states: Mapping[str, str] | None = None) -> Path:
    """Write `results` (the long format of `Experiment.results`) and its description to `folder`; returns it.

    Args:
        results: one row per trial and iteration; needs trial, game, method, seed and iteration columns
            (the other shared ones are filled in empty when missing).
        name: the experiment's name (default: the folder's); it fills the experiment column.
        metric: the column the rows are compared on (the report's default).
        description: a sentence a reader needs: the budget, the peer, the convention of the metric.
        source: where the rows came from (files, commands, commits), kept as given.
        states: a trial's state when it is not "finished" (``{"0003-...": "failed"}``).

    Raises:
        ValueError: a required column is missing, or `metric` is not a column.
    """
    missing = [c for c in _REQUIRED if c not in results.columns]
    if missing:
        raise ValueError(f"results need the columns {', '.join(_REQUIRED)}; missing {', '.join(missing)}")
    if metric is not None and metric not in results.columns:
        raise ValueError(f"metric {metric!r} is not a column of the results; columns: {', '.join(results.columns)}")
    from pbmarl.runs.records import order_columns

    folder = Path(folder)
    name = name or folder.name
    table = results.copy()
    table["experiment"] = name
    for col in HEAD:
        if col not in table:
            table[col] = "{}" if col == "options" else float("nan")
    rest = order_columns([c for c in table.columns if c not in HEAD])
    table = table[list(HEAD) + rest].sort_values(["game", "method", "seed", "iteration"], kind="stable")
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / RESULTS_CSV, index=False)
    meta = {"name": name, "metric": metric, "description": description, "source": dict(source or {}),
            "states": dict(states or {})}
    (folder / RESULTS_JSON).write_text(json.dumps(meta, indent=1, default=str) + "\n", encoding="utf-8")
    return folder
