"""`League`: AlphaStar league training (Vinyals et al. 2019), stepped one round at a time.

A league holds learning agents (main agents, main exploiters, league exploiters), each
with one policy per seat, and frozen snapshots of them. One `step()` gives every agent
one match: its role's rule (`Matchmaker`, the league's target selection) draws an
opponent, the agent's learner trains against it for ``steps_per_match`` steps (warm-started
from the agent's last policy), the pair plays ``match_episodes`` games (both seatings)
whose results enter the `WinRateTable`, and the snapshot and reset rules run.

Snapshots join a `Population` (one member per seat) and its `PayoffTable`; the main
agent's policy is read as the Nash mixture of the main agent's snapshots in that table
(`main_policy`), whose exploitability is measured exactly where the game allows.

Example:
    >>> league = League(pb.MatrixGame([[3, -2], [-2, 1]]), snapshot_min_steps=1)
    >>> for record in league.run(30):  # doctest: +ELLIPSIS
    ...     print(record)
    round   1 | league 6 | exploitability 0.5 | ...
    >>> league.win_rates.to_frame(), league.main_policy()  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pbmarl.algorithms import driver_io as io
from pbmarl.algorithms.league_records import LeagueRecord, MatchRecord
from pbmarl.algorithms.league_rules import LeagueConfig, Matchmaker, Member
from pbmarl.algorithms.targets import Target, against
from pbmarl.algorithms.transaction import all_or_nothing
from pbmarl.algorithms.win_rates import WinRateTable
from pbmarl.games.base import Game
from pbmarl.games.registry import load_game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population
from pbmarl.protocols import Oracle, Restorable


def payoff_scale(game: Game) -> float:
    """The largest absolute return a seat can get: the scale that turns payoff margins into win rates."""
    payoffs = getattr(game, "payoffs", None)
    if isinstance(payoffs, np.ndarray):
        return float(np.abs(payoffs).max()) or 1.0
    spiel = getattr(game, "pyspiel_game", None)
    if spiel is not None:
        return max(abs(float(spiel.min_utility())), abs(float(spiel.max_utility()))) or 1.0
    return 1.0


def win_probability(returns: np.ndarray, seat: int, scale: float) -> float:
    """``0.5 + (u_seat - u_other) / (4 scale)``, clipped to [0, 1].

    For win/draw/loss games (returns +-1, 0) this is exactly ``P[win] + P[draw] / 2``;
    for other payoffs it is the payoff margin rescaled linearly, 0.5 when even.
    """
    margin = float(returns[seat] - returns[1 - seat])
    return float(np.clip(0.5 + margin / (4.0 * scale), 0.0, 1.0))


class League:
    """AlphaStar league training; see the module doc.

    Args:
        game: a two-player `Game` or its name.
        learner: the oracle every agent trains with (each agent gets its own copy, seeded apart),
            or a factory ``offset -> oracle``; default the exact best response.
        evaluator: plays matches and fills the snapshots' table: an `ExactEvaluator` (default
            where the tree fits) or a `RolloutPool`.
        main_agents, main_exploiters, league_exploiters: how many agents of each role.
        config: a `LeagueConfig`; keyword `options` override its fields.
        seed: seeds matchmaking, resets and sampled matches.
        measure: measure the exploitability of `main_policy` every step (default: where exact).
        save_dir: if given, the league is saved there after every step.
    """

    def __init__(self, game: Game | str, learner: Any = None, evaluator: Any = None, *, main_agents: int = 1,
                 main_exploiters: int = 1, league_exploiters: int = 2, config: LeagueConfig | None = None,
                 seed: int = 0, measure: bool | None = None, save_dir: str | os.PathLike[str] | None = None,
                 **options: Any) -> None:
        from pbmarl.algorithms.psro import _exact_capable, _make_evaluator, _make_oracle

        self.game = load_game(game) if isinstance(game, str) else game
        if self.game.num_players != 2:
            raise ValueError(f"League plays two-player games; {self.game.name!r} has {self.game.num_players} players")
        for what, n in (("main_agents", main_agents), ("main_exploiters", main_exploiters),
                        ("league_exploiters", league_exploiters)):
            if not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"{what} must be a non-negative int, got {n!r}")
        if main_agents < 1:
            raise ValueError(f"a league needs at least one main agent, got main_agents={main_agents!r}")
        self.config: LeagueConfig = io.config_with(LeagueConfig, config, options, owner="League")
        self.evaluator: Any = _make_evaluator(self.game, evaluator, seed)
        self._factory: Callable[[int], Any] = (
            learner if callable(learner) and not isinstance(learner, Oracle)
            else io.make_factory(_make_oracle(self.game, learner, self.evaluator, seed)))
        self.measure = _exact_capable(self.game) if measure is None else bool(measure)
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self.counts = {"main": int(main_agents), "main_exploiter": int(main_exploiters),
                       "league_exploiter": int(league_exploiters)}
        self.win_rates = WinRateTable(decay=self.config.decay)
        self.members: dict[str, Member] = {}
        self.matchmaker = Matchmaker(self.config, self.win_rates, self.members)
        self.population = Population(self.game)
        self.table = PayoffTable(self.population)
        self.policies: dict[str, list[Policy]] = {}
        self.learners: dict[str, Any] = {}
        self.records: list[LeagueRecord] = []
        self._wall = 0.0
        self._env_steps = 0
        self._resets = 0
        self.initial: list[Policy] = [self._initial_policy() for _ in range(2)]
        t0 = time.perf_counter()
        for role, n in self.counts.items():
            for i in range(n):
                name = role if n == 1 else f"{role}_{i}"
                self._join(Member(name, role), list(self.initial))
        snaps = tuple(self._snapshot(n) for n in self.matchmaker.of_role("main"))
        self._finish(0, (), snaps, (), {"train": time.perf_counter() - t0})

    def _initial_policy(self) -> Policy:
        from pbmarl.policies.simple import RandomPolicy

        return RandomPolicy(self.game)

    def _join(self, member: Member, policies: list[Policy]) -> None:
        self.members[member.name] = member
        self.win_rates.add(member.name)
        self.policies[member.name] = policies
        if not member.historical:
            self.learners[member.name] = self._factory(len(self.learners) + 1000 * self._resets)

    # -- the loop -----------------------------------------------------------------
    @all_or_nothing
    def step(self) -> LeagueRecord:
        """One league round: every agent plays one match (train, then play); returns its record.

        All or nothing: if anything raises, the league is left exactly as before the call.
        """
        iteration = len(self.records)
        seconds = {"train": 0.0, "play": 0.0}
        matches, snaps, resets = [], [], []
        for name in [m.name for m in list(self.members.values()) if not m.historical]:
            opponent, branch = self.matchmaker.match(name, self.rng)
            t0 = time.perf_counter()
            steps = self._train(name, opponent)
            t1 = time.perf_counter()
            rate = self._play(name, opponent)
            seconds["train"] += t1 - t0
            seconds["play"] += time.perf_counter() - t1
            matches.append(MatchRecord(name, opponent, branch, rate, steps))
            if self.matchmaker.ready_to_snapshot(name):
                snaps.append(self._snapshot(name))
                if self.matchmaker.resets_at_snapshot(name, self.rng):
                    self._reset(name)
                    resets.append(name)
        return self._finish(iteration, tuple(matches), tuple(snaps), tuple(resets), seconds)

    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.algorithms.transaction`)."""
        learners = {n: (lr, lr.snapshot() if isinstance(lr, Restorable) else None) for n, lr in self.learners.items()}
        return (copy.deepcopy(self.members), dict(self.policies), learners, copy.deepcopy(self.win_rates),
                self.population.snapshot(), self.table.snapshot(), len(self.records), self.rng.bit_generator.state,
                self._wall, self._env_steps, self._resets)

    def restore(self, state: object) -> None:
        """Put the league back as `snapshot()` found it."""
        (members, policies, learners, win_rates, population, table, n, rng, self._wall, self._env_steps,
         self._resets) = cast("tuple[Any, ...]", state)
        self.members.clear()
        self.members.update(members)
        self.policies = dict(policies)
        self.learners = {}
        for name, (learner, saved) in learners.items():
            if saved is not None:
                learner.restore(saved)
            self.learners[name] = learner
        self.win_rates = win_rates
        self.matchmaker = Matchmaker(self.config, self.win_rates, self.members)
        self.population.restore(population)
        self.table.restore(table)
        del self.records[n:]
        self.rng.bit_generator.state = rng

    def targets(self, name: str, opponent: str) -> list[Target]:
        """What agent `name` trains against in a match with `opponent`: each seat, the other's policy."""
        opp = self.policies[opponent]
        return [Target(p, against(p, opp), f"{name} vs {opponent}") for p in range(2)]

    def _train(self, name: str, opponent: str) -> int:
        from pbmarl.learners.base import Learner

        learner = self.learners[name]
        new, steps = [], 0
        for t in self.targets(name, opponent):
            if isinstance(learner, Learner):
                policy, _ = learner.best_response_with_value(t.player, t.opponents, budget=self.config.steps_per_match,
                                                             warm_start=True)
                spent = int(learner.last_env_steps)
            else:
                policy, _, spent = learner.respond(t.player, t.opponents)
            new.append(policy)
            steps += spent
        self.policies[name] = new
        self._env_steps += steps
        self.members[name].steps += steps if steps > 0 else 1
        return steps

    def _play(self, home: str, away: str) -> float:
        """Play `home` against `away` in both seatings; record the results; return home's win rate."""
        from pbmarl.evaluation import ExactEvaluator

        scale = payoff_scale(self.game)
        a, b = self.policies[home], self.policies[away]
        n = self.config.match_episodes
        rates = []
        for seat, profile in ((0, [a[0], b[1]]), (1, [b[0], a[1]])):
            if isinstance(self.evaluator, ExactEvaluator):
                returns = np.asarray(self.evaluator.evaluate(profile), dtype=float)
            else:
                res = self.evaluator.evaluate(profile, n // 2 or 1, seed=int(self.rng.integers(2**62)))
                returns = np.asarray(res.mean, dtype=float)
                self._env_steps += int(getattr(res, "steps", 0) or 0)
            rates.append(win_probability(returns, seat, scale))
        rate = float(np.mean(rates))
        if home != away:
            self.win_rates.update(home, away, wins=rate * n, losses=(1 - rate) * n)
        return rate

    def _snapshot(self, name: str) -> str:
        agent = self.members[name]
        snap = f"{name}@{agent.snapshots}"
        agent.snapshots += 1
        agent.checkpoint_step = agent.steps
        self._join(Member(snap, agent.role, parent=name), list(self.policies[name]))
        for p, policy in enumerate(self.policies[name]):
            self.population.add(p, policy, name=snap, origin=agent.role, iteration=len(self.records))
        return snap

    def _reset(self, name: str) -> None:
        self._resets += 1
        self.policies[name] = list(self.initial)
        self.learners[name] = self._factory(len(self.learners) + 1000 * self._resets)

    def _finish(self, iteration: int, matches: tuple[MatchRecord, ...], snaps: tuple[str, ...],
                resets: tuple[str, ...], seconds: dict[str, float]) -> LeagueRecord:
        t0 = time.perf_counter()
        exploitability, main = None, tuple[tuple[float, ...], ...]()
        if self.measure:
            from pbmarl.evaluation import ExactEvaluator

            if isinstance(self.evaluator, ExactEvaluator):
                self.evaluator.fill(self.table)
            mix = self.main_policy()
            exploitability = float(self._measurer().exploitability(mix).exploitability)
            main = tuple(tuple(float(w) for w in m.weights) for m in mix)
        seconds["measure"] = time.perf_counter() - t0
        self._wall += sum(seconds.values())
        record = LeagueRecord(iteration=iteration, matches=matches, snapshots=snaps, resets=resets,
                              league_size=len(self.members), exploitability=exploitability, main_strategy=main,
                              seconds=seconds, wall_time=self._wall, env_steps=self._env_steps)
        self.records.append(record)
        if self.save_dir is not None:
            self.save(self.save_dir)
        return record

    def _measurer(self) -> Any:
        from pbmarl.evaluation import ExactEvaluator

        if isinstance(self.evaluator, ExactEvaluator):
            return self.evaluator
        if getattr(self, "_exact", None) is None:
            self._exact = ExactEvaluator(self.game)
        return self._exact

    def main_policy(self, agent: str | None = None, *, solver: str = "nash") -> list[Mixture]:
        """The main agent's policy: the `solver` mixture over its snapshots in the snapshots' table.

        Args:
            agent: which main agent (default the first).
            solver: a `MetaSolver` name.
        """
        from pbmarl.solvers import MetaSolver

        agent = agent or self.matchmaker.of_role("main")[0]
        missing = ~self.table.evaluated
        if missing.any():
            from pbmarl.evaluation import ExactEvaluator

            if isinstance(self.evaluator, ExactEvaluator):
                self.evaluator.fill(self.table)
            else:
                self.evaluator.fill(self.table, episodes=self.config.match_episodes, seed=int(self.rng.integers(2**62)))
        rows = [i for i, m in enumerate(self.population.members(0)) if self.members[m.name].parent == agent]
        sub = self.table.values[np.ix_(rows, rows)]
        sigma = MetaSolver(solver)(PayoffTable.from_array(sub))
        return [Mixture([self.population[p][i] for i in rows], sigma[p]) for p in range(2)]

    def run(self, steps: int) -> Iterator[LeagueRecord]:
        """Yield the records of `steps` more league rounds."""
        if not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"steps must be a non-negative int, got {steps!r}")
        for _ in range(int(steps)):
            yield self.step()

    # -- views -----------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        return self.records[-1].iteration if self.records else -1

    @property
    def history(self) -> pd.DataFrame:
        """One row per league round."""
        from pbmarl.algorithms.league_records import league_frame

        return league_frame(self.records)

    @property
    def matches(self) -> pd.DataFrame:
        """Every match played: iteration, agent, opponent, branch, win rate, steps."""
        from pbmarl.algorithms.league_records import matches_frame

        return matches_frame(self.records)

    def __repr__(self) -> str:
        return (f"League({self.game.name!r}, agents={self.counts}, iteration={self.iteration}, "
                f"snapshots={sum(m.historical for m in self.members.values())})")

    # -- files -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the league to folder `path` (state-NNNN/ first, run.json last)."""
        from pbmarl.algorithms.league_io import save_league

        return save_league(self, Path(path))

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, learner: Any = None, evaluator: Any = None,
             save_dir: str | os.PathLike[str] | None = None) -> League:
        """Resume a league saved by `save`; pass `learner`/`evaluator` as when it was made."""
        from pbmarl.algorithms.league_io import load_league

        return load_league(cls, Path(path), learner=learner, evaluator=evaluator, save_dir=save_dir)


__all__ = ["League", "payoff_scale", "win_probability"]
