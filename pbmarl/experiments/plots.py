"""Figures of an experiment: learning curves with 95% bands, interval estimates, performance profiles,
and the probability-of-improvement matrix (matplotlib; each returns its Figure, `save` writes PNG/SVG).

Colours come from one fixed palette per method (tab10, then tab20), legends sit outside the axes,
and figures grow with the number of methods, so eight methods stay legible. The y axis turns
logarithmic when a positive metric spans more than two decades.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.experiments.stats import Comparison, higher_is_better

__all__ = ["curves", "intervals", "probability_matrix", "profiles", "save"]


def _colors(methods: Sequence[str]) -> dict[str, Any]:
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10" if len(methods) <= 10 else "tab20")
    return {m: cmap(i % cmap.N) for i, m in enumerate(methods)}


def _band(values: np.ndarray, rng: np.random.Generator, reps: int = 1000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over runs (rows) and its 95% percentile-bootstrap interval, at every column (NaN before any run has
    a value there)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _band_of(values, rng, reps)


def _band_of(values: np.ndarray, rng: np.random.Generator, reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = np.nanmean(values, axis=0)
    if values.shape[0] < 2:
        return mean, mean, mean
    idx = rng.integers(0, values.shape[0], size=(reps, values.shape[0]))
    boots = np.nanmean(values[idx], axis=1)
    return mean, np.nanpercentile(boots, 2.5, axis=0), np.nanpercentile(boots, 97.5, axis=0)


def _log_scale(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return bool(finite.size and finite.min() > 0 and finite.max() / finite.min() > 100)


def curves(results: pd.DataFrame, metric: str = "exploitability", *, x: str = "env_steps", points: int = 60,
           seed: int = 0) -> Any:
    """`metric` against `x` (``env_steps``, ``wall_time`` or ``iteration``), one panel per game, one line per
    method: the mean over runs with a 95% bootstrap band (each run read as its last value at or before x), drawn
    as far as the method's shortest run reaches (methods whose runs take very different times keep their lines)."""
    import matplotlib.pyplot as plt

    games = list(dict.fromkeys(results["game"]))
    methods = list(dict.fromkeys(results["method"]))
    colors = _colors(methods)
    fig, axes = plt.subplots(1, len(games), figsize=(5.5 * len(games) + 2.5, 4.0), squeeze=False)
    rng = np.random.default_rng(seed)
    for ax, game in zip(axes[0], games, strict=True):
        frame = results[results["game"] == game].dropna(subset=[metric])
        shown: list[np.ndarray] = []
        for method in methods:
            runs = frame[frame["method"] == method]
            if runs.empty:
                continue
            grid = np.linspace(runs[x].min(), runs.groupby("trial")[x].max().min(), points)
            table = []
            for _, run in runs.groupby("trial"):
                run = run.sort_values(x)
                pos = np.searchsorted(run[x].to_numpy(), grid, side="right") - 1
                vals = run[metric].to_numpy(dtype=float)
                table.append(np.where(pos >= 0, vals[np.clip(pos, 0, None)], np.nan))
            mean, low, high = _band(np.asarray(table), rng)
            ax.plot(grid, mean, color=colors[method], label=f"{method} (n={len(table)})", lw=1.6)
            ax.fill_between(grid, low, high, color=colors[method], alpha=0.2, lw=0)
            shown.append(mean)
        if shown and _log_scale(np.concatenate(shown)):
            ax.set_yscale("log")
        ax.set_title(game)
        ax.set_xlabel(x.replace("_", " ") + (" (s)" if x == "wall_time" else ""))
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def intervals(comparison: Comparison) -> Any:
    """IQM, mean and median per method with their 95% intervals, one row of panels per game."""
    import matplotlib.pyplot as plt

    table = comparison.table
    games = list(dict.fromkeys(table.index.get_level_values("game")))
    methods = list(dict.fromkeys(table.index.get_level_values("method")))
    colors = _colors(methods)
    fig, axes = plt.subplots(len(games), 3, figsize=(11, 0.45 * len(methods) * len(games) + 1.3), squeeze=False)
    for row, game in zip(axes, games, strict=True):
        sub = table.loc[game]
        for ax, stat in zip(row, ("iqm", "mean", "median"), strict=True):
            for i, method in enumerate(sub.index):
                r = sub.loc[method]
                ax.barh(i, r[f"{stat}_high"] - r[f"{stat}_low"], left=r[f"{stat}_low"], height=0.6,
                        color=colors[method], alpha=0.75)
                ax.plot([r[stat]] * 2, [i - 0.3, i + 0.3], color="k", lw=1.2)
            ax.set_yticks(range(len(sub.index)), list(sub.index) if stat == "iqm" else [""] * len(sub.index),
                          fontsize="small")
            ax.set_title(f"{stat.upper() if stat == 'iqm' else stat.capitalize()} ({game})", fontsize="medium")
            ax.grid(axis="x", alpha=0.3)
        row[1].set_xlabel(f"{comparison.metric} at {comparison.at}")
    fig.tight_layout()
    return fig


