"""Curves over a run's history: exploitability, population sizes, meta-strategy weights."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pbmarl.plots._axes import (
    Histories,
    as_histories,
    blank_figure,
    distributions,
    iterations,
    member_colors,
    new_figure,
    player_columns,
)

X_AXES = {"iteration": "iteration", "wall_time": "wall time (s)", "env_steps": "environment steps"}
Y_AXES = {"exploitability": "exploitability (NashConv / players)", "nash_conv": "NashConv",
          "meta_nash_conv": "meta-game NashConv",
          "approx_nash_conv": "NashConv estimated by the oracle",
          "br_gain": "best-response gain over the meta-strategy (± stderr)"}
#: per overlaid line: markers and dash patterns, so that identical runs stay distinguishable
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
#: values at or below this are drawn at this height on a log scale (an exact 0 has no logarithm)
LOG_FLOOR = 1e-12


def plot_exploitability(
    history: Histories,
    *,
    x: str = "iteration",
    y: str | Sequence[str] = "exploitability",
    log: bool = True,
    logx: bool = False,
    reference: Mapping[str, float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Exploitability (or NashConv, ``y="nash_conv"``) against iteration, wall time or env steps.

    Args:
        history: one run's ``history`` DataFrame, or a mapping ``label -> history`` to overlay runs.
        x: ``"iteration"``, ``"wall_time"`` or ``"env_steps"``.
        y: ``"exploitability"``, ``"nash_conv"``, ``"meta_nash_conv"`` or ``"approx_nash_conv"``,
            or a list of them to draw several per run (e.g. true and estimated NashConv).
            ``"approx_nash_conv"`` is the sum of the values the next iteration's best responses
            reached against this iteration's meta-strategy: in a two-player zero-sum game, the
            meta-strategy's NashConv when the oracle is exact, and a lower estimate of it when the
            oracle learns (DQN, PPO). It is the progress measure for games too large to measure.
        log: logarithmic y axis; values at or below 1e-12 (0 up to rounding) are marked "converged".
        logx: logarithmic x axis (useful against wall time or env steps; points at 0 are dropped).
        reference: horizontal dashed lines ``label -> value``, e.g. a known equilibrium's exploitability.
        ax: draw into these axes instead of a new figure.
        title: axes title.

    Rows where `y` was not measured (None/NaN) are skipped; one line per run and `y`. A run whose curve is
    exactly an earlier one's says so in the legend (``'seed 1' (same curve as 'seed 0')``): PSRO with an exact
    oracle and exact payoffs samples nothing, so its seeds cannot differ; a learner or a sampled evaluator
    (``evaluator="rollout"``) makes them differ.

    Example:
        >>> plot_exploitability({"nash": run_a.history, "uniform": run_b.history}, x="wall_time")  # doctest: +SKIP
    """
    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    columns = [y] if isinstance(y, str) else list(y)
    for column in columns:
        if column not in Y_AXES:
            raise ValueError(f"y must be one of {sorted(Y_AXES)} (or a list of them), got {column!r}")
    if not columns:
        raise ValueError("y must name at least one column")
    runs = as_histories(history)
    fig, ax = new_figure(ax, figsize=(6, 4))
    lines = [(label, frame, column) for label, frame in runs.items() for column in columns]
    drawn: list[tuple[str, np.ndarray, np.ndarray]] = []  # (legend text, xs, ys) of the lines so far
    for k, (label, frame, column) in enumerate(lines):
        name = f" {label!r}" if label else ""
        xs = iterations(frame) if x == "iteration" else _column(frame, x, name)
        ys = _approx_nash_conv(frame, name) if column == "approx_nash_conv" else _column(frame, column, name)
        xs = np.asarray(xs, dtype=float)
        keep = np.isfinite(ys) & np.isfinite(xs)
        if logx:
            keep &= xs > 0
        if not keep.any():
            raise ValueError(f"history{name} has no {column!r} values to plot (was it measured? see PSRO(measure=...))")
        values = np.clip(ys[keep], LOG_FLOOR, None) if log else ys[keep]
        text = " · ".join(filter(None, [label, Y_AXES[column] if len(columns) > 1 else ""]))
        same = next((earlier for earlier, ex, ey in drawn if _same_curve(ex, ey, xs[keep], values)), None)
        drawn.append((text, xs[keep], values))
        if same is not None and text:
            text = f"{text} (same curve as {same!r})"
        # every other line gets larger hollow markers, so a curve lying exactly on an earlier one stays visible
        (line,) = ax.plot(xs[keep], values, marker=MARKERS[k % len(MARKERS)], markersize=7 if k % 2 else 4,
                          markerfacecolor="none" if k % 2 else None,
                          linestyle=LINESTYLES[k % len(LINESTYLES)], label=text or None)
        if f"{column}_stderr" in frame.columns:
            se = _column(frame, f"{column}_stderr", name)[keep]
            ok = np.isfinite(se)
            low = np.clip(values - se, LOG_FLOOR, None) if log else values - se
            ax.fill_between(xs[keep][ok], low[ok], (values + se)[ok], color=line.get_color(), alpha=0.2, linewidth=0)
        if log:
            _mark_converged(ax, xs[keep], ys[keep], line.get_color())
    for i, (label, value) in enumerate((reference or {}).items()):
        if not np.isfinite(value):
            raise ValueError(f"reference {label!r} must be a finite number, got {value!r}")
        ax.axhline(max(value, LOG_FLOOR) if log else value, color="0.3", linestyle=("--", ":", "-.")[i % 3],
                   linewidth=1, label=label)
    if log:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(X_AXES[x])
    if x == "iteration" and not logx:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(Y_AXES[columns[0]] if len(columns) == 1 else "")
    if title:
        ax.set_title(title)
    if len(lines) > 1 or reference:
        ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return fig


