"""Games: adapters for OpenSpiel, PettingZoo and normal-form games behind one `Game` interface."""

from typing import Any

from pbmarl.games.base import CHANCE, SIMULTANEOUS, TERMINAL, Game, as_rng
from pbmarl.games.matrix import MatrixGame
from pbmarl.games.registry import load_game

__all__ = ["CHANCE", "SIMULTANEOUS", "TERMINAL", "Game", "MatrixGame", "StepResult", "VecEnv", "as_rng", "load_game"]


def __getattr__(name: str) -> Any:
    """`VecEnv` and `StepResult` live with the stepper in the rollout layer; imported on first use."""
    if name in ("VecEnv", "StepResult"):
        from pbmarl.rollout import stepper

        return getattr(stepper, name)
    raise AttributeError(f"module 'pbmarl.games' has no attribute {name!r}")
