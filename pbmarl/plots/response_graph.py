"""The alpha-rank response graph of a payoff table: pure profiles and their improving deviations."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from pbmarl.plots._axes import new_figure

#: (from profile, to profile, deviating player, fixation probability)
Deviation = tuple[tuple[int, ...], tuple[int, ...], int, float]
#: more profiles than this make an unreadable picture
MAX_PROFILES = 64


def fixation_probability(gain: np.ndarray, *, alpha: float, m: int) -> np.ndarray:
    """Probability that one mutant earning `gain` more than the residents takes over a population
    of `m` under selection intensity `alpha` (the Fermi process of alpha-rank).

    ``(1 - exp(-alpha * gain)) / (1 - exp(-m * alpha * gain))``, ``1 / m`` at zero gain; evaluated
    without overflow for any gain.
    """
    x = -alpha * np.asarray(gain, dtype=float)
    out = np.full(x.shape, 1.0 / m)
    up = x < -1e-12  # improving deviation
    out[up] = np.expm1(x[up]) / np.expm1(m * x[up])
    down = x > 1e-12  # worsening: (e^x - 1) / (e^{mx} - 1) = e^{(1-m)x} (1 - e^{-x}) / (1 - e^{-mx})
    out[down] = np.exp((1 - m) * x[down]) * (-np.expm1(-x[down])) / (-np.expm1(-m * x[down]))
    return out


def improving_deviations(payoffs: np.ndarray, *, alpha: float, m: int) -> list[Deviation]:
    """Every unilateral deviation that strictly raises the deviator's payoff, as
    ``(from profile, to profile, deviating player, fixation probability)``."""
    sizes = payoffs.shape[:-1]
    tolerance = 1e-9 * max(float(np.ptp(payoffs)), 1e-12)
    edges = []
    for s in itertools.product(*(range(n) for n in sizes)):
        for p, n in enumerate(sizes):
            for move in range(n):
                t = s[:p] + (move,) + s[p + 1:]
                gain = payoffs[t + (p,)] - payoffs[s + (p,)]
                if move != s[p] and gain > tolerance:
                    edges.append((s, t, p, float(fixation_probability(np.array(gain), alpha=alpha, m=m))))
    return edges


def plot_response_graph(
    table: Any,
    *,
    alpha: float = 100.0,
    m: int = 50,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Alpha-rank's response graph: a node per pure profile, an arrow per improving deviation.

    Node area is the profile's alpha-rank stationary mass; an arrow's opacity is the fixation
    probability of that deviation and its colour the deviating player. Two-player tables are laid
    out as a grid (rows: player 0's members, columns: player 1's), so player 0's deviations run
    vertically and player 1's horizontally; more players sit on a circle.

    Args:
        table: a `PayoffTable` with every cell evaluated, a ``(n1, ..., nk, k)`` array or one
            zero-sum matrix.
        alpha: selection intensity, in inverse payoff units (larger: only improving deviations
            keep weight); the default is the `"alpharank"` meta-solver's (and OpenSpiel's).
        m: the population size of alpha-rank's evolutionary process.
        ax: draw into these axes.
        title: axes title.

    Example:
        >>> plot_response_graph(pb.PayoffTable.from_array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]]))
        <Figure size 560x480 with 1 Axes>
    """
    from pbmarl.solvers.alpharank import alpharank_profiles
    from pbmarl.solvers.inputs import read_table

    if not (isinstance(alpha, (int, float, np.floating)) and np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a positive number, got {alpha!r}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 2:
        raise ValueError(f"m (alpha-rank's population size) must be an int >= 2, got {m!r}")
    payoffs, ids = read_table(table)
    count = int(np.prod(payoffs.shape[:-1]))
    if count > MAX_PROFILES:
        raise ValueError(f"the table has {count} pure profiles; the graph is drawn for at most {MAX_PROFILES} "
                         "(plot a sub-table, e.g. PayoffTable.from_array(table.values[:4, :4]))")
    profiles = list(itertools.product(*(range(n) for n in payoffs.shape[:-1])))
    index = {s: i for i, s in enumerate(profiles)}
    mass = alpharank_profiles(payoffs, alpha=float(alpha), m=int(m)).ravel()  # C order, as `profiles`
    deviations = improving_deviations(payoffs, alpha=float(alpha), m=int(m))
    edges = [(index[a], index[b], p, rho) for a, b, p, rho in deviations]
    k = payoffs.shape[-1]
    if k == 2:
        xy = np.array([(s[1], -s[0]) for s in profiles], dtype=float)
        labels = [""] * len(profiles)
    else:
        angles = np.pi / 2 - 2 * np.pi * np.arange(len(profiles)) / len(profiles)
        xy = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        labels = [",".join(str(i) for i in s) for s in profiles]
    wide, tall = (payoffs.shape[1], payoffs.shape[0]) if k == 2 else (4, 4)
    fig, ax = new_figure(ax, figsize=(max(5.0, 1.2 * wide + 2), max(4.0, 1.1 * tall + 1.5)))
    strongest = max((e[3] for e in edges), default=1.0)
    sizes = 80 + 1500 * np.asarray(mass, dtype=float)  # marker areas (points^2); arrows stop at a node's rim
    rims = np.sqrt(sizes) / 2 + 2
    for a, b, p, rho in edges:
        distance = float(np.abs(xy[a] - xy[b]).sum())
        bend = 0.0 if k > 2 or distance <= 1.0 else 0.25
        ax.add_patch(FancyArrowPatch(tuple(xy[a]), tuple(xy[b]), arrowstyle="-|>", mutation_scale=12,
                                     connectionstyle=f"arc3,rad={bend}", color=f"C{p}",
                                     alpha=0.15 + 0.85 * rho / strongest, shrinkA=float(rims[a]), shrinkB=float(rims[b]),
                                     linewidth=1.2))
    ax.scatter(xy[:, 0], xy[:, 1], s=sizes, c=mass, cmap="Greys", vmin=0, vmax=1,
               edgecolors="black", zorder=3)
    for (x, y), mu, label in zip(xy, mass, labels):
        # off the arrows' lines: diagonally below-right of a grid node (arrows run along rows and columns),
        # radially outward on the circle; on a white box drawn above the arrows
        if k == 2:
            offset, ha, va = (16, -16), "left", "top"
        else:
            offset = (30 * x, 30 * y)
            ha, va = ("left" if x > 0.1 else "right" if x < -0.1 else "center"), ("bottom" if y > 0 else "top")
        ax.annotate(f"{label}\n{mu:.2f}" if label else f"{mu:.2f}", (x, y), xytext=offset,
                    textcoords="offset points", ha=ha, va=va, fontsize="small", zorder=5,
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    if k == 2:
        ax.set_xticks(range(payoffs.shape[1]), ids[1], fontsize="small")
        ax.set_yticks([-i for i in range(payoffs.shape[0])], ids[0], fontsize="small")
        ax.set_xlabel("player 1's policy")
        ax.set_ylabel("player 0's policy")
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.margins(0.25)
    for p in range(k):
        ax.plot([], [], color=f"C{p}", label=f"player {p} deviates")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12 if k == 2 else 0.0), ncol=k)
    ax.set_title(title if title is not None else f"response graph, alpha-rank mass (alpha={alpha:g})")
    return fig
