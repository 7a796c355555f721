"""Target selection: what each iteration of a population loop trains against, as an object.

A driver holds a `TargetSelector` and asks it, each iteration, for `Target`\\ s: which seat
learns and against which opponents (one Policy or Mixture per seat). The drivers differ
mostly here, so a new driver reuses the loop by writing a selector:

- `MetaStrategyTargets`: PSRO's, one target per player against the meta-strategy.
- `Level` (`pbmarl.algorithms.psro.p2sro`): P2SRO's, an active level against the meta-Nash of
  the levels below it (``level.select(rng)``).
- `Matchmaker` (`pbmarl.algorithms.league.rules`): the league's PFSP opponents; ``match(agent,
  rng)`` draws one per agent and `League.targets` turns the match into targets.

Example:
    >>> selector = MetaStrategyTargets(pop, sigma)  # doctest: +SKIP
    >>> for t in selector.select(rng):  # doctest: +SKIP
    ...     br = learner.best_response(t.player, t.opponents)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population

Strategy = Policy | Mixture


@dataclass(frozen=True)
class Target:
    """One best response to train: `player` learns against `opponents` (its own entry is None)."""

    player: int
    opponents: tuple[Strategy | None, ...]
    label: str = ""
    """A short name for records, e.g. ``"@3"`` or ``"main vs main@2 (pfsp)"``."""


@runtime_checkable
class TargetSelector(Protocol):
    """Chooses this iteration's targets; may draw from `rng` (the driver's, saved with the run)."""

    def select(self, rng: np.random.Generator) -> Sequence[Target]: ...


def against(player: int, strategies: Sequence[Strategy | None]) -> tuple[Strategy | None, ...]:
    """`strategies` with `player`'s own entry blanked: the opponents tuple of a `Target`."""
    return tuple(None if q == player else s for q, s in enumerate(strategies))


class MetaStrategyTargets:
    """PSRO's targets: every player best-responds to the others' meta-strategy mixtures.

    Args:
        population: the population the meta-strategy is over.
        meta_strategy: one distribution per player (a `MetaStrategy` or a list of arrays).
    """

    def __init__(self, population: Population, meta_strategy: Any) -> None:
        self.population = population
        self.meta_strategy = meta_strategy

    def select(self, rng: np.random.Generator) -> list[Target]:
        mixtures = self.population.mixture(self.meta_strategy)
        return [Target(p, against(p, mixtures)) for p in range(len(mixtures))]
