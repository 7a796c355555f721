"""Payoff tables drawn as heatmaps, with standard errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pbmarl.plots._axes import new_figure

#: above this many rows or columns, cells are not annotated unless asked
ANNOTATE_LIMIT = 12
#: above this many rows or columns, ticks show member indices instead of every id
TICK_LIMIT = 40


def payoff_matrix(table: Any, player: int = 0) -> tuple[np.ndarray, np.ndarray | None, list[str], list[str]]:
    """`player`'s payoffs as ``(values, stderr or None, row ids, column ids)`` from a two-player
    `PayoffTable`, a DataFrame (rows = player 0's members) or a 2-D array."""
    if hasattr(table, "values") and hasattr(table, "stderr") and hasattr(table, "ids"):
        values = np.asarray(table.values, dtype=float)
        if values.ndim != 3:
            raise ValueError(f"a heatmap needs a two-player table; this one has {values.ndim - 1} players "
                             "(look at table.to_frame() instead)")
        if not isinstance(player, (int, np.integer)) or isinstance(player, bool) or not 0 <= player < 2:
            raise ValueError(f"player must be 0 or 1, got {player!r}")
        ids = table.ids
        return values[..., player], np.asarray(table.stderr, dtype=float)[..., player], list(ids[0]), list(ids[1])
    if isinstance(table, pd.DataFrame):
        values = table.to_numpy(dtype=float)
        return values, None, [str(i) for i in table.index], [str(c) for c in table.columns]
    try:
        values = np.asarray(table, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"expected a PayoffTable, a DataFrame or a 2-D array, got {type(table).__name__}") from None
    if values.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D matrix, got an array of shape {values.shape}")
    rows, cols = values.shape
    return values, None, [f"p0/{i}" for i in range(rows)], [f"p1/{j}" for j in range(cols)]


def plot_payoff_heatmap(
    table: Any,
    *,
    player: int = 0,
    annotate: bool | None = None,
    stderr: bool = True,
    cmap: str = "RdBu",
    highlight: Sequence[int] | None = None,
    colorbar: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Heatmap of `player`'s payoffs: rows are player 0's members, columns player 1's.

    Args:
        table: a two-player `PayoffTable`, a DataFrame such as ``table.matrix(0)``, or a 2-D array.
        player: whose payoffs to colour.
        annotate: write each cell's value (default: when both sides have at most 12 members).
        stderr: add ``± stderr`` under sampled cells (exact cells have none).
        cmap: a diverging colormap, centred on 0.
        highlight: ``(row, column)`` of a cell to outline.
        colorbar: draw a colorbar.
        ax: draw into these axes.
        title: axes title (default names the player).

    Never-evaluated (NaN) cells are grey and annotated with a dash.

    Example:
        >>> plot_payoff_heatmap(psro.table, player=0)
    """
    values, se, rows, cols = payoff_matrix(table, player)
    if values.size == 0:
        raise ValueError(f"the table is empty (sizes {values.shape}); add policies first")
    import matplotlib

    fig, ax = new_figure(ax, figsize=(min(2 + 0.6 * len(cols), 12), min(1.5 + 0.5 * len(rows), 10)))
    finite = np.isfinite(values)
    bound = float(np.abs(values[finite]).max()) if finite.any() else 1.0
    bound = bound if bound > 0 else 1.0
    colormap = matplotlib.colormaps[cmap].with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=colormap, vmin=-bound, vmax=bound, aspect="auto",
                      interpolation="nearest")
    if annotate is None:
        annotate = max(values.shape) <= ANNOTATE_LIMIT
    if annotate:
        for (i, j), v in np.ndenumerate(values):
            if not np.isfinite(v):
                text, colour = "—", "0.3"
            else:
                text = f"{0.0 if abs(v) < 1e-9 * bound else v:.3g}"
                if stderr and se is not None and np.isfinite(se[i, j]) and se[i, j] > 0:
                    text += f"\n±{se[i, j]:.2g}"
                colour = "white" if abs(v) > 0.6 * bound else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize="small", color=colour)
    if highlight is not None:
        i, j = _cell(highlight, values.shape)
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="gold", linewidth=3))
    named = max(len(rows), len(cols)) <= TICK_LIMIT  # beyond that, member indices chosen by matplotlib
    if named:
        ax.set_xticks(range(len(cols)), cols, rotation=90 if len(cols) > 8 else 0, fontsize="small")
        ax.set_yticks(range(len(rows)), rows, fontsize="small")
    ax.set_xlabel("player 1's policy" + ("" if named else " (index)"))
    ax.set_ylabel("player 0's policy" + ("" if named else " (index)"))
    ax.set_title(title if title is not None else f"player {player}'s payoff")
    if colorbar:
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def _cell(cell: Sequence[int], shape: tuple[int, ...]) -> tuple[int, int]:
    try:
        i, j = (int(c) for c in cell)
    except (TypeError, ValueError):
        raise ValueError(f"highlight must be a (row, column) pair of indices, got {cell!r}") from None
    if not (0 <= i < shape[0] and 0 <= j < shape[1]):
        raise ValueError(f"highlight {tuple(cell)!r} is outside the {shape[0]}x{shape[1]} table")
    return i, j
