"""`WinRateTable`: the league's payoff table of win rates, kept as (decayed) game counts.

As the ``Payoff`` class of the AlphaStar league pseudocode (Vinyals et al. 2019):
per ordered pair (home, away) it counts games, wins, draws and losses; the win rate
is ``(wins + draws / 2) / games``, and a pair never played reads 0.5. With
``decay < 1`` every update first multiplies the pair's counts by ``decay`` per game
added, so old results fade (the pseudocode's 0.99).

Counts are floats: a match measured exactly (an expected win probability) adds
fractional wins. The table grows as players join; arrays are square numpy.

Example:
    >>> t = WinRateTable(decay=1.0)
    >>> t.add("main"); t.add("main@0")
    >>> t.update("main", "main@0", wins=7, draws=1, losses=2)
    >>> t.win_rate("main", ["main@0"])
    array([0.75])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STATS = ("games", "wins", "draws", "losses")


class WinRateTable:
    """Win rates between named league players, from counts; see the module doc.

    Args:
        decay: factor applied to a pair's counts per game added (1: no decay), in (0, 1].
    """

    def __init__(self, *, decay: float = 1.0) -> None:
        if not 0.0 < float(decay) <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay!r}")
        self.decay = float(decay)
        self.names: list[str] = []
        self._index: dict[str, int] = {}
        self.counts = {s: np.zeros((0, 0)) for s in STATS}

    def add(self, name: str) -> None:
        """Add a player (its row and column start unplayed)."""
        if name in self._index:
            raise ValueError(f"player {name!r} is already in the win-rate table")
        self._index[name] = len(self.names)
        self.names.append(name)
        n = len(self.names)
        for s in STATS:
            grown = np.zeros((n, n))
            grown[: n - 1, : n - 1] = self.counts[s]
            self.counts[s] = grown

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no player {name!r} in the win-rate table; it has {self.names}") from None

    def update(self, home: str, away: str, *, wins: float = 0.0, draws: float = 0.0, losses: float = 0.0) -> None:
        """Record `home`'s results against `away` (and the mirrored results of `away`)."""
        for what, v in (("wins", wins), ("draws", draws), ("losses", losses)):
            if not np.isfinite(v) or v < 0:
                raise ValueError(f"{what} must be a non-negative finite count, got {v!r}")
        games = wins + draws + losses
        if games <= 0:
            raise ValueError(f"an update needs at least one game, got wins={wins}, draws={draws}, losses={losses}")
        i, j = self.index(home), self.index(away)
        factor = self.decay ** games
        for s in STATS:
            self.counts[s][i, j] *= factor
            self.counts[s][j, i] *= factor
        c = self.counts
        c["games"][i, j] += games
        c["wins"][i, j] += wins
        c["draws"][i, j] += draws
        c["losses"][i, j] += losses
        if i != j:
            c["games"][j, i] += games
            c["wins"][j, i] += losses
            c["draws"][j, i] += draws
            c["losses"][j, i] += wins

    def win_rate(self, home: str, aways: list[str]) -> np.ndarray:
        """``P[home beats away]`` for each away player; 0.5 for pairs never played."""
        i = self.index(home)
        js = [self.index(a) for a in aways]
        games = self.counts["games"][i, js]
        score = self.counts["wins"][i, js] + 0.5 * self.counts["draws"][i, js]
        out = np.full(len(js), 0.5)
        played = games > 0
        out[played] = score[played] / games[played]
        return np.asarray(np.clip(out, 0.0, 1.0))

    def to_frame(self) -> pd.DataFrame:
        """Square DataFrame of win rates (row beats column); unplayed pairs read 0.5."""
        rates = np.array([self.win_rate(n, self.names) for n in self.names]).reshape(len(self.names), len(self.names))
        return pd.DataFrame(rates, index=pd.Index(self.names, name="home"), columns=pd.Index(self.names, name="away"))

    def _repr_html_(self) -> str:
        return str(self.to_frame().round(3)._repr_html_())

    def __repr__(self) -> str:
        return f"WinRateTable({len(self.names)} players, decay={self.decay})"

    # -- save / load -------------------------------------------------------------
    def state(self) -> tuple[dict[str, object], dict[str, np.ndarray]]:
        """``(json_meta, arrays)`` that `from_state` rebuilds exactly."""
        return {"names": list(self.names), "decay": self.decay}, {s: self.counts[s].copy() for s in STATS}

    @classmethod
    def from_state(cls, meta: dict[str, object], arrays: dict[str, np.ndarray]) -> WinRateTable:
        table = cls(decay=float(meta["decay"]))  # type: ignore[arg-type]
        for name in meta["names"]:  # type: ignore[attr-defined]
            table.add(str(name))
        for s in STATS:
            table.counts[s] = np.array(arrays[s], dtype=float)
        return table
