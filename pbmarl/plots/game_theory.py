"""Plots for the exact game-theoretic tools: PSRO and XDO against the sequence-form LP, JPSRO's gap."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pbmarl.plots._axes import Histories, as_histories, iterations, new_figure
from pbmarl.plots.curves import LINESTYLES, LOG_FLOOR, MARKERS, X_AXES, plot_exploitability


def plot_against_lp(history: Histories, game: Any, lp: Any = None, *, x: str = "iteration", ax: Axes | None = None,
                    title: str | None = None) -> Figure:
    """Exploitability of runs (PSRO, XDO, ...) overlaid, with the sequence-form LP's as a line.

    Args:
        history: one run's history or ``label -> history`` (``psro.history``, ``xdo.history``).
        game: the two-player zero-sum game the runs played.
        lp: its `SequenceFormSolution` (`pb.sequence_form_lp(game)`), solved here when not given.
            Its exploitability is 0 up to rounding: the line is drawn a decade below the lowest
            exploitability the runs reach, and labelled with the game value and its own exploitability.
        x: ``"iteration"`` or ``"wall_time"``.

    Example:
        >>> plot_against_lp({"PSRO": psro.history, "XDO": xdo.history}, game)  # doctest: +SKIP
    """
    from pbmarl.evaluation.exact import exploitability
    from pbmarl.evaluation.sequence_form import SequenceFormSolution, sequence_form_lp

    if lp is None:
        lp = sequence_form_lp(game)
    if not isinstance(lp, SequenceFormSolution):
        raise TypeError(f"lp must be the result of pb.sequence_form_lp(game), got {type(lp).__name__}")
    exact = float(exploitability(game, list(lp.policies)).exploitability)
    # the LP's exploitability is 0 up to rounding (~1e-15): drawn at its own value, or the log floor, it would squeeze
    # the runs' curves into a corner, so the line sits a decade below the lowest point the runs reach
    reached = [float(v) for h in as_histories(history).values() if "exploitability" in h.columns
               for v in pd.to_numeric(h["exploitability"], errors="coerce").dropna() if v > 0]
    floor = max(min(reached) / 10, LOG_FLOOR) if reached else LOG_FLOOR
    # two short lines: one long legend entry widened the legend until the layout squeezed the axes to a third
    where = "drawn below the runs" if floor > exact else "drawn at it"
    label = f"sequence-form LP: value {lp.value:.6g}\n(exploitability {abs(exact):.0e}, {where})"
    return plot_exploitability(history, x=x, reference={label: max(exact, floor)}, ax=ax,
                               title=title or "exploitability against the exact LP solution")


def plot_jpsro_gap(history: Histories, *, x: str = "iteration", reference: Mapping[str, list[float]] | None = None,
                   ax: Axes | None = None, title: str | None = None) -> Figure:
    """JPSRO's summed (C)CE gap (log scale) per iteration or wall time, runs overlaid.

    Args:
        history: ``jpsro.history`` or ``label -> history``.
        x: ``"iteration"`` or ``"wall_time"``.
        reference: ``label -> [gap at iteration 0, 1, ...]`` drawn dashed (e.g. OpenSpiel's numbers).
    """
    if x not in ("iteration", "wall_time"):
        raise ValueError(f"x must be 'iteration' or 'wall_time', got {x!r}")
    runs = as_histories(history)
    fig, ax = new_figure(ax, figsize=(6, 4))
    for k, (label, frame) in enumerate(runs.items()):
        if "gap" not in frame.columns:
            raise ValueError(f"history {label!r} has no 'gap' column: pass jpsro.history")
        xs = iterations(frame) if x == "iteration" else frame[x].to_numpy(dtype=float)
        ys = np.clip(frame["gap"].to_numpy(dtype=float), LOG_FLOOR, None)
        kind = str(frame.columns[frame.columns.str.endswith("ce_gap")][0]).split("_")[0].upper() \
            if frame.columns.str.endswith("ce_gap").any() else "(C)CE"
        ax.plot(xs, ys, marker=MARKERS[k % len(MARKERS)], markersize=4, linestyle=LINESTYLES[k % len(LINESTYLES)],
                label=" · ".join(filter(None, [label, f"{kind} gap"])))
    for i, (label, values) in enumerate((reference or {}).items()):
        ax.plot(np.arange(len(values)), np.clip(np.asarray(values, dtype=float), LOG_FLOOR, None), color="0.3",
                linestyle=("--", ":", "-.")[i % 3], linewidth=1, label=label)
    ax.set_yscale("log")
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel("summed (C)CE gap in the full game")
    ax.set_title(title or "JPSRO: distance of the joint meta-strategy from an equilibrium")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return fig
