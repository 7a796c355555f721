"""`ExactEvaluator`: payoff tables, profile values and NashConv without sampling.

For games whose tree fits in memory (`Game.tree`), every policy becomes a
realisation plan with one batched call over its player's information states;
plans are cached per policy (by object and `version`), so a PSRO iteration that
adds one policy per player computes only the new plans and the new cells.

Example:
    >>> ev = ExactEvaluator(game)
    >>> ev.fill(table)                                 # every missing cell, exactly (here none)
    0
    >>> ev.evaluate([pop[0][0], pop.mixture(sigma)[1]])  # [num_players] expected returns
    array([ 0.125, -0.125])
    >>> round(exploitability(game, pop, sigma).nash_conv, 6)
    0.916667
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.evaluation.engine import best_response_values, nash_conv, opponent_reach, payoffs_where, profile_values
from pbmarl.evaluation.realization import policy_tables, realization_plans, terminal_reach
from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population, as_distributions

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.tree import GameTree
    from pbmarl.payoffs import PayoffTable

#: a strategy the engine can evaluate: a behaviour policy or a mixed strategy over policies
Strategy = Policy | Mixture


@dataclass(frozen=True, eq=False)
class Exploitability:
    """How far a profile of (mixed) strategies is from a Nash equilibrium.

    Attributes:
        nash_conv: NashConv, ``sum_p (br_values[p] - values[p])``. (OpenSpiel's PSRO
            example prints this number under the name "exploitabilities".)
        exploitability: ``nash_conv / num_players``.
        per_player: ``br_values - values``: what each player gains by best-responding.
        br_values: each player's best-response value against the others.
        values: each player's expected return under the profile.
    """

    nash_conv: float
    exploitability: float
    per_player: np.ndarray
    br_values: np.ndarray
    values: np.ndarray

    def __repr__(self) -> str:
        n = len(self.values)
        return (
            f"Exploitability(nash_conv={self.nash_conv:.6g} (sum of per-player best-response gains), "
            f"exploitability={self.exploitability:.6g} (nash_conv / {n} players), "
            f"per_player={_fmt(self.per_player)}, br_values={_fmt(self.br_values)}, values={_fmt(self.values)})"
        )


def _fmt(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.6g}" for x in values) + "]"


def check_strategy(strategy: Any, game: Game, *, what: str = "strategy") -> Strategy:
    """Return `strategy` if it is a Policy or Mixture made for `game`; raise naming the problem."""
    members = strategy.policies if isinstance(strategy, Mixture) else [strategy]
    for member in members:
        if not isinstance(member, Policy):
            raise TypeError(f"{what} must be a pbmarl Policy or Mixture, got {type(strategy).__name__}: {strategy!r}")
        if member.game_name != game.name:
            raise ValueError(f"{what} {member!r} was made for game {member.game_name!r}, not {game.name!r}")
        if member.num_actions != game.num_actions:
            raise ValueError(f"{what} {member!r} has {member.num_actions} actions but {game.name!r} has {game.num_actions}")
    return strategy


def as_profile(game: Game, strategies: Population | Sequence[Any], sigma: Any = None) -> list[Strategy]:
    """One strategy per player, from ``(population, sigma)`` or a sequence of Policy/Mixture.

    Raises:
        ValueError: wrong number of distributions or strategies, distributions of the
            wrong length or off the simplex, a population or policy of another game.
        TypeError: something that is neither.
    """
    P = game.num_players
    if isinstance(strategies, Population):
        if strategies.game.name != game.name:
            raise ValueError(f"the population is for game {strategies.game.name!r}, not {game.name!r}")
        if sigma is None:
            raise ValueError("give a meta-strategy sigma (one distribution per player) with a population")
        if not hasattr(sigma, "__len__") or not hasattr(sigma, "__getitem__"):
            raise TypeError(f"sigma must be one distribution per player (a MetaStrategy or a list), got {sigma!r}")
        if any(n == 0 for n in strategies.sizes):
            raise ValueError(f"every player needs at least one population member, sizes are {strategies.sizes}")
        dists = as_distributions(sigma, strategies.sizes)
        return [Mixture(strategies[p], w) for p, w in enumerate(dists)]
    if sigma is not None:
        raise ValueError("sigma is only used with a Population; got a sequence of strategies and a sigma")
    if isinstance(strategies, (Policy, Mixture)) or not isinstance(strategies, Sequence):
        raise TypeError(
            f"expected a Population and sigma, or one Policy/Mixture per player ({P}), got {type(strategies).__name__}"
        )
    if len(strategies) != P:
        raise ValueError(f"expected one strategy per player ({P}) for {game.name!r}, got {len(strategies)}")
    return [check_strategy(s, game, what=f"player {p}'s strategy") for p, s in enumerate(strategies)]


class ExactEvaluator:
    """Exact payoffs and NashConv for games whose tree fits in memory.

    Args:
        game: an enumerable game (OpenSpiel games such as Kuhn, Leduc, small Goofspiel,
            matrix games).
        max_nodes: refuse trees with more histories than this (use `pb.RolloutPool`); None (the
            default) refuses only trees estimated to need more memory than the budget.
        memory: bytes the tree walk may use: refused before it starts when the upper estimate is
            larger, stopped (`WalkOverBudget`) when the process grows by more; None: half of
            what is available (`pbmarl.games.tree.MEMORY_SHARE`). A tree loaded from the disk
            cache is not walked.
        progress: a progress bar for a walk that runs more than a few seconds: True always, False
            never, None in a notebook or a terminal.

    Realisation plans are cached per (policy object, `policy.version`) and player;
    a policy changed in place (which bumps its version) is recomputed.
    """

    def __init__(self, game: Game | str, *, max_nodes: int | None = None, memory: float | None = None,
                 progress: bool | None = None) -> None:
        from pbmarl.games.tree_cache import game_tree

        game = as_game(game)
        self.game = game
        # game_tree, not game.tree: only the former takes the budget; check_exact inside refuses what
        # Game.tree overrides refuse (a team game)
        self.tree: GameTree = game_tree(game, max_nodes=max_nodes, memory=memory, progress=progress)
        # per player: id(policy) -> (policy, version, plan); the policy is kept so its id stays unique
        self._cache: list[dict[int, tuple[Policy, int, np.ndarray]]] = [{} for _ in range(game.num_players)]
        self.plans_computed = 0

    # -- realisation plans -------------------------------------------------
    def plans(self, player: int, policies: Sequence[Policy]) -> np.ndarray:
        """Realisation plans ``[n, 1 + S_p * A]`` of `policies` for `player`, from the cache where fresh."""
        player = self.game.check_player(player)
        cache = self._cache[player]
        checked = [check_strategy(p, self.game, what=f"player {player}'s policy") for p in policies]
        for p in checked:
            if isinstance(p, Mixture):
                raise TypeError(f"plans() takes policies, not a Mixture ({p!r}): use reach()")
        policies = [p for p in checked if isinstance(p, Policy)]
        stale, seen = [], set()
        for p in policies:
            entry = cache.get(id(p))
            if (entry is None or entry[0] is not p or entry[1] != p.version) and id(p) not in seen:
                stale.append(p)
                seen.add(id(p))
        if stale:
            versions = [p.version for p in stale]  # read before asking: a policy may change meanwhile
            tables = policy_tables(stale, self.tree, player)
            plans = realization_plans(tables, self.tree.infosets[player], self.tree.num_actions)
            for p, v, x in zip(stale, versions, plans):
                cache[id(p)] = (p, v, x)
            self.plans_computed += len(stale)
        S = self.tree.num_sequences(player)
        if not policies:
            return np.zeros((0, S))
        return np.stack([cache[id(p)][2] for p in policies])

    def reach(self, player: int, strategy: Strategy) -> np.ndarray:
        """Terminal reach ``[Z]`` of one Policy or Mixture (the weighted sum of its members')."""
        members, weights = (strategy.policies, strategy.weights) if isinstance(strategy, Mixture) else ([strategy], np.ones(1))
        x = weights @ self.plans(player, members)
        return terminal_reach(x, self.tree, player)

    def clear_cache(self) -> None:
        """Forget every cached realisation plan."""
        for cache in self._cache:
            cache.clear()

    # -- payoffs -------------------------------------------------------------
    def payoffs(self, policies: Sequence[Sequence[Policy]], mask: np.ndarray | None = None) -> np.ndarray:
        """Payoffs ``[n_0, ..., n_{P-1}, P]`` of every profile of ``policies[p]`` (NaN where `mask` is False)."""
        if len(policies) != self.game.num_players:
            raise ValueError(f"expected one list of policies per player ({self.game.num_players}), got {len(policies)}")
        R = [terminal_reach(self.plans(p, pols), self.tree, p) for p, pols in enumerate(policies)]
        sizes = tuple(len(r) for r in R)
        return payoffs_where(self.tree, R, np.ones(sizes, bool) if mask is None else mask)

    def fill(self, table: PayoffTable, episodes: int = 0, *, seed: int | np.random.Generator | None = None) -> int:
        """Set every never-evaluated cell of `table` to its exact payoffs; returns how many were set.

        `episodes` and `seed` are accepted and ignored (the `Evaluator` seam shared with
        `RolloutPool`): exact payoffs need neither.

        Only the missing cells are computed; cells already holding data are left as
        they are. On error the table is unchanged.
        """
        population = getattr(table, "population", None)
        if population is None:
            raise ValueError(f"{table!r} is not bound to a Population, so there are no policies to evaluate")
        if population.game.name != self.game.name:
            raise ValueError(f"the table's population is for game {population.game.name!r}, not {self.game.name!r}")
        mask = ~table.evaluated
        if not mask.any():
            return 0
        values = self.payoffs([population[p] for p in range(self.game.num_players)], mask)
        table.set_exact_all(values, mask)
        return int(mask.sum())

    def evaluate(self, profile: Sequence[Strategy]) -> np.ndarray:
        """Expected returns ``[P]`` of one profile: a Policy or Mixture per player."""
        profile = as_profile(self.game, profile)
        return profile_values(self.tree, [self.reach(p, s) for p, s in enumerate(profile)])

    # -- best responses and NashConv -----------------------------------------------
    def best_response(self, player: int, opponents: Sequence[Strategy | None]) -> tuple[float, np.ndarray]:
        """``(value, br_table [S_p, A])`` of `player` against one Policy/Mixture per player (own entry ignored)."""
        player = self.game.check_player(player)
        P = self.game.num_players
        if isinstance(opponents, (Policy, Mixture)) or not isinstance(opponents, Sequence):
            raise TypeError(
                f"opponents must be a list with one Policy or Mixture per player ({P}; entry {player} is ignored), "
                f"got {type(opponents).__name__}: {opponents!r}"
            )
        if len(opponents) != P:
            raise ValueError(
                f"opponents must have one entry per player ({P}; entry {player} is ignored), got {len(opponents)}"
            )
        reach: list[np.ndarray | None] = []
        for q, s in enumerate(opponents):
            if q == player:
                reach.append(None)
            else:
                reach.append(self.reach(q, check_strategy(s, self.game, what=f"player {q}'s strategy")))
        return best_response_values(self.tree, player, opponent_reach(self.tree, player, reach))

    def exploitability(self, strategies: Population | Sequence[Strategy], sigma: Any = None) -> Exploitability:
        """NashConv and exploitability of ``(population, sigma)`` or of one Policy/Mixture per player."""
        profile = as_profile(self.game, strategies, sigma)
        reach = [self.reach(p, s) for p, s in enumerate(profile)]
        br_values, values = nash_conv(self.tree, reach)
        per_player = br_values - values
        for a in (per_player, br_values, values):
            a.setflags(write=False)
        total = float(per_player.sum())
        return Exploitability(total, total / self.game.num_players, per_player, br_values, values)

    def __repr__(self) -> str:
        t = self.tree
        return (
            f"ExactEvaluator({self.game.name!r}: {t.num_nodes:,} histories, {t.num_terminals:,} terminals, "
            f"infosets {[i.size for i in t.infosets]})"
        )


def exploitability(game: Game, strategies: Population | Sequence[Strategy], sigma: Any = None) -> Exploitability:
    """NashConv and exploitability (= NashConv / num_players), exactly.

    Example:
        >>> pb.exploitability(game, pop, sigma)          # the meta-strategy mixture of a population
        Exploitability(nash_conv=0.916667 (sum of per-player best-response gains), exploitability=0.458333 (nash_conv / 2 players), per_player=[0.375, 0.541667], br_values=[0.5, 0.416667], values=[0.125, -0.125])
        >>> round(pb.exploitability(game, [pop[0][0], pop[1][0]]).nash_conv, 6)   # one Policy or Mixture per player
        0.916667

    Raises:
        ValueError: the game cannot be enumerated or its tree is too big (use
            `pb.RolloutPool`), wrong number or shape of distributions, policies of another game.
    """
    return ExactEvaluator(game).exploitability(strategies, sigma)
