"""Trajectories of three-strategy distributions drawn on the probability simplex."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pbmarl.plots._axes import new_figure

_CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])


def to_triangle(points: np.ndarray) -> np.ndarray:
    """Barycentric ``(..., 3)`` distributions to 2-D points in the equilateral triangle."""
    return np.asarray(points, dtype=float) @ _CORNERS


def _trajectory(value: Any, label: str) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.ndim == 1:
        array = array[None]
    name = f" {label!r}" if label else ""
    if array.ndim != 2 or array.shape[1] != 3 or len(array) == 0:
        raise ValueError(f"trajectory{name} must be an array of shape (steps, 3), got shape {array.shape}")
    bad = ~np.isfinite(array).all(axis=1) | (array < -1e-9).any(axis=1) | (np.abs(array.sum(axis=1) - 1) > 1e-6)
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(f"trajectory{name} leaves the simplex at step {row}: {array[row].tolist()}")
    return array


def plot_simplex(
    trajectories: Any,
    *,
    labels: Sequence[str] = ("0", "1", "2"),
    field: Any = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Distributions over three strategies drawn in the simplex, e.g. replicator-dynamics paths.

    Args:
        trajectories: one ``(steps, 3)`` array, a list of them, or a mapping ``label -> array``.
        labels: the three strategies' names, written at the corners.
        field: a symmetric game's ``3x3`` payoff matrix ``A`` (row player): draws the replicator
            flow ``x_i (Ax - x.Ax)_i`` behind the paths.
        ax: draw into these axes.
        title: axes title.

    Each path starts at a circle and ends at a star.

    Example:
        >>> plot_simplex({"PRD": path}, labels=("rock", "paper", "scissors"), field=rps)  # doctest: +SKIP
    """
    if isinstance(trajectories, Mapping):
        paths = {str(k): _trajectory(v, str(k)) for k, v in trajectories.items()}
    elif np.ndim(trajectories[0] if len(trajectories) else 0) == 1:  # one path: a sequence of distributions
        paths = {"": _trajectory(trajectories, "")}
    else:
        paths = {f"path {i}": _trajectory(t, f"path {i}") for i, t in enumerate(trajectories)}
    if not paths:
        raise ValueError("no trajectories to draw")
    if len(labels) != 3:
        raise ValueError(f"labels must name the 3 strategies, got {list(labels)!r}")
    fig, ax = new_figure(ax, figsize=(5, 4.6))
    ax.plot(*np.vstack([_CORNERS, _CORNERS[:1]]).T, color="black", linewidth=1)
    for corner, label, offset in zip(_CORNERS, labels, [(-0.04, -0.05), (0.04, -0.05), (0.0, 0.04)]):
        ax.text(corner[0] + offset[0], corner[1] + offset[1], label, ha="center", va="center")
    if field is not None:
        _draw_field(ax, field)
    for i, (label, path) in enumerate(paths.items()):
        xy = to_triangle(path)
        colour = f"C{i}"
        ax.plot(xy[:, 0], xy[:, 1], color=colour, linewidth=1.5, label=label or None)
        ax.plot(*xy[0], marker="o", color=colour, markersize=6)
        ax.plot(*xy[-1], marker="*", color=colour, markersize=12, markeredgecolor="black")
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_xlim(-0.1, 1.1)
    ax.set_ylim(-0.1, 0.95)
    if any(paths) and len(paths) <= 10:
        ax.legend(loc="upper right", fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def _draw_field(ax: Axes, field: Any) -> None:
    A = np.asarray(field, dtype=float)
    if A.shape != (3, 3) or not np.all(np.isfinite(A)):
        raise ValueError(f"field must be a finite 3x3 payoff matrix, got shape {A.shape}")
    steps = 12
    grid = np.array([(i, j, steps - i - j) for i in range(1, steps) for j in range(1, steps - i)], dtype=float) / steps
    fitness = grid @ A.T
    flow = grid * (fitness - np.sum(grid * fitness, axis=1, keepdims=True))
    start, end = to_triangle(grid), to_triangle(grid + flow)
    delta = end - start
    norm = np.linalg.norm(delta, axis=1, keepdims=True)
    direction = np.divide(delta, norm, out=np.zeros_like(delta), where=norm > 1e-12)
    ax.quiver(start[:, 0], start[:, 1], direction[:, 0], direction[:, 1], norm.ravel(), cmap="Greys",
              scale=30, width=0.004, alpha=0.6)
