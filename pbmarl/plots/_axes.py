"""Shared helpers of the plot functions: new figures, history checks, member colours."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

Histories = pd.DataFrame | Mapping[str, pd.DataFrame]


def blank_figure(figsize: tuple[float, float]) -> Figure:
    """A new figure that a notebook cell returning it shows exactly once.

    It is made through pyplot so that, inside Jupyter, the inline backend loads and registers the
    display formatter that renders a returned Figure; it is then closed at once, so pyplot does not
    show it a second time at the end of the cell (nor keep it alive). ``savefig`` works as usual.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    plt.close(fig)
    return fig


def new_figure(ax: Axes | None, *, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """`ax` and its figure, or a fresh figure with one axes."""
    if ax is None:
        fig = blank_figure(figsize)
        return fig, fig.add_subplot()
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    figure = ax.get_figure()
    assert isinstance(figure, Figure)
    return figure, ax


def as_histories(history: Any) -> dict[str, pd.DataFrame]:
    """One run's history or a mapping ``label -> history``, as a dict (label ``""`` for one run)."""
    if isinstance(history, pd.DataFrame):
        return {"": history}
    if isinstance(history, Mapping):
        if not history:
            raise ValueError("got an empty mapping of histories; give at least one run")
        bad = {k: type(v).__name__ for k, v in history.items() if not isinstance(v, pd.DataFrame)}
        if bad:
            raise TypeError(f"every history must be a DataFrame (e.g. psro.history), got {bad}")
        return {str(k): v for k, v in history.items()}
    raise TypeError(f"history must be a DataFrame (e.g. psro.history) or a dict of them, got {type(history).__name__}")


def iterations(frame: pd.DataFrame) -> np.ndarray:
    """The iteration of each row: the ``iteration`` column, else the index."""
    if "iteration" in frame.columns:
        return frame["iteration"].to_numpy()
    return frame.index.to_numpy()


def player_columns(frame: pd.DataFrame, prefix: str, *, what: str) -> list[str]:
    """``prefix0, prefix1, ...`` columns in player order; raise naming what is missing."""
    columns: list[str] = []
    while f"{prefix}{len(columns)}" in frame.columns:
        columns.append(f"{prefix}{len(columns)}")
    if not columns:
        raise ValueError(f"history has no {prefix}0, {prefix}1, ... columns for {what}; "
                         f"columns are {list(frame.columns)}")
    return columns


def distributions(column: pd.Series, *, player: int) -> np.ndarray:
    """A column of per-iteration distributions (lists, arrays or their JSON text from a CSV) as a
    zero-padded ``(iterations, max members)`` array."""
    rows: list[np.ndarray] = []
    for it, value in column.items():
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ValueError(
                    f"sigma_{player} at iteration {it} is not a list of probabilities: {value!r}"
                ) from None
        array = np.asarray(value, dtype=float).ravel()
        if array.size == 0 or not np.all(np.isfinite(array)) or np.any(array < -1e-9):
            raise ValueError(f"sigma_{player} at iteration {it} is not a distribution: {value!r}")
        rows.append(array)
    width = max(len(r) for r in rows)
    out = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def member_colors(n: int) -> list[Any]:
    """Colours for `n` members in order of arrival: the qualitative cycle when few, viridis when many."""
    import matplotlib

    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(i / max(n - 1, 1)) for i in range(n)]
