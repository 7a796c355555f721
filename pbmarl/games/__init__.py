"""Games: adapters for OpenSpiel, PettingZoo and normal-form games behind one `Game` interface."""

from pbmarl.games.base import CHANCE, SIMULTANEOUS, TERMINAL, Game, StepResult, VecEnv, as_rng
from pbmarl.games.matrix import MatrixGame
from pbmarl.games.registry import load_game

__all__ = ["CHANCE", "SIMULTANEOUS", "TERMINAL", "Game", "MatrixGame", "StepResult", "VecEnv", "as_rng", "load_game"]
