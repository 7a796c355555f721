"""Tabular policies: one row of action probabilities per information state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.games.state import as_rng
from pbmarl.policies.base import Policy, masked_normalize


class TabularPolicy(Policy):
    """A table ``[num_states, num_actions]`` indexed by information-state key.

    By default it covers every information state of every player of the game (the
    tree is walked once and cached on the game), uniform over legal actions.
    Unknown keys raise. Rows are renormalised over the legal actions on read.

    Example:
        >>> pi = TabularPolicy(game)                       # uniform
        >>> pi = TabularPolicy.random(game, seed=0)        # random behaviour at each state
        >>> pi.set_row("0pb", [0.0, 1.0])
    """

    kind = "tabular"
    needs_keys = True

    def __init__(self, game: Game | str, table: np.ndarray | None = None, keys: Sequence[str] | None = None) -> None:
        game = as_game(game)
        super().__init__(game)
        if keys is None:
            tree = game.tree()
            keys = [k for infos in tree.infosets for k in infos.keys]
            legal = np.concatenate([infos.legal for infos in tree.infosets]) if keys else np.zeros((0, game.num_actions), bool)
        else:
            legal = None
        self.keys = list(keys)
        self.index = {k: i for i, k in enumerate(self.keys)}
        if len(self.index) != len(self.keys):
            raise ValueError("information-state keys must be unique")
        if table is None:
            if legal is None:
                table = np.full((len(self.keys), game.num_actions), 1.0 / game.num_actions)
            else:
                table = masked_normalize(np.ones(legal.shape), legal)
        table = np.asarray(table, dtype=float)
        if table.shape != (len(self.keys), game.num_actions):
            raise ValueError(
                f"table must have shape ({len(self.keys)}, {game.num_actions}) (states, actions), got {table.shape}"
            )
        if not np.all(np.isfinite(table)) or np.any(table < 0):
            raise ValueError("table entries must be finite and non-negative")
        self.table = table

    @classmethod
    def random(cls, game: Game, seed: int | np.random.Generator | None = None, *, concentration: float = 1.0) -> TabularPolicy:
        """Independent Dirichlet draws at every information state (over legal actions)."""
        policy = cls(game)
        rng = as_rng(seed)
        legal = policy.table > 0
        draws = rng.gamma(concentration, size=policy.table.shape) * legal
        policy.table = masked_normalize(draws, legal)
        return policy

    def row(self, key: str) -> np.ndarray:
        return self.table[self._lookup([key])[0]]

    def set_row(self, key: str, probs: Sequence[float]) -> None:
        i = self._lookup([key])[0]
        p = np.asarray(probs, dtype=float)
        if p.shape != (self.num_actions,) or np.any(p < 0) or not np.isclose(p.sum(), 1.0, atol=1e-6):
            raise ValueError(f"row for {key!r} must be a distribution over {self.num_actions} actions, got {probs!r}")
        self.table[i] = p
        self.version += 1

    def _lookup(self, keys: Sequence[str]) -> np.ndarray:
        try:
            return np.fromiter((self.index[k] for k in keys), dtype=np.int64, count=len(keys))
        except KeyError as exc:
            raise KeyError(f"information state {exc.args[0]!r} is not in this tabular policy for {self.game_name!r}") from None

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        if keys is None:
            raise ValueError("TabularPolicy needs the information-state keys of the batch (keys=...)")
        if len(keys) != len(legal_mask):
            raise ValueError(f"got {len(keys)} keys for a batch of {len(legal_mask)}")
        return self.table[self._lookup(keys)]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"table": self.table, "keys": np.asarray(self.keys, dtype=str)}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> TabularPolicy:
        policy = cls(game, table=np.array(arrays["table"]), keys=[str(k) for k in arrays["keys"]])
        policy.version = int(meta.get("version", 0))
        return policy

    def __repr__(self) -> str:
        return f"TabularPolicy({self.game_name!r}, {len(self.keys)} states)"
