"""`PayoffTable`: the empirical game, numpy inside and pandas outside.

Storage per cell (one profile of population members): the mean payoff of every
player, the number of samples, Welford's running sum of squared deviations (for
the standard error) and whether the cell is exact. NaN marks never-evaluated cells.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from pbmarl.io import read_npz, write_npz

if TYPE_CHECKING:  # pragma: no cover
    from pandas.io.formats.style import Styler

    from pbmarl.population import Population

Cell = Sequence[int | str]


class PayoffTable:
    """Payoffs of every profile of population members; shape ``pop.sizes + (num_players,)``.

    Bound to a `Population`, the table grows by itself as members are added (old
    cells keep their data). `update(cell, returns)` folds in sampled returns;
    `set_exact(cell, values)` stores exact ones.

    Example:
        >>> table = PayoffTable(pop)
        >>> table.update((0, 0), [[1.0, -1.0], [0.0, 0.0]])
        >>> table.to_frame(); table.matrix(player=0); table.style()  # doctest: +SKIP
    """

    def __init__(self, population: Population | None = None, *, num_players: int | None = None) -> None:
        self.population = population
        if population is not None:
            num_players = population.num_players
        if num_players is None or num_players < 1:
            raise ValueError("give a Population, or num_players for a free-standing table")
        self.num_players = int(num_players)
        self._ids: list[list[str]] = [[] for _ in range(self.num_players)]
        shape = (0,) * self.num_players
        self._mean = np.zeros(shape + (self.num_players,))
        self._m2 = np.zeros(shape + (self.num_players,))
        self._count = np.zeros(shape, dtype=np.int64)
        self._exact = np.zeros(shape, dtype=bool)
        self.sync()

    @classmethod
    def from_array(cls, payoffs: Any, *, ids: Sequence[Sequence[str]] | None = None) -> PayoffTable:
        """An exact, free-standing table from ``(n1, ..., nk, k)`` payoffs or one zero-sum 2-D matrix."""
        raw = np.asarray(payoffs)
        if raw.dtype.kind not in "biuf":
            raise ValueError(f"payoffs must be real numbers, got an array of dtype {raw.dtype}"
                             + (" (complex payoffs have no order; pass the real part explicitly)"
                                if raw.dtype.kind == "c" else ""))
        array = raw.astype(float)
        if np.isinf(array).any():
            cell = tuple(int(i) for i in np.argwhere(np.isinf(array))[0])
            raise ValueError(f"payoffs must be finite (NaN marks a missing cell), got {array[cell]} at index {cell}")
        if array.ndim == 2:
            array = np.stack([array, -array], axis=-1)
        if array.ndim < 3 or array.shape[-1] != array.ndim - 1:
            raise ValueError(f"payoffs must have shape (n1, ..., nk, k) or be one 2-D matrix, got {array.shape}")
        k = array.shape[-1]
        table = cls(num_players=k)
        for p, n in enumerate(array.shape[:-1]):
            names = list(ids[p]) if ids is not None else [f"p{p}/{i}" for i in range(n)]
            if len(names) != n:
                raise ValueError(f"player {p} has {n} rows of payoffs but {len(names)} ids")
            for name in names:
                table.add_policy(p, name)
        mask = np.all(np.isfinite(array), axis=-1)
        table._mean[mask] = array[mask]
        table._exact[mask] = True
        return table

    # -- shape ----------------------------------------------------------------
    def sync(self) -> PayoffTable:
        """Grow to the bound population's sizes (done automatically on every read)."""
        if self.population is not None:
            sizes = self.population.sizes
            if any(n != len(ids) for n, ids in zip(sizes, self._ids)):
                new = [self.population.ids(p)[len(self._ids[p]):] for p in range(self.num_players)]
                self._grow(new)
        return self

    def add_policy(self, player: int, pid: str | None = None) -> None:
        """Add one row for `player` (NaN payoffs). Bound tables do this by themselves."""
        self._check_player(player)
        pid = pid if pid is not None else f"p{player}/{len(self._ids[player])}"
        if pid in self._ids[player]:
            raise ValueError(f"policy id {pid!r} is already in the table for player {player}")
        new: list[list[str]] = [[] for _ in range(self.num_players)]
        new[player] = [pid]
        self._grow(new)

    def _grow(self, new_ids: list[list[str]]) -> None:
        """Append rows for every player at once: one copy of the arrays however many are added."""
        grow = [(0, len(ids)) for ids in new_ids]
        self._mean = np.pad(self._mean, grow + [(0, 0)], constant_values=np.nan)
        self._m2 = np.pad(self._m2, grow + [(0, 0)])
        self._count = np.pad(self._count, grow)
        self._exact = np.pad(self._exact, grow)
        for p, ids in enumerate(new_ids):
            self._ids[p].extend(ids)

    def snapshot(self) -> tuple[list[list[str]], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A copy of the table's contents that `restore` puts back."""
        return ([list(i) for i in self._ids], self._mean.copy(), self._m2.copy(), self._count.copy(),
                self._exact.copy())

    def restore(self, state: object) -> None:
        """Put back the contents `snapshot()` copied (its population must be restored first)."""
        ids, mean, m2, count, exact = cast("tuple[list[list[str]], np.ndarray, np.ndarray, np.ndarray, np.ndarray]",
                                           state)
        self._ids = [list(i) for i in ids]
        self._mean, self._m2, self._count, self._exact = mean.copy(), m2.copy(), count.copy(), exact.copy()

    @property
    def sizes(self) -> tuple[int, ...]:
        self.sync()
        return tuple(len(i) for i in self._ids)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.sizes + (self.num_players,)

    @property
    def ids(self) -> tuple[tuple[str, ...], ...]:
        self.sync()
        return tuple(tuple(i) for i in self._ids)

    # -- data -----------------------------------------------------------------
    @property
    def values(self) -> np.ndarray:
        """Mean payoffs, NaN where never evaluated (a read-only copy)."""
        self.sync()
        out = np.where(self.evaluated[..., None], self._mean, np.nan)
        out.setflags(write=False)
        return out

    @property
    def counts(self) -> np.ndarray:
        self.sync()
        return self._count.copy()

    @property
    def exact(self) -> np.ndarray:
        self.sync()
        return self._exact.copy()

    @property
    def evaluated(self) -> np.ndarray:
        self.sync()
        return self._exact | (self._count > 0)

    @property
    def stderr(self) -> np.ndarray:
        """Standard error of each mean: 0 where exact, NaN with fewer than two samples."""
        self.sync()
        n = self._count[..., None].astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            se = np.sqrt(self._m2 / (n - 1) / n)
        se = np.where(n >= 2, se, np.nan)
        return np.where(self._exact[..., None], 0.0, se)

    def missing_cells(self) -> list[tuple[int, ...]]:
        """Index tuples of every never-evaluated cell."""
        return [tuple(int(i) for i in c) for c in np.argwhere(~self.evaluated)]

    def cell_index(self, cell: Cell) -> tuple[int, ...]:
        """Normalise a cell given by member indices or ids to an index tuple; raise if out of range."""
        self.sync()
        if len(cell) != self.num_players:
            raise ValueError(f"a cell names one member per player ({self.num_players}), got {tuple(cell)!r}")
        index = []
        for p, c in enumerate(cell):
            if isinstance(c, str):
                if c not in self._ids[p]:
                    raise ValueError(f"{c!r} is not a member of player {p}; ids are {self._ids[p]}")
                index.append(self._ids[p].index(c))
            elif isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c < len(self._ids[p]):
                index.append(int(c))
            else:
                raise ValueError(f"member {c!r} of player {p} is out of range 0..{len(self._ids[p]) - 1}")
        return tuple(index)

    def __getitem__(self, cell: Cell) -> np.ndarray:
        return self.values[self.cell_index(cell)]

    def update(self, cell: Cell, returns: Any) -> None:
        """Fold sampled episode returns ``[n, num_players]`` (or one ``[num_players]``) into a cell."""
        idx = self.cell_index(cell)
        r = np.asarray(returns, dtype=float)
        if r.ndim == 1:
            r = r[None]
        if r.ndim != 2 or r.shape[1] != self.num_players or len(r) == 0:
            raise ValueError(f"returns must have shape [episodes, {self.num_players}], got {r.shape}")
        if not np.all(np.isfinite(r)):
            raise ValueError(f"returns must be finite; got non-finite values for cell {self._label(idx)}")
        if self._exact[idx]:
            raise ValueError(f"cell {self._label(idx)} holds exact payoffs; sampled returns would not improve them")
        n_a, n_b = self._count[idx], len(r)
        mean_b = r.mean(axis=0)
        m2_b = ((r - mean_b) ** 2).sum(axis=0)
        n = n_a + n_b
        mean_a = self._mean[idx] if n_a > 0 else np.zeros(self.num_players)
        delta = mean_b - mean_a
        self._mean[idx] = mean_a + delta * n_b / n
        self._m2[idx] = self._m2[idx] + m2_b + delta**2 * n_a * n_b / n
        self._count[idx] = n

    def set_exact(self, cell: Cell, values: Any) -> None:
        """Store exact payoffs (one per player) for a cell; replaces any samples."""
        idx = self.cell_index(cell)
        v = np.asarray(values, dtype=float)
        if v.shape != (self.num_players,) or not np.all(np.isfinite(v)):
            raise ValueError(f"exact values must be {self.num_players} finite numbers, got {values!r}")
        self._mean[idx] = v
        self._m2[idx] = 0.0
        self._count[idx] = 0
        self._exact[idx] = True

    def set_exact_all(self, values: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Store exact payoffs for every cell where `mask` is True (all cells by default), in one go."""
        self.sync()
        v = np.asarray(values, dtype=float)
        if v.shape != self._mean.shape:
            raise ValueError(f"values must have the table's shape {self._mean.shape}, got {v.shape}")
        mask = np.ones(self._count.shape, bool) if mask is None else np.asarray(mask, bool)
        if not np.all(np.isfinite(v[mask])):
            raise ValueError("exact values must be finite")
        self._mean[mask] = v[mask]
        self._m2[mask] = 0.0
        self._count[mask] = 0
        self._exact[mask] = True

    def _label(self, idx: tuple[int, ...]) -> str:
        return "(" + ", ".join(self._ids[p][i] for p, i in enumerate(idx)) + ")"

    def _check_player(self, player: int) -> None:
        if not isinstance(player, (int, np.integer)) or not 0 <= player < self.num_players:
            raise ValueError(f"player {player!r} is out of range 0..{self.num_players - 1}")

    # -- pandas -----------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """Long form: a row per cell, MultiIndex of policy ids, payoff and stderr per player, count, exact."""
        self.sync()
        index = pd.MultiIndex.from_product(self._ids, names=[f"player_{p}" for p in range(self.num_players)])
        values, stderr = self.values, self.stderr
        data: dict[str, Any] = {}
        for p in range(self.num_players):
            data[f"payoff_{p}"] = values[..., p].ravel()
        data["count"] = self._count.ravel()
        for p in range(self.num_players):
            data[f"stderr_{p}"] = stderr[..., p].ravel()
        data["exact"] = self._exact.ravel()
        return pd.DataFrame(data, index=index)

    def matrix(self, player: int = 0) -> pd.DataFrame:
        """Two-player tables: `player`'s payoffs, rows player 0's members, columns player 1's."""
        if self.num_players != 2:
            raise ValueError(f"matrix() is for two-player tables; this one has {self.num_players} players (use to_frame())")
        self._check_player(player)
        df = pd.DataFrame(self.values[..., player], index=pd.Index(self._ids[0], name="player_0"),
                          columns=pd.Index(self._ids[1], name="player_1"))
        return df

    def style(self, player: int = 0, *, cmap: str = "RdBu", precision: int = 3) -> Styler:
        """A heatmap of `player`'s payoffs; sampled cells read ``mean ± stderr``."""
        numeric = self.matrix(player)
        se = self.stderr[..., player]
        exact = self._exact
        text = numeric.copy().astype(object)
        for (i, j), v in np.ndenumerate(numeric.to_numpy()):
            if np.isnan(v):
                text.iat[i, j] = "—"
            elif exact[i, j] or np.isnan(se[i, j]):
                text.iat[i, j] = f"{v:.{precision}f}"
            else:
                text.iat[i, j] = f"{v:.{precision}f} ± {se[i, j]:.{precision}f}"
        bound = float(np.nanmax(np.abs(numeric.to_numpy()))) if np.isfinite(numeric.to_numpy()).any() else 1.0
        return text.style.background_gradient(cmap=cmap, gmap=numeric.fillna(0.0).to_numpy(), axis=None,
                                              vmin=-bound, vmax=bound)

    def _repr_html_(self) -> str:
        if self.num_players == 2 and max(self.sizes, default=0) <= 30:
            return str(self.style()._repr_html_())
        return str(self.to_frame()._repr_html_())

    def __repr__(self) -> str:
        done = int(self.evaluated.sum())
        return f"PayoffTable(sizes={self.sizes}, evaluated {done}/{int(np.prod(self.sizes))} cells)"

    # -- files -------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the table to one `.npz` file, atomically."""
        self.sync()
        arrays = {"mean": self._mean, "m2": self._m2, "count": self._count, "exact": self._exact}
        for p in range(self.num_players):
            arrays[f"ids_{p}"] = np.asarray(self._ids[p], dtype=str)
        return write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike[str], population: Population | None = None, *,
             sizes: Sequence[int] | None = None) -> PayoffTable:
        """Read a table written by `save`; bound to `population` if given (whose ids must extend the table's).

        `sizes`, when given, are the table's expected sizes: every array's shape is checked
        against them before it is read (a run folder's loader passes its recorded sizes).
        """
        expect = None
        if sizes is not None:
            shape, k = tuple(int(n) for n in sizes), len(sizes)
            expect = {"mean": (shape + (k,), "f"), "m2": (shape + (k,), "f"), "count": (shape, "iu"),
                      "exact": (shape, "b"), **{f"ids_{p}": ((shape[p],), "U") for p in range(k)}}
        data = read_npz(path, expect)
        k = data["count"].ndim
        ids = [[str(x) for x in data[f"ids_{p}"]] for p in range(k)]
        table = cls(num_players=k)
        table._ids = ids
        table._mean, table._m2 = data["mean"].astype(float), data["m2"].astype(float)
        table._count, table._exact = data["count"].astype(np.int64), data["exact"].astype(bool)
        if population is not None:
            for p in range(k):
                if population.ids(p)[: len(ids[p])] != ids[p]:
                    raise ValueError(f"table in {str(path)!r} does not match the population's ids for player {p}")
            table.population = population
            table.sync()
        return table