def _same_curve(xs: np.ndarray, ys: np.ndarray, other_xs: np.ndarray, other_ys: np.ndarray) -> bool:
    """Whether two curves have the same points, up to float rounding."""
    return (xs.shape == other_xs.shape and np.array_equal(xs, other_xs)
            and np.allclose(ys, other_ys, rtol=1e-9, atol=1e-15))


def _mark_converged(ax: Axes, xs: np.ndarray, ys: np.ndarray, color: Any) -> None:
    """Points at or below the log floor (0 up to rounding) get a hollow marker and the word "converged",
    not a point drawn at an arbitrary 1e-12 that reads as a measured value."""
    below = ys <= LOG_FLOOR
    if not below.any():
        return
    ax.plot(xs[below], np.full(below.sum(), LOG_FLOOR), linestyle="none", marker="v", markersize=8,
            markerfacecolor="white", markeredgecolor=color)
    first = float(xs[below][0])
    right = first > 0.5 * (float(np.min(xs)) + float(np.max(xs)))  # near the right edge the label runs leftwards
    ax.annotate("converged", (first, LOG_FLOOR), textcoords="offset points", xytext=(-4 if right else 4, 8),
                ha="right" if right else "left", fontsize=8, color=color)


def _approx_nash_conv(frame: pd.DataFrame, name: str) -> np.ndarray:
    """Per row, the sum of the next row's best-response values (NaN where there is none, or where an
    iteration trained more than one response per player, as rectified Nash does)."""
    if "br_values" not in frame.columns:
        raise ValueError(f"history{name} has no 'br_values' column; columns are {list(frame.columns)}")
    players = len(player_columns(frame, "size_", what="the number of players"))
    sums = np.full(len(frame), np.nan)
    for row, value in enumerate(frame["br_values"].to_list()[1:]):
        values = json.loads(value) if isinstance(value, str) else value
        values = np.asarray(values if values is not None else [], dtype=float).ravel()
        if len(values) == players:
            sums[row] = values.sum()
    return sums


