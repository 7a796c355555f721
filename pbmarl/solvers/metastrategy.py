"""`MetaStrategy`: one distribution per player, with where it came from and how good it is."""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.solvers.inputs import check_distributions, check_ids, default_ids

#: members shown per player in the text repr before "..."
_SHOWN = 6


@dataclass(frozen=True, eq=False, repr=False)
class MetaStrategy:
    """The answer of a meta-solver: one read-only distribution per player.

    Example:
        >>> sigma = MetaStrategy(([0.5, 0.5], [1.0, 0.0]), solver="manual")
        >>> sigma[0], len(sigma)
        (array([0.5, 0.5]), 2)
    """

    #: one distribution per player over that player's population, in population order
    distributions: tuple[np.ndarray, ...]
    #: the solver name that produced it ("nash", "prd", ...)
    solver: str
    #: policy ids per player (labels for tables); ``"p{player}/{index}"`` when not given
    ids: tuple[tuple[str, ...], ...] | None = None
    #: meta-game NashConv of the distributions: sum over players of their best-deviation gain
    nash_conv: float | None = None
    #: the per-player terms of `nash_conv`
    regrets: tuple[float, ...] | None = None
    #: the algorithm that actually ran ("lp", "lemke_howson", "prd-fallback", ...)
    method: str | None = None
    #: solver details: options used, iterations, labels tried, ...
    info: Mapping[str, Any] = field(default_factory=dict)
    #: rectified Nash only: per player, ``{member index: opponent distribution}``
    rectified: tuple[Mapping[int, np.ndarray], ...] | None = None
    #: correlated solvers only: the joint distribution over profiles, shape `sizes`;
    #: `distributions` are then its marginals
    joint: np.ndarray | None = None

    def __post_init__(self) -> None:
        dists = _as_tuple(self.distributions)
        sizes = tuple(np.shape(d)[0] if np.ndim(d) == 1 else -1 for d in dists)
        if any(n <= 0 for n in sizes):
            raise ValueError(f"distributions must be one non-empty 1-D array per player, got shapes {[np.shape(d) for d in dists]}")
        checked = check_distributions(dists, sizes)
        frozen = []
        for d in checked:
            d = np.array(d, dtype=float)
            d.setflags(write=False)
            frozen.append(d)
        object.__setattr__(self, "distributions", tuple(frozen))
        if self.ids is not None:
            object.__setattr__(self, "ids", check_ids(self.ids, sizes))
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))
        if self.regrets is not None:
            object.__setattr__(self, "regrets", tuple(float(r) for r in self.regrets))
        if self.nash_conv is not None:
            object.__setattr__(self, "nash_conv", float(self.nash_conv))
        if self.rectified is not None:
            rect = []
            for per_player in self.rectified:
                entries = {}
                for member, w in per_player.items():
                    w = np.array(w, dtype=float)
                    w.setflags(write=False)
                    entries[int(member)] = w
                rect.append(MappingProxyType(entries))
            object.__setattr__(self, "rectified", tuple(rect))
        if self.joint is not None:
            object.__setattr__(self, "joint", _check_joint(self.joint, self.distributions))

    # -- sequence of distributions ----------------------------------------------
    def __getitem__(self, player: int) -> np.ndarray:
        k = len(self.distributions)
        if isinstance(player, (bool, np.bool_)) or not isinstance(player, (int, np.integer)) or not -k <= player < k:
            raise IndexError(f"player must be an integer in 0..{k - 1}, got {player!r}")
        return self.distributions[player]

    def __len__(self) -> int:
        return len(self.distributions)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.distributions)

    @property
    def num_players(self) -> int:
        return len(self.distributions)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.distributions)

    def labels(self) -> tuple[tuple[str, ...], ...]:
        """Policy ids per player: `ids` when known, else ``"p{player}/{index}"``."""
        return self.ids if self.ids is not None else default_ids(self.sizes)

    def support(self, player: int, *, tol: float = 1e-9) -> list[str]:
        """Ids of player's members with more than `tol` probability."""
        labels = self.labels()[player]
        return [labels[i] for i in np.flatnonzero(self[player] > tol)]

    # -- tables and display -------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """Long form: one row per (player, policy) with its probability."""
        rows = [
            {"player": p, "policy": label, "probability": float(w)}
            for p, (labels, dist) in enumerate(zip(self.labels(), self.distributions))
            for label, w in zip(labels, dist)
        ]
        return pd.DataFrame(rows, columns=["player", "policy", "probability"])

    def _header(self) -> str:
        parts = [f"solver={self.solver!r}"]
        if self.method is not None and self.method != self.solver:
            parts.append(f"method={self.method!r}")
        if self.nash_conv is not None:
            parts.append(f"nash_conv={self.nash_conv:.3g}")
        parts.append(f"sizes={self.sizes}")
        return "MetaStrategy(" + ", ".join(parts) + ")"

    def __repr__(self) -> str:
        lines = [self._header()]
        for p, (labels, dist) in enumerate(zip(self.labels(), self.distributions)):
            order = np.argsort(-dist, kind="stable")[:_SHOWN]
            shown = "  ".join(f"{labels[i]}: {dist[i]:.3f}" for i in sorted(order))
            more = f"  ... ({dist.size - _SHOWN} more)" if dist.size > _SHOWN else ""
            lines.append(f"  player {p}: {shown}{more}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        table = self.to_frame().to_html(index=False, float_format=lambda v: f"{v:.4f}")
        return f"<p><code>{html.escape(self._header())}</code></p>{table}"


def _check_joint(joint: Any, distributions: tuple[np.ndarray, ...]) -> np.ndarray:
    """A read-only copy of `joint`, checked against the sizes and the marginals `distributions`."""
    sizes = tuple(d.size for d in distributions)
    j = np.array(joint, dtype=float)
    if j.shape != sizes:
        raise ValueError(f"joint must have shape {sizes} (one axis per player's population), got {j.shape}")
    if not np.all(np.isfinite(j)) or np.any(j < -1e-9) or abs(j.sum() - 1.0) > 1e-6:
        raise ValueError(f"joint must be a distribution over profiles (non-negative, summing to 1), got sum {j.sum():.6g}")
    k = len(sizes)
    for p, d in enumerate(distributions):
        marginal = j.sum(axis=tuple(q for q in range(k) if q != p))
        if not np.allclose(marginal, d, atol=1e-6):
            raise ValueError(f"player {p}'s distribution {np.round(d, 6).tolist()} is not the joint's marginal "
                             f"{np.round(marginal, 6).tolist()}")
    j.setflags(write=False)
    return j


def _as_tuple(distributions: Any) -> tuple[Any, ...]:
    try:
        return tuple(distributions)
    except TypeError:
        raise TypeError(f"distributions must be one sequence per player, got {distributions!r}") from None