def profiles(comparison: Comparison, *, points: int = 101, reps: int = 1_000) -> Any:
    """Performance profiles (rliable): the fraction of runs with a score past each threshold, with 95% bands."""
    import matplotlib.pyplot as plt

    from pbmarl.experiments.rliable_compat import load, seeded

    rly, _ = load()
    games = list(comparison.scores)
    methods = list(dict.fromkeys(m for g in games for m in comparison.scores[g]))
    colors = _colors(methods)
    fig, axes = plt.subplots(1, len(games), figsize=(5.5 * len(games) + 2.5, 4.0), squeeze=False)
    up = comparison.higher_is_better
    for ax, game in zip(axes[0], games, strict=True):
        data = {m: v.reshape(-1, 1) for m, v in comparison.scores[game].items()}
        allv = np.concatenate([v.ravel() for v in data.values()])
        log = _log_scale(allv)
        taus = np.geomspace(allv.min(), allv.max(), points) if log else np.linspace(allv.min(), allv.max(), points)
        if up:
            signed, sign_taus = data, taus
        else:  # the fraction of runs at or below tau: profiles of the negated scores
            signed, sign_taus = {m: -v for m, v in data.items()}, -taus
        with seeded(0):
            prof, cis = rly.create_performance_profile(signed, sign_taus - (1e-12 if up else -1e-12), reps=reps)
        for m in data:
            ax.plot(taus, prof[m], color=colors[m], label=m, lw=1.6)
            ax.fill_between(taus, cis[m][0], cis[m][1], color=colors[m], alpha=0.2, lw=0)
        if log:
            ax.set_xscale("log")
        ax.set_title(game)
        ax.set_xlabel(f"{comparison.metric} threshold ({'higher' if up else 'lower'} is better)")
        ax.set_ylabel(f"fraction of runs {'>' if up else '<='} threshold")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def probability_matrix(comparison: Comparison) -> Any:
    """P(row method better than column method) per game, as a heat map with the numbers written in."""
    import matplotlib.pyplot as plt

    games = list(comparison.scores)
    n = max(len(comparison.scores[g]) for g in games)
    fig, axes = plt.subplots(1, len(games), figsize=((0.75 * n + 2.5) * len(games), 0.65 * n + 1.8), squeeze=False)
    for ax, game in zip(axes[0], games, strict=True):
        methods = list(comparison.scores[game])
        mat = np.full((len(methods), len(methods)), np.nan)
        if not comparison.improvement.empty and game in comparison.improvement.index.get_level_values(0):
            sub = comparison.improvement.loc[game]
            for i, x in enumerate(methods):
                for j, y in enumerate(methods):
                    if x != y:
                        mat[i, j] = sub.loc[(x, y), "probability"]
        im = ax.imshow(mat, vmin=0, vmax=1, cmap="RdBu")
        for i in range(len(methods)):
            for j in range(len(methods)):
                if np.isfinite(mat[i, j]):
                    ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize="small",
                            color="white" if abs(mat[i, j] - 0.5) > 0.3 else "black")
        ax.set_xticks(range(len(methods)), methods, rotation=40, ha="right", fontsize="small")
        ax.set_yticks(range(len(methods)), methods, fontsize="small")
        ax.set_title(f"P(row better than column), {game}", fontsize="medium")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def save(fig: Any, path: str | os.PathLike[str], *, formats: Sequence[str] = ("png", "svg"),
         dpi: int = 120) -> list[Path]:
    """Write `fig` as each of `formats` beside `path` (its suffix replaced), rasters at `dpi`; returns the files."""
    base = Path(path)
    base.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for fmt in formats:
        target = base.with_suffix("." + fmt)
        fig.savefig(target, dpi=dpi, bbox_inches="tight")
        out.append(target)
    return out


def direction(metric: str) -> str:
    """``"higher is better"`` or ``"lower is better"`` for a history column."""
    return "higher is better" if higher_is_better(metric) else "lower is better"