def _column(frame: pd.DataFrame, column: str, name: str) -> np.ndarray:
    if column not in frame.columns:
        raise ValueError(f"history{name} has no {column!r} column; columns are {list(frame.columns)}")
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def plot_population(history: pd.DataFrame, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Population size of each player against iteration (the ``size_0, size_1, ...`` columns).

    Example:
        >>> plot_population(psro.history)  # doctest: +SKIP
    """
    frame = _one(history)
    columns = player_columns(frame, "size_", what="population sizes")
    fig, ax = new_figure(ax, figsize=(5, 3.5))
    its = iterations(frame)
    for p, column in enumerate(columns):
        ax.plot(its, frame[column].to_numpy(dtype=float), drawstyle="steps-post", marker=MARKERS[p % len(MARKERS)],
                markersize=4, linestyle=LINESTYLES[p % len(LINESTYLES)], label=f"player {p}")
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("policies in the population")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    return fig


def plot_meta_strategy(
    history: pd.DataFrame, *, players: Any = None, ax: Axes | None = None, title: str | None = None
) -> Figure:
    """How each player's meta-strategy weight is spread over its members, iteration by iteration.

    One stacked-area panel per player (from the ``sigma_0, sigma_1, ...`` columns): band ``i``
    is member ``i``'s probability, zero before the member joined.

    Args:
        history: a run's ``history``.
        players: which players to draw (an int or a list; default all).
        ax: draw one player (give `players` as one int when there are several) into these axes.
        title: figure title (the panel's title when there is one panel).

    Example:
        >>> plot_meta_strategy(psro.history)  # doctest: +SKIP
    """
    frame = _one(history)
    columns = player_columns(frame, "sigma_", what="meta-strategies")
    chosen = _players(players, len(columns))
    if ax is not None and len(chosen) != 1:
        raise ValueError(f"ax holds one panel; pick one player with players=..., got players={chosen}")
    if ax is None:
        fig = blank_figure((5.2 * len(chosen), 3.5))
        axes = list(fig.subplots(1, len(chosen), squeeze=False)[0])
    else:
        fig, ax = new_figure(ax, figsize=(4.5, 3.5))
        axes = [ax]
    its = iterations(frame)
    for panel, p in zip(axes, chosen):
        weights = distributions(frame[columns[p]], player=p)
        n = weights.shape[1]
        panel.stackplot(its, weights.T, colors=member_colors(n), labels=[f"p{p}/{i}" for i in range(n)],
                        linewidth=0.3, edgecolor="white")
        panel.set_xlim(its.min(), max(its.max(), its.min() + 1))
        panel.set_ylim(0, 1)
        panel.set_xlabel("iteration")
        panel.xaxis.set_major_locator(MaxNLocator(integer=True))
        panel.set_ylabel(f"player {p}'s meta-strategy")
        panel.set_title(title if title and len(chosen) == 1 else f"player {p}")
        if n <= 12:
            panel.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", ncol=2 if n > 6 else 1)
    if title and len(chosen) > 1:
        fig.suptitle(title)
    return fig


def plot_meta_strategy_bars(
    strategies: Any, *, iteration: int | None = None, ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Bars of one meta-strategy, or of several side by side (e.g. several meta-solvers on one table).

    Args:
        strategies: a history DataFrame (the row at `iteration`, default the last), a
            `MetaStrategy` or one distribution per player, or a mapping ``label -> any of those``.
        iteration: which history row to draw.
        ax: draw into these axes.
        title: axes title.

    Members of all players share one axis, grouped by player; each label gets its own bar colour.

    Example:
        >>> plot_meta_strategy_bars({name: pb.MetaSolver(name)(table) for name in ["nash", "prd", "rm"]})
        <Figure size 400x350 with 1 Axes>
    """
    runs = dict(strategies) if isinstance(strategies, Mapping) else {"": strategies}
    if not runs:
        raise ValueError("got an empty mapping of meta-strategies")
    dists = {label: _distributions_of(value, iteration, label) for label, value in runs.items()}
    shapes = {label: tuple(len(d) for d in ds) for label, ds in dists.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"meta-strategies must have the same sizes to share one chart, got {shapes}")
    sizes = next(iter(shapes.values()))
    fig, ax = new_figure(ax, figsize=(min(12.0, max(4.0, 0.25 * sum(sizes) * len(runs) + 2)), 3.5))
    width = 0.8 / len(runs)
    starts = np.concatenate([[0], np.cumsum(np.asarray(sizes) + 1)])[:-1]
    ticks = np.concatenate([s + np.arange(n) for s, n in zip(starts, sizes)])
    names = [f"p{p}/{i}" for p, n in enumerate(sizes) for i in range(n)]
    for k, (label, ds) in enumerate(dists.items()):
        heights = np.concatenate(ds)
        ax.bar(ticks - 0.4 + width * (k + 0.5), heights, width=width, label=label or None, color=f"C{k}")
    for s in starts[1:]:
        ax.axvline(s - 1, color="0.6", linewidth=0.8)
    if len(names) <= 60:
        ax.set_xticks(ticks, names, rotation=90 if len(names) > 8 else 0, fontsize="small")
    else:  # too many to name: one tick per player group
        ax.set_xticks(starts + (np.asarray(sizes) - 1) / 2, [f"{n} members" for n in sizes])
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("probability")
    ax.set_xlabel("  |  ".join(f"player {p}" for p in range(len(sizes))))
    if len(runs) > 1:
        ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _distributions_of(value: Any, iteration: int | None, label: str) -> list[np.ndarray]:
    name = f" {label!r}" if label else ""
    if isinstance(value, pd.DataFrame):
        columns = player_columns(value, "sigma_", what="meta-strategies")
        its = list(iterations(value))
        if not its:
            raise ValueError(f"history{name} is empty")
        if iteration is None:
            row = len(its) - 1
        elif iteration in its:
            row = its.index(iteration)
        else:
            raise ValueError(f"history{name} has no iteration {iteration!r}; it holds {its[0]}..{its[-1]}")
        return [distributions(value[c].iloc[[row]], player=p)[0] for p, c in enumerate(columns)]
    try:
        count = len(value)
        out = [np.asarray(value[p], dtype=float).ravel() for p in range(count)]
    except (TypeError, ValueError, KeyError, IndexError):
        raise TypeError(f"meta-strategy{name} must be a history, a MetaStrategy or one distribution per player, "
                        f"got {type(value).__name__}") from None
    for p, d in enumerate(out):
        if d.size == 0 or not np.all(np.isfinite(d)) or np.any(d < -1e-9) or abs(d.sum() - 1) > 1e-6:
            raise ValueError(f"meta-strategy{name}: player {p}'s weights are not a distribution: {d.tolist()}")
    return out


def _one(history: Any) -> pd.DataFrame:
    if not isinstance(history, pd.DataFrame):
        raise TypeError(f"history must be one run's DataFrame (e.g. psro.history), got {type(history).__name__}")
    if history.empty:
        raise ValueError("history is empty: run at least one iteration first")
    return history


def _players(players: Any, count: int) -> list[int]:
    if players is None:
        return list(range(count))
    chosen = [players] if isinstance(players, (int, np.integer)) else list(players)
    for p in chosen:
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 0 <= p < count:
            raise ValueError(f"player {p!r} is out of range 0..{count - 1}")
    if not chosen:
        raise ValueError("players must name at least one player")
    return [int(p) for p in chosen]
