"""`write_report`: one Markdown file of an experiment's tables and figures (``pbmarl report DIR``).

The report goes to ``<experiment>/report/report.md`` beside its figures (PNG and SVG), with
relative links, so the folder can be copied into a README or a paper's appendix as it is. DIR is
an experiment folder, or a results folder (``results.csv`` and ``results.json``, see
`pbmarl.experiments.saved`): the same tables and figures from a table of runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["default_metric", "write_report"]


def default_metric(results: pd.DataFrame) -> str:
    """Exploitability where the runs measure it, else the mean of the ``return/...`` columns (as ``return``)."""
    if "exploitability" in results and results["exploitability"].notna().any():
        return "exploitability"
    returns = [c for c in results.columns if c.startswith("return/")]
    if not returns:
        raise ValueError("the results have neither exploitability nor return/... columns: give metric=")
    if len(returns) == 1:
        return returns[0]
    results["return"] = results[returns].mean(axis=1)
    return "return"


def _open(experiment: Any) -> Any:
    """A `pb.Experiment` or `SavedResults` as given, or the one its folder holds."""
    from pbmarl.experiments.experiment import GRID_FILE, Experiment
    from pbmarl.experiments.saved import RESULTS_CSV, SavedResults

    if isinstance(experiment, (Experiment, SavedResults)):
        return experiment
    folder = Path(experiment)
    if (folder / GRID_FILE).is_file():
        return Experiment.load(folder)
    if (folder / RESULTS_CSV).is_file():
        return SavedResults.load(folder)
    raise FileNotFoundError(f"{folder} is neither an experiment folder (no {GRID_FILE}) nor a results folder "
                            f"(no {RESULTS_CSV})")


def write_report(experiment: Any, *, metric: str | None = None, out: str | os.PathLike[str] | None = None,
                 reps: int = 2_000, formats: tuple[str, ...] = ("png", "svg"), dpi: int = 120) -> Path:
    """Write the report of `experiment` (a `pb.Experiment`, a `SavedResults`, or either's folder); returns the
    Markdown file. `formats`: the figures' file types (the Markdown links the PNGs), rasters at `dpi`."""
    import matplotlib.pyplot as plt

    from pbmarl.experiments import plots
    from pbmarl.experiments.saved import SavedResults
    from pbmarl.experiments.stats import compare

    exp = _open(experiment)
    folder = Path(out) if out is not None else exp.path / "report"
    folder.mkdir(parents=True, exist_ok=True)
    results = exp.results
    if results.empty:
        raise ValueError(f"experiment {exp.name!r} has no finished iterations yet ({exp.path}); run it first")
    saved = isinstance(exp, SavedResults)
    metric = metric or (exp.metric if saved else None) or default_metric(results)
    status = exp.status
    counts = status.groupby("state").size().to_dict()
    done = results.groupby("trial").size().index
    finished = results[results["trial"].isin(status.index[status["state"] == "finished"])]
    table_src = finished if not finished.empty else results[results["trial"].isin(done)]
    comp = compare(table_src, metric, reps=reps, allow_unequal=True)
    if saved:
        what = [exp.describe()]
    else:
        what = [f"{len(exp.grid.games)} game(s) x {len(exp.grid.runs)} method(s) x {len(exp.grid.seeds)} seed(s) = "
                f"{len(exp.trials)} trials; " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + ".",
                f"Stop: `{exp.grid.to_dict()['stop']}`."]
    lines = [f"# Experiment `{exp.name}`", "", *what,
             f"Metric: `{metric}` ({plots.direction(metric)}), "
             f"compared at {comp.at} over finished trials; 95% stratified-bootstrap intervals ({reps:,} resamples, "
             "rliable).", "", "## Interquartile mean, mean and median", "", comp.to_markdown(), ""]
    figures = []
    # an axis every method moves along (exact methods take no env steps: they are drawn against iterations)
    x_axes = [a for a in ("env_steps", "iteration", "wall_time")
              if a in results and (results.groupby("method")[a].max() > 0).all()]
    if "env_steps" in x_axes and "iteration" in x_axes:
        x_axes.remove("iteration")
    for x in x_axes:
        figures.append((f"{metric} against {x.replace('_', ' ')}", f"curves_{x}",
                        plots.curves(results, metric, x=x)))
    figures += [("Interval estimates", "intervals", plots.intervals(comp)),
                ("Performance profiles", "profiles", plots.profiles(comp)),
                ("Probability of improvement", "improvement", plots.probability_matrix(comp))]
    lines += ["## Figures", ""]
    for title, stem, fig in figures:
        plots.save(fig, folder / stem, formats=formats, dpi=dpi)
        plt.close(fig)
        lines += [f"### {title}", "", f"![{title}]({stem}.png)", ""]
    if not comp.improvement.empty:
        lines += ["## Probability of improvement", "", "| game | X | Y | P(X better than Y) [95% CI] |",
                  "|---|---|---|---|"]
        for (game, x, y), r in comp.improvement.iterrows():
            lines.append(f"| {game} | {x} | {y} | {r['probability']:.3f} [{r['low']:.3f}, {r['high']:.3f}] |")
        lines.append("")
    failed = status[status["state"] == "failed"]
    if not failed.empty:
        lines += ["## Failed trials", "", "| trial | error |", "|---|---|"]
        lines += [f"| {k} | {r['error']} |" for k, r in failed.iterrows()] + [""]
    target = folder / "report.md"
    target.write_text("\n".join(lines), encoding="utf-8")
    return target
