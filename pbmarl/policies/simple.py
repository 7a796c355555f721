"""Policies without learned parameters: uniform random and fixed distributions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy


class RandomPolicy(Policy):
    """Uniform over the legal actions."""

    kind = "random"

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        return legal_mask.astype(float)


class FixedPolicy(Policy):
    """The same distribution over actions everywhere, renormalised over the legal ones.

    Where none of its actions is legal it plays uniformly over the legal ones.

    Example:
        >>> rock = FixedPolicy.pure(game, 0)
        >>> mostly_paper = FixedPolicy(game, [0.2, 0.8, 0.0])
    """

    kind = "fixed"

    def __init__(self, game: Game, probs: Sequence[float] | np.ndarray | None = None) -> None:
        super().__init__(game)
        if probs is None:
            probs = np.full(game.num_actions, 1.0 / game.num_actions)
        p = np.asarray(probs, dtype=float)
        if p.shape != (game.num_actions,):
            raise ValueError(f"probs must have {game.num_actions} entries for {game.name!r}, got shape {p.shape}")
        if np.any(p < -1e-12) or not np.isclose(p.sum(), 1.0, atol=1e-6):
            raise ValueError(f"probs must be a distribution (non-negative, summing to 1), got {p.tolist()}")
        self.probs = np.clip(p, 0.0, None) / np.clip(p, 0.0, None).sum()

    @classmethod
    def pure(cls, game: Game, action: int) -> FixedPolicy:
        """Always `action` (where legal)."""
        if not 0 <= int(action) < game.num_actions:
            raise ValueError(f"action {action} is out of range 0..{game.num_actions - 1} for {game.name!r}")
        probs = np.zeros(game.num_actions)
        probs[int(action)] = 1.0
        return cls(game, probs)

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        return np.broadcast_to(self.probs, legal_mask.shape)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"probs": self.probs}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> FixedPolicy:
        policy = cls(game, arrays["probs"])
        policy.version = int(meta.get("version", 0))
        return policy

    def __repr__(self) -> str:
        return f"FixedPolicy({self.game_name!r}, {np.round(self.probs, 3).tolist()})"
