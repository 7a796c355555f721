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
    >>> league = League(pb.MatrixGame([[3, -2], [-2, 1]]), seed=0, snapshot_min_steps=1)
    >>> print(league.step())  # doctest: +ELLIPSIS
    round   1 | league 6 | exploitability 0.5 | ...
    >>> records = league.run(3, progress=False)
    >>> list(league.history.columns[:5])
    ['env_steps', 'episodes', 'wall_time', 'exploitability', 'nash_conv']
    >>> pi = league.main_policy()   # per seat, a MainPolicy: pi[0].action_probabilities(obs, mask, keys)
    >>> league.win_rates.to_frame(), league.evaluate(100, seed=0).mean  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import pandas as pd

from pbmarl.algorithms.league.records import LeagueRecord, MainPolicy, MatchRecord, matches_frame, play_profile
from pbmarl.algorithms.league.rules import LeagueConfig, Matchmaker, Member, payoff_scale, win_probability
from pbmarl.algorithms.league.win_rates import STATS, WinRateTable
from pbmarl.algorithms.psro.parts import (
    evaluator_spec,
    exact_capable,
    learner_spec,
    make_evaluator,
    make_factory,
    make_oracle,
    rebuild_evaluator,
    rebuild_learner,
)
from pbmarl.algorithms.psro.targets import Target, against
from pbmarl.config import build_config, check_seed
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy, new_policy_from_state
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population
from pbmarl.protocols import Checkpointed, Oracle, Restorable
from pbmarl.rollout.results import EvalResult
from pbmarl.runs import Run, SavedRun, State
from pbmarl.runs.folder import refused_as
from pbmarl.runs.transaction import all_or_nothing, covered


