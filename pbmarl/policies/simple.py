"""Policies without learned parameters: uniform random and fixed distributions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.games.state import as_rng
from pbmarl.policies.base import ActionOutput, Policy


class RandomPolicy(Policy):
    """Uniform over the legal actions; on a bounded `Box` (of seat `player`), uniform in the Box.

    On a Box, ``act`` returns ``[B, *shape]`` float32 actions and the log-density
    ``-sum(log(high - low))``; on a `MultiDiscrete`, ``[B, *shape]`` ints, each entry
    uniform. Neither has `action_probabilities`.
    """

    kind = "random"

    def __init__(self, game: Game | str, *, player: int = 0) -> None:
        game = as_game(game)
        from gymnasium import spaces

        super().__init__(game)
        self.player = game.check_player(player)
        space = game.action_space(self.player)
        self.box = space if isinstance(space, spaces.Box) else None
        self.multi = space if isinstance(space, spaces.MultiDiscrete) else None
        if self.box is not None and not (np.all(np.isfinite(self.box.low)) and np.all(np.isfinite(self.box.high))):
            raise ValueError(f"RandomPolicy needs finite Box bounds to be uniform in; {game.name!r} has {self.box}")

    @property
    def discrete(self) -> bool:
        return self.box is None and self.multi is None

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        if not self.discrete:
            raise TypeError(f"RandomPolicy on {self.box or self.multi} has no action probabilities; use act()")
        return legal_mask.astype(float)

    def act(self, obs: np.ndarray, legal_mask: np.ndarray | None, rng: int | np.random.Generator | None = None,
            keys: Sequence[str] | None = None, *, deterministic: bool = False) -> ActionOutput:
        if self.multi is not None:
            nvec, start = self.multi.nvec.reshape(-1), self.multi.start.reshape(-1)
            size = (len(obs), len(nvec))
            draws = np.broadcast_to(start, size) if deterministic else as_rng(rng).integers(start, start + nvec, size=size)
            shaped = np.asarray(draws, dtype=np.int64).reshape((len(obs),) + self.multi.nvec.shape)
            return ActionOutput(shaped, np.full(len(obs), -float(np.log(nvec).sum())))
        if self.box is None:
            return super().act(obs, legal_mask, rng, keys, deterministic=deterministic)
        low, high = self.box.low.astype(np.float64), self.box.high.astype(np.float64)
        n = len(obs)
        if deterministic:
            actions = np.broadcast_to((low + high) / 2.0, (n,) + low.shape)
        else:
            actions = as_rng(rng).uniform(low, high, size=(n,) + low.shape)
        log_prob = np.full(n, -float(np.log(high - low).sum()))
        return ActionOutput(actions.astype(np.float32), log_prob)

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "player": self.player}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> RandomPolicy:
        policy = cls(game, player=int(meta.get("player", 0)))
        policy.version = int(meta.get("version", 0))
        return policy


class FixedPolicy(Policy):
    """The same distribution over actions everywhere, renormalised over the legal ones.

    Where none of its actions is legal it plays uniformly over the legal ones.

    Example:
        >>> game = pb.MatrixGame([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])   # rock, paper, scissors
        >>> rock = FixedPolicy.pure(game, 0)
        >>> mostly_paper = FixedPolicy(game, [0.2, 0.8, 0.0])
    """

    kind = "fixed"

    def __init__(self, game: Game | str, probs: Sequence[float] | np.ndarray | None = None) -> None:
        game = as_game(game)
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
