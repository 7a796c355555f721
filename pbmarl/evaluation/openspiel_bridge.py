"""`to_openspiel_policy`: a meta-strategy mixture as an OpenSpiel policy, for OpenSpiel's own tools.

The mixture is turned into one behaviour policy that is realisation-equivalent to
it, as OpenSpiel's `policy_aggregator` does: at information set I of player p,
``pi(a | I) = sum_i w_i x_i(I, a) / sum_i w_i x_i(parent_seq(I))`` (uniform over the
legal actions where no member reaches I), with realisation plans from the
exact engine instead of a tree walk per policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.evaluation.exact import ExactEvaluator, Strategy, as_profile
from pbmarl.evaluation.realization import behaviour_from_plan
from pbmarl.games.base import Game
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population

if TYPE_CHECKING:  # pragma: no cover
    from open_spiel.python.policy import TabularPolicy as OpenSpielTabularPolicy


def mixture_behaviour(evaluator: ExactEvaluator, player: int, strategy: Strategy) -> np.ndarray:
    """The behaviour table ``[S_p, A]`` realisation-equivalent to a Policy or Mixture."""
    members, weights = (strategy.policies, strategy.weights) if isinstance(strategy, Mixture) else ([strategy], np.ones(1))
    plan = weights @ evaluator.plans(player, members)
    return behaviour_from_plan(plan, evaluator.tree.infosets[player], evaluator.tree.num_actions)


def to_openspiel_policy(
    game: Game,
    strategies: Population | Sequence[Strategy],
    sigma: Any = None,
    *,
    evaluator: ExactEvaluator | None = None,
) -> OpenSpielTabularPolicy:
    """An `open_spiel.python.policy.TabularPolicy` playing the meta-strategy mixture.

    Args:
        game: an OpenSpiel game loaded with `pb.load_game`.
        strategies: a `Population` (with `sigma`), or one Policy/Mixture per player.
        sigma: one distribution per player over the population (a `MetaStrategy` or a list).
        evaluator: an `ExactEvaluator` of `game` whose cached plans to reuse.

    Example:
        >>> from open_spiel.python.algorithms import exploitability
        >>> policy = pb.evaluation.to_openspiel_policy(game, pop, sigma)
        >>> round(float(exploitability.nash_conv(game.pyspiel_game, policy)), 6)
        0.916667
    """
    pyspiel_game = getattr(game, "pyspiel_game", None)
    if pyspiel_game is None:
        raise TypeError(
            f"to_openspiel_policy needs an OpenSpiel game (loaded with pb.load_game, e.g. 'kuhn_poker' or "
            f"'matrix_rps'), got {game!r}"
        )
    from open_spiel.python import policy as openspiel_policy

    profile = as_profile(game, strategies, sigma)
    if evaluator is None:
        evaluator = ExactEvaluator(game)
    elif evaluator.game is not game:
        raise ValueError(f"the evaluator is for {evaluator.game!r}, not {game!r}")
    result = openspiel_policy.TabularPolicy(pyspiel_game)
    for p, strategy in enumerate(profile):
        keys = evaluator.tree.infosets[p].keys
        try:
            rows = np.fromiter((result.state_lookup[k] for k in keys), dtype=np.int64, count=len(keys))
        except KeyError as exc:
            raise ValueError(
                f"information state {exc.args[0]!r} of player {p} is not in OpenSpiel's TabularPolicy for "
                f"{game.name!r}; the keys do not match"
            ) from None
        result.action_probability_array[rows] = mixture_behaviour(evaluator, p, strategy)
    return result
