"""`compare`: per game and method, mean / median / IQM with stratified-bootstrap 95% intervals, and the
probability of improvement between every pair of methods, computed by rliable (Agarwal et al., "Deep
RL at the Edge of the Statistical Precipice", NeurIPS 2021).

Scores are one number per run (trial): a metric's value at the end (``at="final"``), or the last
value recorded at or before a budget of ``env_steps=``, ``wall_time=`` or ``iteration=``. Methods
with unequal numbers of runs on a game are refused, as marl-eval refuses them, unless
``allow_unequal=True``.

Each game is compared on its own (one task), so the mean, the median and the IQM (25% trimmed mean) are
taken over that game's runs, with rliable's stratified bootstrap for the intervals. The median is the
median run, not rliable's `aggregate_median` (the median across tasks of each task's mean score), which
with one task would only repeat the mean.

Example:
    >>> import pandas as pd
    >>> rows = [{"game": "g", "method": m, "trial": f"{m}{s}", "seed": s, "iteration": 1,
    ...          "exploitability": v} for m, base in (("a", 0.1), ("b", 0.5)) for s, v in
    ...         enumerate(base + 0.01 * i for i in range(5))]
    >>> c = compare(pd.DataFrame(rows), metric="exploitability", reps=200)
    >>> c.table.loc[("g", "a"), "iqm"].round(3), c.table.loc[("g", "a"), "runs"]
    (np.float64(0.12), np.int64(5))
    >>> float(c.improvement.loc[("g", "a", "b"), "probability"])  # lower exploitability is better
    1.0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.experiments.rliable_compat import load, seeded

__all__ = ["Comparison", "compare", "higher_is_better", "scores"]

_LOWER = ("exploitability", "nash_conv", "loss/", "time/", "wall_time", "meta_nash_conv")
_AXES = ("env_steps", "wall_time", "iteration")


def higher_is_better(metric: str) -> bool:
    """Returns go up, exploitability, NashConv, losses and times go down."""
    return not any(metric == p or (p.endswith("/") and metric.startswith(p)) for p in _LOWER)


@dataclass(frozen=True)
class Comparison:
    """What `compare` returns.

    Attributes:
        metric, at: what was compared, and where (``"final"``, or ``"env_steps=20000"``, ...).
        table: index (game, method); columns runs, mean, mean_low, mean_high, median, median_low, median_high,
            iqm, iqm_low, iqm_high (95% stratified-bootstrap intervals).
        improvement: index (game, x, y); columns probability (P(x better than y)), low, high.
        scores: ``{game: {method: array of one score per run}}`` (the raw numbers compared).
        higher_is_better: the direction used for the probability of improvement and the profiles.
    """

    metric: str
    at: str
    table: pd.DataFrame
    improvement: pd.DataFrame
    scores: Mapping[str, Mapping[str, np.ndarray]]
    higher_is_better: bool

    def _repr_html_(self) -> str:
        return f"<b>{self.metric} at {self.at}</b>" + self.table.to_html(float_format=lambda v: f"{v:.4g}")

    def __repr__(self) -> str:
        return f"Comparison({self.metric} at {self.at})\n{self.table.to_string(float_format=lambda v: f'{v:.4g}')}"

    def to_markdown(self) -> str:
        """The IQM table as Markdown: one row per game and method, intervals in brackets."""
        lines = ["| game | method | runs | IQM [95% CI] | mean [95% CI] | median [95% CI] |", "|---|---|---|---|---|---|"]
        for (game, method), r in self.table.iterrows():
            cells = [f"{r[k]:.4g} [{r[k + '_low']:.4g}, {r[k + '_high']:.4g}]" for k in ("iqm", "mean", "median")]
            lines.append(f"| {game} | {method} | {int(r['runs'])} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def scores(results: pd.DataFrame, metric: str, *, at: str = "final", budget: float | None = None,
           axis: str | None = None) -> dict[str, dict[str, np.ndarray]]:
    """One score per trial: ``{game: {method: array}}`` (final, or the last value at or before `budget` on `axis`)."""
    if metric not in results.columns:
        numeric = [c for c in results.columns if pd.api.types.is_numeric_dtype(results[c])]
        raise ValueError(f"no column {metric!r} in the results; numeric columns: {', '.join(numeric)}")
    out: dict[str, dict[str, np.ndarray]] = {}
    for (game, method), frame in results.groupby(["game", "method"], sort=False):
        values = []
        for trial, runs in frame.groupby("trial", sort=False):
            rows = runs.dropna(subset=[metric]).sort_values("iteration")
            if axis is not None and budget is not None:
                rows = rows[rows[axis] <= budget]
            if rows.empty:
                where = "" if axis is None else f" at or before {axis}={budget:g}"
                raise ValueError(f"trial {trial!r} ({method} on {game}) has no {metric!r} value{where}")
            values.append(float(rows[metric].iloc[-1]))
        out.setdefault(str(game), {})[str(method)] = np.asarray(values, dtype=float)
    return out


def compare(results: pd.DataFrame, metric: str = "exploitability", *, at: str = "final",
            env_steps: float | None = None, wall_time: float | None = None, iteration: int | None = None,
            higher: bool | None = None, allow_unequal: bool = False, reps: int = 2_000, poi_reps: int = 2_000,
            seed: int = 0) -> Comparison:
    """Mean, median and IQM with 95% stratified-bootstrap intervals, and pairwise probability of improvement.

    Args:
        results: an experiment's `results` (columns game, method, trial, iteration and `metric`).
        metric: a history column (``"exploitability"``, ``"return/0"``, ...).
        at: ``"final"`` (each run's last value); or give one budget: `env_steps`, `wall_time` or `iteration`.
        higher: whether higher is better (default: returns yes; exploitability, NashConv, losses, times no).
        allow_unequal: compare methods with different numbers of runs on a game (refused by default).
        reps: bootstrap resamples for the intervals (rliable's paper uses 50,000; slower by the same factor);
            poi_reps: for the probability of improvement (rliable's 2,000).
        seed: seeds the resampling (the numbers do not change from call to call).
    """
    rly, metrics = load()
    budgets = {k: v for k, v in (("env_steps", env_steps), ("wall_time", wall_time), ("iteration", iteration))
               if v is not None}
    if len(budgets) > 1 or (budgets and at != "final"):
        raise ValueError(f"give at='final' or one budget (env_steps=, wall_time= or iteration=), got at={at!r} and "
                         f"{budgets}")
    if at != "final":
        raise ValueError(f"at must be 'final' (or give env_steps=, wall_time= or iteration=), got {at!r}")
    axis, budget = next(iter(budgets.items())) if budgets else (None, None)
    where = "final" if axis is None else f"{axis}={budget:g}"
    data = scores(results, metric, budget=budget, axis=axis)
    up = higher_is_better(metric) if higher is None else bool(higher)
    for game, by_method in data.items():
        counts = {m: len(v) for m, v in by_method.items()}
        if len(set(counts.values())) > 1 and not allow_unequal:
            raise ValueError(f"methods have unequal numbers of runs on {game!r}: "
                             f"{', '.join(f'{m} {n}' for m, n in counts.items())}; rerun the missing seeds, or pass "
                             "allow_unequal=True to compare them anyway")

    def aggregates(s: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(s), np.median(s), metrics.aggregate_iqm(s)])

    rows, pairs = [], []
    for game, by_method in data.items():
        matrices = {m: v.reshape(-1, 1) for m, v in by_method.items()}  # (runs, 1 task): stratified by the game
        with seeded(seed):
            point, interval = rly.get_interval_estimates(matrices, aggregates, reps=reps)
        for m in by_method:
            row: dict[str, Any] = {"game": game, "method": m, "runs": len(by_method[m])}
            for k, name in enumerate(("mean", "median", "iqm")):
                row[name], row[f"{name}_low"], row[f"{name}_high"] = point[m][k], interval[m][0, k], interval[m][1, k]
            rows.append(row)
        sign = 1.0 if up else -1.0
        names = list(by_method)
        # one direction per pair: P(y > x) = 1 - P(x > y) (the Mann-Whitney U counts ties as halves both ways)
        pair_data = {f"{x}\x00{y}": (sign * matrices[x], sign * matrices[y])
                     for i, x in enumerate(names) for y in names[i + 1:]}
        if pair_data:
            with seeded(seed):
                p_point, p_interval = rly.get_interval_estimates(pair_data, metrics.probability_of_improvement,
                                                                 reps=poi_reps)
            for key in pair_data:
                x, y = key.split("\x00")
                p, (low, high) = float(p_point[key]), np.ravel(p_interval[key])
                pairs.append({"game": game, "x": x, "y": y, "probability": p, "low": float(low), "high": float(high)})
                pairs.append({"game": game, "x": y, "y": x, "probability": 1.0 - p, "low": 1.0 - float(high),
                              "high": 1.0 - float(low)})
    table = pd.DataFrame(rows).set_index(["game", "method"])
    improvement = (pd.DataFrame(pairs).set_index(["game", "x", "y"]) if pairs
                   else pd.DataFrame(columns=["probability", "low", "high"]))
    return Comparison(metric, where, table, improvement, data, up)
