"""Games: adapters for OpenSpiel, PettingZoo and normal-form games behind one `Game` interface."""

from pbmarl.games.base import Game
from pbmarl.games.matrix import MatrixGame
from pbmarl.games.registry import load_game
from pbmarl.games.state import CHANCE, SIMULTANEOUS, TERMINAL, as_rng
from pbmarl.games.stepper import StepResult, VecEnv

__all__ = ["CHANCE", "SIMULTANEOUS", "TERMINAL", "Game", "MatrixGame", "StepResult", "VecEnv", "as_rng", "load_game"]
