"""Target selection: what each iteration of a population loop trains against, as an object.

A driver holds a `TargetSelector` and asks it, each iteration, for `Target`\\ s: which seat
learns and against which opponents (one Policy or Mixture per seat). The drivers differ
mostly here, so a new driver reuses the loop by writing a selector:

- `MetaStrategyTargets`: PSRO's, one target per player against the meta-strategy, or, for a
  rectified Nash meta-strategy, one per supported member against the opponents it beats or ties.
  `PSRO.selector` holds one; a driver that trains against something else sets its own there and
  reuses PSRO's loop.
- `Level` (`pbmarl.algorithms.psro.p2sro`): P2SRO's, an active level against the meta-Nash of
  the levels below it (``level.select(rng)``).
- `Matchmaker` (`pbmarl.algorithms.league.rules`): the league's PFSP opponents; ``match(agent,
  rng)`` draws one per agent and `League.targets` turns the match into targets.

Example:
    >>> psro = pb.PSRO("kuhn_poker", solver="rectified_nash")
    >>> selector = MetaStrategyTargets(psro)  # what `psro.selector` is
    >>> [(t.player, t.label) for t in selector.select()]
    [(0, '@0'), (1, '@0')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population

__all__ = ["MetaGame", "MetaStrategyTargets", "Strategy", "Target", "TargetSelector", "against"]

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


class MetaGame(Protocol):
    """What `MetaStrategyTargets` reads each time it selects: a population and its current meta-strategy
    (a `PSRO` run is one)."""

    population: Population
    meta_strategy: Any


class MetaStrategyTargets:
    """PSRO's targets: every player best-responds to the others' meta-strategy mixtures.

    A rectified Nash meta-strategy (one whose ``rectified`` is set: for each player, supported member
    -> the opponents' distribution over the members it beats or ties) asks for one target per player and
    supported member instead, labelled ``"@member"``, against that distribution (two players).

    Args:
        game: holds the population and the current meta-strategy, read at every `select` (a `PSRO` run,
            or anything with ``population`` and ``meta_strategy``).
    """

    def __init__(self, game: MetaGame) -> None:
        self.game = game

    def select(self, rng: np.random.Generator | None = None) -> list[Target]:
        """This iteration's targets (nothing is drawn from `rng`)."""
        population, meta_strategy = self.game.population, self.game.meta_strategy
        mixtures = population.mixture(meta_strategy)
        rectified = getattr(meta_strategy, "rectified", None)
        if not rectified:
            return [Target(p, against(p, mixtures)) for p in range(len(mixtures))]
        targets = []
        for p in range(len(mixtures)):
            q = 1 - p
            for member, weights in sorted(rectified[p].items()):
                opponents = list(mixtures)
                opponents[q] = Mixture(population[q], weights)
                targets.append(Target(p, against(p, opponents), f"@{member}"))
        return targets