class League(Run):
    """AlphaStar league training; see the module doc.

    Args:
        game: a two-player `Game` or its name.
        learner: the oracle every agent trains with (each agent gets its own copy, seeded apart),
            or a factory ``offset -> oracle``; default the exact best response.
        evaluator: plays matches and fills the snapshots' table: an `ExactEvaluator` (default
            where the tree fits) or a `RolloutPool`.
        seed: seeds matchmaking, resets and sampled matches.
        config: a `LeagueConfig`; keyword `options` override its fields (``main_agents``,
            ``main_exploiters``, ``league_exploiters``, the thresholds, ``measure``, ...).
    """

    history_columns: ClassVar[tuple[str, ...]] = ("exploitability", "nash_conv", "league_size")

    def __init__(self, game: Game | str, learner: Any = None, evaluator: Any = None, *, seed: int = 0,
                 config: LeagueConfig | None = None, **options: Any) -> None:
        self.game = load_game(game) if isinstance(game, str) else game
        if not isinstance(self.game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        if self.game.num_players != 2:
            raise ValueError(f"League plays two-player games; {self.game.name!r} has {self.game.num_players} players")
        self.config: LeagueConfig = build_config(LeagueConfig, config, options, owner="League")
        self.seed = check_seed(seed)
        self.evaluator: Any = make_evaluator(self.game, evaluator, self.seed)
        self.learner: Any = (learner if callable(learner) and not isinstance(learner, Oracle)
                             else make_oracle(self.game, learner, self.evaluator, self.seed))
        self._factory: Callable[[int], Any] = make_factory(self.learner)
        self._exact_ok = exact_capable(self.game)
        self.measure = self._exact_ok if self.config.measure is None else bool(self.config.measure)
        self.rng = np.random.default_rng(self.seed)
        cfg = self.config
        self.counts = {"main": cfg.main_agents, "main_exploiter": cfg.main_exploiters,
                       "league_exploiter": cfg.league_exploiters}
        self.win_rates = WinRateTable(decay=cfg.decay)
        self.members: dict[str, Member] = {}
        self.matchmaker = Matchmaker(cfg, self.win_rates, self.members)
        self.population = Population(self.game)
        self.table = PayoffTable(self.population)
        self.policies: dict[str, list[Policy]] = {}
        self.learners: dict[str, Any] = {}
        self.records: list[LeagueRecord] = []
        self._wall = 0.0
        self._env_steps = 0
        self._episodes = 0
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

        All or nothing: if anything raises (a Ctrl-C included), the league is left exactly as before the call.
        """
        iteration = len(self.records)
        seconds = {"train": 0.0, "play": 0.0}
        matches, snaps, resets = [], [], []
        for name in [m.name for m in list(self.members.values()) if not m.historical]:
            opponent, branch = self.matchmaker.match(name, self.rng)
            t0 = time.perf_counter()
            with covered(self.learners[name]):  # this step's snapshot holds its state: its rounds need no copy
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
        """Everything a `step` changes, for `restore` (see `pbmarl.runs.transaction`)."""
        learners = {n: (lr, lr.snapshot() if isinstance(lr, Restorable) else None) for n, lr in self.learners.items()}
        return (copy.deepcopy(self.members), dict(self.policies), learners, copy.deepcopy(self.win_rates),
                self.population.snapshot(), self.table.snapshot(), len(self.records), self.rng.bit_generator.state,
                self._wall, self._env_steps, self._episodes, self._resets)

    def restore(self, state: object) -> None:
        """Put the league back as `snapshot()` found it."""
        (members, policies, learners, win_rates, population, table, n, rng, self._wall, self._env_steps,
         self._episodes, self._resets) = cast("tuple[Any, ...]", state)
        self.members.clear()
        self.members.update(members)
        self.policies = dict(policies)
        # the league holds its learners again before any of them is put back, so one that fails to restore
        # cannot leave the league without its agents
        self.learners = {name: learner for name, (learner, _) in learners.items()}
        self.win_rates = win_rates
        self.matchmaker = Matchmaker(self.config, self.win_rates, self.members)
        self.population.restore(population)
        self.table.restore(table)
        del self.records[n:]
        self.rng.bit_generator.state = rng
        for learner, saved in learners.values():
            if saved is not None:
                learner.restore(saved)

    def targets(self, name: str, opponent: str) -> list[Target]:
        """What agent `name` trains against in a match with `opponent`: each seat, the other's policy."""
        opp = self.policies[opponent]
        return [Target(p, against(p, opp), f"{name} vs {opponent}") for p in range(2)]

    def _train(self, name: str, opponent: str) -> int:
        from pbmarl.learners.oracles.base import Learner

        learner = self.learners[name]
        new, steps, episodes = [], 0, 0
        for t in self.targets(name, opponent):
            if isinstance(learner, Learner):
                seen = len(learner.records)
                policy, _ = learner.best_response_with_value(t.player, t.opponents, budget=self.config.steps_per_match,
                                                             warm_start=True)
                spent = int(learner.last_env_steps)
                episodes += sum(int(r.episodes) for r in learner.records[seen:])
                episodes += int(getattr(learner.config, "eval_episodes", 0) or 0)
            else:
                policy, _, spent = learner.respond(t.player, t.opponents)
            new.append(policy)
            steps += spent
        self.policies[name] = new
        self._env_steps += steps
        self._episodes += episodes
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
                self._episodes += int(getattr(res, "episodes", 0) or 0)
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
        exploitability = nash_conv = None
        main: tuple[tuple[float, ...], ...] = ()
        if self.measure:
            from pbmarl.evaluation import ExactEvaluator

            if isinstance(self.evaluator, ExactEvaluator):
                self.evaluator.fill(self.table)
            mix = self._main_mixtures(None, "nash", self.rng)
            result = self._measurer().exploitability(mix)
            exploitability, nash_conv = float(result.exploitability), float(result.nash_conv)
            main = tuple(tuple(float(w) for w in m.weights) for m in mix)
        seconds["measure"] = time.perf_counter() - t0
        self._wall += sum(seconds.values())
        record = LeagueRecord(iteration=iteration, env_steps=self._env_steps, episodes=self._episodes,
                              wall_time=self._wall, exploitability=exploitability, nash_conv=nash_conv,
                              matches=matches, snapshots=snaps, resets=resets, league_size=len(self.members),
                              main_strategy=main, times=seconds)
        self.records.append(record)
        return record

    def _measurer(self) -> Any:
        from pbmarl.evaluation import ExactEvaluator

        if isinstance(self.evaluator, ExactEvaluator):
            return self.evaluator
        if getattr(self, "_exact", None) is None:
            self._exact = ExactEvaluator(self.game)
        return self._exact

    # -- the main policy -------------------------------------------------------------
    @property
    def main_agents(self) -> list[str]:
        """The main agents' names."""
        return self.matchmaker.of_role("main")

    def _main_mixtures(self, agent: str | None, solver: str, rng: np.random.Generator) -> list[Mixture]:
        from pbmarl.solvers import MetaSolver

        mains = self.main_agents
        if agent is None:
            agent = mains[0]
        elif agent not in mains:
            raise ValueError(f"{agent!r} is not a main agent of this league; its main agents are {mains}")
        missing = ~self.table.evaluated
        if missing.any():
            from pbmarl.evaluation import ExactEvaluator

            if isinstance(self.evaluator, ExactEvaluator):
                self.evaluator.fill(self.table)
            else:
                self.evaluator.fill(self.table, episodes=self.config.match_episodes, seed=int(rng.integers(2**62)))
        rows = [i for i, m in enumerate(self.population.members(0)) if self.members[m.name].parent == agent]
        sub = self.table.values[np.ix_(rows, rows)]
        sigma = MetaSolver(solver)(PayoffTable.from_array(sub))
        return [Mixture([self.population[p][i] for i in rows], sigma[p]) for p in range(2)]

    def main_policy(self, agent: str | None = None, *, solver: str = "nash") -> list[MainPolicy]:
        """The main agent's policy, per seat a `MainPolicy`: the `solver` mixture over its snapshots.

        Each seat's `MainPolicy` plays directly (``action_probabilities``, ``act``); its
        ``mixture`` is the mixed strategy itself. Asking changes nothing in the league.

        Args:
            agent: which main agent (default the first; `main_agents` lists them).
            solver: a `MetaSolver` name.
        """
        from pbmarl.evaluation import ExactEvaluator

        table = None if isinstance(self.evaluator, ExactEvaluator) else self.table.snapshot()
        try:  # a sampling evaluator fills missing cells with a generator of its own, then the table goes back
            mixes = self._main_mixtures(agent, solver, copy.deepcopy(self.rng))
        finally:
            if table is not None:
                self.table.restore(table)
        out = []
        for p, mix in enumerate(mixes):
            behaviour = None
            if self._exact_ok:
                from pbmarl.evaluation.openspiel_bridge import mixture_behaviour

                measurer = self._measurer()
                behaviour = (list(measurer.tree.infosets[p].keys), mixture_behaviour(measurer, p, mix))
            out.append(MainPolicy(self.game, p, mix, behaviour))
        return out

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """`episodes` episodes of the main policy against itself (each seat draws a snapshot per episode).

        Returns a `pb.EvalResult` indexed by player; the league is unchanged.
        """
        profile = [pi.mixture for pi in self.main_policy()]
        return cast(EvalResult, play_profile(self.game, profile, episodes, seed=seed, deterministic=deterministic))

    # -- views -----------------------------------------------------------------------
    @property
    def matches(self) -> pd.DataFrame:
        """Every match played: iteration, agent, opponent, branch, win rate, steps."""
        return matches_frame(self.records)

    def __repr__(self) -> str:
        return (f"League({self.game.name!r}, agents={self.counts}, iteration={self.iteration}, "
                f"snapshots={sum(m.historical for m in self.members.values())})")

    # -- files -------------------------------------------------------------------------
    def state(self) -> State:
        """The league's state for its run folder (`pbmarl.runs.folder`)."""
        arrays: dict[str, np.ndarray] = {}
        agents, folders = [], {}
        for name, member in self.members.items():
            entry: dict[str, Any] = {"member": asdict(member)}
            if not member.historical:
                metas = []
                for seat, policy in enumerate(self.policies[name]):
                    keys = sorted(policy.arrays())
                    arrays.update({f"policy.{name}.{seat}.{k}": v for k, v in policy.arrays().items()})
                    metas.append({"meta": policy.meta(), "arrays": keys})
                entry["policies"] = metas
                learner = self.learners[name]
                entry["learner"] = isinstance(learner, (Run, Checkpointed))
                if entry["learner"]:
                    folders[f"learner-{name}"] = learner.save
            agents.append(entry)
        meta, counts = self.win_rates.state()
        arrays.update({f"win_rates.{k}": v for k, v in counts.items()})

        def snapshots(folder: Path) -> None:
            self.population.save(folder)
            self.table.save(folder / "table.npz")

        folders["snapshots"] = snapshots
        return State(
            data={"members": agents, "win_rates": meta, "sizes": list(self.population.sizes),
                  "rng": dict(self.rng.bit_generator.state), "wall_time": self._wall, "env_steps": self._env_steps,
                  "episodes": self._episodes, "resets": self._resets,
                  "learner": learner_spec(self.learner) if isinstance(self.learner, Oracle) else None,
                  "evaluator": evaluator_spec(self.evaluator), "records": [r.to_json() for r in self.records]},
            arrays=arrays, folders=folders, config=self.config.to_dict(), seed=self.seed, game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> League:
        """Rebuild a league `state` wrote, at its last completed round.

        `overrides`: ``learner=`` / ``evaluator=`` where the saved spec cannot rebuild one (a factory,
        an oracle without a spec), and options to change.
        """
        parts = {k: overrides.pop(k) for k in ("learner", "evaluator") if k in overrides}
        config = build_config(LeagueConfig, None, {**_tuples(saved.config), **overrides}, owner="League")
        game, data = saved.game(), saved.data
        with refused_as((KeyError, TypeError, ValueError, AttributeError, IndexError), lambda exc: (
                f"{str(saved.state_dir)!r}: cannot rebuild the league ({type(exc).__name__}: {exc}); pass learner= "
                "or evaluator= to load where they cannot be rebuilt")):
            if "learner" not in parts and data["learner"] is None:
                raise ValueError("the league was built with a learner factory, which cannot be saved")
            learner = parts["learner"] if "learner" in parts else rebuild_learner(game, data["learner"])
            evaluator = parts["evaluator"] if "evaluator" in parts else rebuild_evaluator(game, data["evaluator"])
            league = cls(game, learner, evaluator, seed=check_seed(saved.seed), config=config)
            league._load(saved, data)
        return league

    def _load(self, saved: SavedRun, data: dict[str, Any]) -> None:
        game = self.game
        names = [str(n) for n in data["win_rates"]["names"]]
        n = len(names)
        counts = saved.arrays({f"win_rates.{s}": ((n, n), "f") for s in STATS})
        self.win_rates = WinRateTable.from_state(data["win_rates"], {s: counts[f"win_rates.{s}"] for s in STATS})
        self.members = {}
        for entry in data["members"]:
            member = Member(**entry["member"])
            self.members[member.name] = member
            if member.historical:
                continue
            policies = []
            for seat, saved_policy in enumerate(entry["policies"]):
                keys = [str(k) for k in saved_policy["arrays"]]
                arrays = saved.arrays({f"policy.{member.name}.{seat}.{k}": (None, "fiubU") for k in keys})
                policies.append(new_policy_from_state(
                    game, {k: arrays[f"policy.{member.name}.{seat}.{k}"] for k in keys}, saved_policy["meta"]))
            self.policies[member.name] = policies
            learner = self.learners[member.name]
            if entry["learner"]:
                folder = saved.subfolder(f"learner-{member.name}")
                if isinstance(learner, Run):  # a learner is a run: its folder rebuilds it, state and all
                    self.learners[member.name] = type(learner).load(folder)
                elif isinstance(learner, Checkpointed):
                    learner.load(folder)
        self.matchmaker = Matchmaker(self.config, self.win_rates, self.members)
        sizes = [int(x) for x in data["sizes"]]
        folder = saved.subfolder("snapshots")
        self.population = Population.load(folder, game, sizes=sizes)
        self.table = PayoffTable.load(folder / "table.npz", self.population, sizes=sizes)
        self.policies.update({m.name: [self.population[p][i] for p in range(2)]
                              for i, m in enumerate(self.population.members(0))})
        self.records = [LeagueRecord.from_json(r) for r in data["records"]]
        self.rng.bit_generator.state = data["rng"]
        self._wall, self._env_steps = float(data["wall_time"]), int(data["env_steps"])
        self._episodes, self._resets = int(data["episodes"]), int(data["resets"])
        if list(self.members) != names or not self.records:
            raise ValueError("the saved members, win-rate table and records do not agree")


def _tuples(config: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}


__all__ = ["League", "MainPolicy", "payoff_scale", "win_probability"]
