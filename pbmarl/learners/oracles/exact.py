"""`ExactBestResponse`: the exact best response to a profile of (mixed) opponent strategies.

For games whose tree fits in memory: opponents' terminal reach comes from the
exact engine, then one backward pass over the learner's information sets gives a
pure best response (`pbmarl.evaluation.engine.best_response_values`).

Example:
    >>> learner = ExactBestResponse(game)
    >>> br = learner.best_response(player=0, opponents=pop.mixture(sigma))
    >>> round(learner.last_value, 6)           # what the best response earns against them
    0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pbmarl.evaluation.exact import ExactEvaluator, Strategy
from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.policies.tabular import TabularPolicy
from pbmarl.protocols import BestResponse


class ExactBestResponse:
    """Exact best responses, as `TabularPolicy` objects over the whole game.

    Args:
        game: an enumerable game.
        evaluator: an `ExactEvaluator` of `game` to share (and its cache of plans);
            a new one by default.

    The returned policy is one-hot on the best response at every information state
    of `player` (ties and unreachable states go to the lowest legal action) and
    uniform at the other players' states.
    """

    name: ClassVar[str] = "exact"

    def __init__(self, game: Game | str, *, evaluator: ExactEvaluator | None = None) -> None:
        game = as_game(game)
        if evaluator is None:
            evaluator = ExactEvaluator(game)
        elif evaluator.game is not game:
            raise ValueError(f"the evaluator is for {evaluator.game!r}, not {game!r}")
        self.game = game
        self.evaluator = evaluator
        #: value of the last best response against the opponents it was computed for
        self.last_value: float | None = None
        #: environment steps the last best response took: none, it reads the tree
        self.last_env_steps = 0

    def best_response_with_value(self, player: int, opponents: Sequence[Strategy | None]) -> tuple[TabularPolicy, float]:
        """``(policy, value)``: a best response of `player` and its expected return.

        Args:
            player: the best-responding player.
            opponents: one Policy or Mixture per player (what ``pop.mixture(sigma)``
                returns); entry `player` is ignored and may be None.
        """
        value, br = self.evaluator.best_response(player, opponents)
        policy = TabularPolicy(self.game)
        infos = self.evaluator.tree.infosets[player]
        rows = [policy.index[k] for k in infos.keys]
        policy.table[rows] = br
        self.last_value = value
        return policy, value

    def respond(self, player: int, opponents: Sequence[Strategy | None]) -> BestResponse:
        """The `Oracle` seam: ``BestResponse(policy, value, env_steps=0)``."""
        policy, value = self.best_response_with_value(player, opponents)
        return BestResponse(policy, float(value), 0)

    def snapshot(self) -> object:
        """The value of the last best response (all the state this oracle keeps)."""
        return self.last_value

    def restore(self, state: object) -> None:
        self.last_value = state  # type: ignore[assignment]

    def best_response(self, player: int, opponents: Sequence[Strategy | None]) -> TabularPolicy:
        """A best response of `player` to `opponents`; its value is kept in `last_value`."""
        return self.best_response_with_value(player, opponents)[0]

    def __repr__(self) -> str:
        return f"ExactBestResponse({self.game.name!r})"
