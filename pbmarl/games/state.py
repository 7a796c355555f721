"""What a game's states are: the pyspiel-like `State` protocol, the player ids `CHANCE`,
`SIMULTANEOUS` and `TERMINAL`, and `as_rng`, the one way a seed becomes the Generator that
draws chance outcomes and actions.

Everything in `pbmarl.games` that walks or steps states (the tree builder, its size
estimate, the stepper) needs only this module, not `Game`: so `Game.tree()` and
`Game.vec_env()` can call them without an import cycle.

Example:
    >>> int(as_rng(0).integers(10)) == int(as_rng(0).integers(10))
    True
    >>> as_rng("seven")
    Traceback (most recent call last):
    ...
    ValueError: rng must be a non-negative int seed, a numpy Generator or None, got 'seven'
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pbmarl.config import is_int

__all__ = ["CHANCE", "SIMULTANEOUS", "TERMINAL", "OnePlayerState", "State", "as_rng"]

#: `current_player()` values, the same numbers OpenSpiel uses.
SIMULTANEOUS = -2
CHANCE = -1
TERMINAL = -4


class State(Protocol):
    """The pyspiel-like state protocol a game's states follow."""

    def is_terminal(self) -> bool: ...
    def is_chance_node(self) -> bool: ...
    def is_simultaneous_node(self) -> bool: ...
    def current_player(self) -> int: ...
    def chance_outcomes(self) -> list[tuple[int, float]]: ...
    def legal_actions(self, player: int) -> list[int]: ...
    def apply_action(self, action: int) -> None: ...
    def apply_actions(self, actions: list[int]) -> None: ...
    def rewards(self) -> list[float]: ...
    def returns(self) -> list[float]: ...
    def clone(self) -> State: ...


class _StepsOneSeat(Protocol):
    _reward: float
    _return: float

    def apply_action(self, action: Any, /) -> None: ...


class OnePlayerState:
    """The one-seat half of `State` for a one-player game's states (a Gymnasium env's, an MDP's), from
    the state's last reward ``_reward`` and its return so far ``_return``."""

    def apply_actions(self: _StepsOneSeat, actions: list[Any]) -> None:
        self.apply_action(actions[0])

    def rewards(self: _StepsOneSeat) -> list[float]:
        return [self._reward]

    def returns(self: _StepsOneSeat) -> list[float]:
        return [self._return]

def as_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A Generator from a seed, an existing Generator (used as is) or None (fresh entropy).

    Anything else (a string, a bool, a float, a negative int) raises ValueError naming it."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and not isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator)):
        if not is_int(seed) or not 0 <= seed < 2**128:
            raise ValueError(f"rng must be a non-negative int seed, a numpy Generator or None, got {seed!r}")
    return np.random.default_rng(seed)
