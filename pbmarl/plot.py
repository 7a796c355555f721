"""Plots over history DataFrames and payoff tables; each function returns its figure."""

from __future__ import annotations

from typing import Mapping

import matplotlib

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

_X_LABELS = {"iteration": "iteration", "wall_time": "wall time (s)", "env_steps": "environment steps"}
_Y_LABELS = {"exploitability": "exploitability (NashConv / players)", "nash_conv": "NashConv",
             "meta_nash_conv": "meta-game NashConv"}


def _histories(history: pd.DataFrame | Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    if isinstance(history, pd.DataFrame):
        return {"": history}
    return dict(history)


def plot_exploitability(
    history: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    x: str = "iteration",
    y: str = "exploitability",
    log: bool = True,
    ax: "matplotlib.axes.Axes | None" = None,
    title: str | None = None,
) -> Figure:
    """Exploitability (or NashConv, ``y="nash_conv"``) against iteration, wall time or env steps.

    `history` is one run's `history` DataFrame or a mapping ``label -> history`` to overlay runs.
    """
    if x not in _X_LABELS:
        raise ValueError(f"x must be one of {sorted(_X_LABELS)}, got {x!r}")
    if y not in _Y_LABELS:
        raise ValueError(f"y must be one of {sorted(_Y_LABELS)}, got {y!r}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    for label, frame in _histories(history).items():
        data = frame.reset_index() if x == "iteration" and "iteration" not in frame.columns else frame
        if y not in data.columns or data[y].isna().all():
            raise ValueError(f"history{f' {label!r}' if label else ''} has no {y!r} values to plot")
        values = data[y].astype(float)
        if log:
            values = values.clip(lower=1e-12)
        ax.plot(data[x].to_numpy(), values.to_numpy(), marker="o", markersize=3, label=label or None)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(_X_LABELS[x])
    ax.set_ylabel(_Y_LABELS[y])
    if title:
        ax.set_title(title)
    if len(_histories(history)) > 1:
        ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig
