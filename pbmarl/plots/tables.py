"""Payoff tables drawn as heatmaps, with standard errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pbmarl.fmt import DISPLAY_TOLERANCE, fmt
from pbmarl.plots._axes import new_figure

#: above this many rows or columns, cells are not annotated unless asked
ANNOTATE_LIMIT = 12
#: above this many rows or columns, ticks show member indices instead of every id
TICK_LIMIT = 40
#: the smallest annotation font, in points; where even that does not fit, cells are left blank
MIN_FONTSIZE = 5.5


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
        annotate: write each cell's value. Default: where the numbers fit, shrinking the font to
            as small as `MIN_FONTSIZE` points and dropping the ``±`` lines first, and never past
            `ANNOTATE_LIMIT` members a side. True writes them whatever the size (shrunk to fit).
        stderr: add ``± stderr`` under sampled cells (exact cells have none).
        cmap: a diverging colormap, centred on 0.
        highlight: ``(row, column)`` of a cell to outline.
        colorbar: draw a colorbar.
        ax: draw into these axes.
        title: axes title (default names the player).

    Never-evaluated (NaN) cells are grey and annotated with a dash. Values below the display
    tolerance read 0 (`pbmarl.fmt`). Under the pointer, interactive backends (ipympl, Qt) show
    the cell's two member ids, its value and its standard error.

    Example:
        >>> plot_payoff_heatmap(psro.table, player=0)  # doctest: +SKIP
    """
    values, se, rows, cols = payoff_matrix(table, player)
    if values.size == 0:
        raise ValueError(f"the table is empty (sizes {values.shape}); add policies first")
    import matplotlib

    cell = min(0.6, 5.0 / max(len(rows), len(cols), 1))  # inches a cell; a big table stays about 7 inches
    fig, ax = new_figure(ax, figsize=(2 + cell * len(cols), 1.5 + 0.85 * cell * len(rows)))
    finite = np.isfinite(values)
    bound = float(np.abs(values[finite]).max()) if finite.any() else 1.0
    bound = bound if bound > 0 else 1.0
    colormap = matplotlib.colormaps[cmap].with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=colormap, vmin=-bound, vmax=bound, aspect="auto",
                      interpolation="nearest")
    if annotate is None or annotate:
        texts, size = _annotations(ax, values, se if stderr else None, bound, forced=bool(annotate))
        for (i, j), text in np.ndenumerate(texts):
            if text:
                v = values[i, j]
                colour = "0.3" if not np.isfinite(v) else ("white" if abs(v) > 0.6 * bound else "black")
                ax.text(j, i, text, ha="center", va="center", fontsize=size, color=colour)
    ax.format_coord = _HoverText(values, se, rows, cols)  # type: ignore[method-assign]  # shown under the pointer
    if highlight is not None:
        i, j = _cell(highlight, values.shape)
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="gold", linewidth=3))
    named = max(len(rows), len(cols)) <= TICK_LIMIT  # beyond that, member indices chosen by matplotlib
    if named:
        every_col, every_row = _tick_steps(ax, len(rows), len(cols))
        ax.set_xticks(range(0, len(cols), every_col), cols[::every_col], rotation=90 if len(cols) > 8 else 0,
                      fontsize="small")
        ax.set_yticks(range(0, len(rows), every_row), rows[::every_row], fontsize="small")
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


def _annotations(
    ax: Axes, values: np.ndarray, se: np.ndarray | None, bound: float, *, forced: bool
) -> tuple[np.ndarray, float]:
    """Each cell's text and one font size that fits the cells of `ax` (texts all empty when none fits).

    A character of a font of size f is about 0.6 f points wide and a line 1.25 f points high;
    the size is the largest (up to matplotlib's "small") at which the longest text fits its cell.
    """
    import matplotlib

    tol = max(DISPLAY_TOLERANCE, 1e-9 * bound)
    numbers = np.array([["—" if not np.isfinite(v) else fmt(v, ".3g", tol=tol) for v in row] for row in values],
                       dtype=object)
    with_se = numbers.copy()
    if se is not None:
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v) and np.isfinite(se[i, j]) and se[i, j] > 0:
                with_se[i, j] = f"{numbers[i, j]}\n±{fmt(se[i, j], '.2g')}"
    box = ax.get_position()
    figure = ax.get_figure(root=True)
    width, height = figure.get_size_inches() if figure is not None else (6.4, 4.8)
    cell_w = 72 * width * box.width / values.shape[1]
    cell_h = 72 * height * box.height / values.shape[0]
    largest = matplotlib.font_manager.FontProperties(size="small").get_size_in_points()
    too_many = max(values.shape) > ANNOTATE_LIMIT and not forced
    size = 0.0
    for texts in (with_se, numbers):
        chars = max(len(line) for text in texts.flat for line in text.split("\n"))
        lines = max(text.count("\n") + 1 for text in texts.flat)
        size = min(largest, 0.95 * cell_w / (0.6 * chars + 0.8), 0.9 * cell_h / (1.25 * lines))
        if size >= MIN_FONTSIZE and not too_many:
            return texts, size
    if forced:
        return numbers, max(size, 1.0)
    return np.full(values.shape, "", dtype=object), 0.0


def _tick_steps(ax: Axes, rows: int, cols: int) -> tuple[int, int]:
    """Label every k-th member (columns, rows) so that labels about 9 points apart never overlap."""
    box = ax.get_position()
    figure = ax.get_figure(root=True)
    width, height = figure.get_size_inches() if figure is not None else (6.4, 4.8)
    col_pts, row_pts = 72 * width * box.width / cols, 72 * height * box.height / rows
    return max(1, int(np.ceil(9 / col_pts))), max(1, int(np.ceil(9 / row_pts)))


class _HoverText:
    """`Axes.format_coord` for a heatmap: the cell under the pointer, as ids, value and stderr."""

    def __init__(self, values: np.ndarray, se: np.ndarray | None, rows: list[str], cols: list[str]) -> None:
        self.values, self.se, self.rows, self.cols = values, se, rows, cols

    def __call__(self, x: float, y: float) -> str:
        i, j = int(round(y)), int(round(x))
        if not (0 <= i < len(self.rows) and 0 <= j < len(self.cols)):
            return ""
        text = f"{self.rows[i]} vs {self.cols[j]}: {fmt(self.values[i, j], '.4g')}"
        if self.se is not None and np.isfinite(self.se[i, j]) and self.se[i, j] > 0:
            text += f" ± {fmt(self.se[i, j], '.2g')}"
        return text
