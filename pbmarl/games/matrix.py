"""Normal-form games of any number of players."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.state import SIMULTANEOUS, TERMINAL


def _as_payoff_array(payoffs: Any) -> np.ndarray:
    """Turn the accepted payoff forms into one float array of shape (n1, ..., nk, k).

    A list or tuple whose k entries are each k-dimensional is read as one array per
    player; anything else is one array: a 2-D matrix (zero-sum, row player's payoffs)
    or the stacked form (n1, ..., nk, k).
    """
    if isinstance(payoffs, (list, tuple)) and len(payoffs) >= 2:
        dims = [np.ndim(p) if not isinstance(p, (list, tuple)) or _regular(p) else -1 for p in payoffs]
        if all(d == len(payoffs) for d in dims):
            arrays = [_numeric(p) for p in payoffs]
            shapes = {a.shape for a in arrays}
            if len(shapes) != 1:
                raise ValueError(f"per-player payoff arrays must share one shape, got shapes {sorted(shapes)}")
            return np.stack(arrays, axis=-1)
    array = _numeric(payoffs)
    if array.ndim == 2:
        return np.stack([array, -array], axis=-1)
    if array.ndim >= 3 and array.shape[-1] == array.ndim - 1:
        return array
    raise ValueError(
        f"cannot read payoffs of shape {array.shape}: give one 2-D matrix (zero-sum, row player's payoffs), "
        "one array per player of shape (n1, ..., nk), or one array of shape (n1, ..., nk, k)"
    )


def _regular(p: Any) -> bool:
    try:
        np.array(p, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def numeric_payoffs(payoffs: Any) -> np.ndarray:
    """`payoffs` as a new float array of any shape: what `MatrixGame` and the meta-solvers
    (`pbmarl.solvers.inputs.as_payoff_array`) read first. Ragged or non-numeric input is refused, naming it.

    Raises:
        ValueError: ragged input (rows of different lengths) or strings that are not numbers.
        TypeError: other non-numeric input.
    """
    try:
        return np.array(payoffs, dtype=float)
    except ValueError as exc:
        raise ValueError(f"payoffs must form a regular numeric array ({exc}); got {short_repr(payoffs)}") from None
    except TypeError as exc:
        raise TypeError(f"payoffs must be numeric ({exc}); got {short_repr(payoffs)}") from None


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to `limit` characters (ending in "...") for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _numeric(payoffs: Any) -> np.ndarray:
    array = numeric_payoffs(payoffs)
    if array.size == 0:
        raise ValueError("payoffs are empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"payoffs must be finite, got {short_repr(payoffs)}")
    return array


class MatrixGame(Game):
    """A normal-form game: every player picks one action at once, then payoffs are paid.

    Example:
        >>> rps = MatrixGame([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])   # zero-sum, row payoffs
        >>> pd = MatrixGame([[[3, 0], [5, 1]], [[3, 5], [0, 1]]])      # one array per player
    """

    def __init__(self, payoffs: Any, *, name: str | None = None) -> None:
        self.payoffs = _as_payoff_array(payoffs)
        self.payoffs.setflags(write=False)
        self.action_counts = self.payoffs.shape[:-1]
        if name is None:
            # named by content, so a policy made for one matrix game is not taken for another's
            digest = hashlib.sha1(np.ascontiguousarray(self.payoffs).tobytes()).hexdigest()[:8]
            name = "matrix_" + "x".join(map(str, self.action_counts)) + "_" + digest
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string, got {name!r}")
        self.name = name
        self.num_players = self.payoffs.shape[-1]
        self.num_actions = int(max(self.action_counts))
        self.observation_shape = (self.num_players,)
        self.turn_based = False
        self.zero_sum = bool(np.allclose(self.payoffs.sum(axis=-1), 0.0))

    def new_initial_state(self) -> MatrixState:
        return MatrixState(self)

    def observation(self, state: Any, player: int) -> np.ndarray:
        obs = np.zeros(self.num_players, dtype=np.float32)
        obs[player] = 1.0
        return obs

    def info_key(self, state: Any, player: int) -> str:
        return f"p{player}"

    def __repr__(self) -> str:
        return f"MatrixGame({self.name!r}: {self.num_players} players, actions {self.action_counts}, " + (
            "zero-sum)" if self.zero_sum else "general-sum)"
        )


class MatrixState:
    """The one decision node of a `MatrixGame`, following the pyspiel state protocol."""

    def __init__(self, game: MatrixGame) -> None:
        self.game = game
        self.joint: tuple[int, ...] | None = None

    def is_terminal(self) -> bool:
        return self.joint is not None

    def is_chance_node(self) -> bool:
        return False

    def is_simultaneous_node(self) -> bool:
        return self.joint is None

    def current_player(self) -> int:
        return TERMINAL if self.joint is not None else SIMULTANEOUS

    def chance_outcomes(self) -> list[tuple[int, float]]:
        return []

    def legal_actions(self, player: int) -> list[int]:
        if self.joint is not None:
            return []
        return list(range(self.game.action_counts[player]))

    def apply_action(self, action: int) -> None:
        raise ValueError("a matrix game has only a simultaneous node: use apply_actions")

    def apply_actions(self, actions: list[int]) -> None:
        if self.joint is not None:
            raise ValueError("the game is over")
        self.joint = tuple(int(a) for a in actions)

    def returns(self) -> list[float]:
        if self.joint is None:
            return [0.0] * self.game.num_players
        return [float(x) for x in self.game.payoffs[self.joint]]

    def rewards(self) -> list[float]:
        return self.returns()

    def clone(self) -> MatrixState:
        copy = MatrixState(self.game)
        copy.joint = self.joint
        return copy
