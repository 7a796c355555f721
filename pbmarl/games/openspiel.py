"""Adapter for OpenSpiel games (turn-based and simultaneous-move)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.state import State


class OpenSpielGame(Game):
    """An OpenSpiel game behind the `Game` interface; its states are pyspiel states.

    Observations are OpenSpiel's information-state tensors where the game provides
    them (observation tensors otherwise); info keys are its information-state strings.
    """

    def __init__(self, name: str, pyspiel_game: Any) -> None:
        import pyspiel

        self.name = name
        self.pyspiel_game = pyspiel_game
        gtype = pyspiel_game.get_type()
        self.num_players = pyspiel_game.num_players()
        self.num_actions = pyspiel_game.num_distinct_actions()
        if self.num_actions < 1:
            raise ValueError(f"game {name!r} has no actions: check its parameters (OpenSpiel accepted them, but a "
                             f"game needs at least one action; e.g. goofspiel needs num_cards >= 1)")
        self.turn_based = gtype.dynamics != pyspiel.GameType.Dynamics.SIMULTANEOUS
        self.zero_sum = gtype.utility == pyspiel.GameType.Utility.ZERO_SUM
        self._use_info_tensor = gtype.provides_information_state_tensor
        self._use_info_string = gtype.provides_information_state_string
        if self._use_info_tensor:
            self.observation_shape = tuple(pyspiel_game.information_state_tensor_shape())
        elif gtype.provides_observation_tensor:
            self.observation_shape = tuple(pyspiel_game.observation_tensor_shape())
        else:
            self.observation_shape = (1,)
        self._has_obs_tensor = self._use_info_tensor or gtype.provides_observation_tensor
        base = name.split("(", 1)[0].strip()
        if gtype.dynamics == pyspiel.GameType.Dynamics.MEAN_FIELD:
            self.exact_refusal = (
                f"{base!r} is a mean-field game (its states carry a population distribution, not "
                "players' moves): it is outside pbmarl's exact engine and rollouts; use OpenSpiel's mfg algorithms"
            )
        elif base.endswith("_ir"):
            self.exact_refusal = (
                f"{base!r} is OpenSpiel's deliberately imperfect-recall variant (players forget their past), and "
                f"the exact engine needs perfect recall: use {base[:-3]!r}, or a sampling evaluator (pb.RolloutPool)"
            )

    def tree_identity(self) -> dict[str, str]:
        """The name and OpenSpiel's version: the tree of a pyspiel game depends on nothing else."""
        import pyspiel

        return {"game": self.name, "openspiel": str(getattr(pyspiel, "__version__", "unknown"))}

    def new_initial_state(self) -> State:
        return cast(State, self.pyspiel_game.new_initial_state())

    def observation(self, state: State, player: int) -> np.ndarray:
        pystate: Any = state  # a pyspiel.State (no type stubs)
        if self._use_info_tensor:
            flat = pystate.information_state_tensor(player)
        elif self._has_obs_tensor:
            flat = pystate.observation_tensor(player)
        else:
            return np.zeros(1, dtype=np.float32)
        return np.asarray(flat, dtype=np.float32).reshape(self.observation_shape)

    def info_key(self, state: State, player: int) -> str:
        if self.recall_keys:
            from pbmarl.games.recall import recall_key

            return recall_key(self, state, player)
        return self.info_string(state, player)

    def info_string(self, state: State, player: int) -> str:
        pystate: Any = state  # a pyspiel.State (no type stubs)
        if self._use_info_string:
            return str(pystate.information_state_string(player))
        return str(pystate.observation_string(player))
