"""`PSRO`: Policy-Space Response Oracles, stepped one iteration at a time.

One iteration: every player's oracle answers the current meta-strategy mixture of
the others with a new policy; the policies join the population; the evaluator fills
the new payoff-table cells; the meta-solver solves the empirical game; and, where
the game allows, the meta-strategy's NashConv in the full game is measured exactly.

`SelfPlay` and `FictitiousPlay` are PSRO with the ``last`` and ``uniform`` solvers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pbmarl.algorithms.records import IterationRecord, history_frame
from pbmarl.algorithms.transaction import all_or_nothing
from pbmarl.games.base import Game, as_rng
from pbmarl.games.registry import load_game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.population import Population
from pbmarl.protocols import BestResponse, Evaluator, MetaSolverLike, Opponents, Oracle, Restorable, respond_all


def _default_initial(game: Game) -> Policy:
    from pbmarl.policies.simple import RandomPolicy

    return RandomPolicy(game)


#: most episodes per payoff-table cell a run may ask for (beyond this a fill would run for days)
MAX_EPISODES = 10_000_000


class PSRO:
    """The PSRO outer loop, composed of a game, a meta-solver, a learner and an evaluator.

    Args:
        game: a `Game` or a name for `pb.load_game`.
        solver: a meta-solver name (``"nash"``, ``"uniform"``, ``"last"``, ``"prd"``, ``"rm"``,
            ``"alpharank"``, ``"rectified_nash"``) or a `MetaSolver`.
        learner: the oracle; default `ExactBestResponse` (games whose tree fits in memory).
        evaluator: fills the payoff table; default `ExactEvaluator`, or a `RolloutPool`.
        initial_policies: one policy per player (or one list per player); default uniform random.
        stop_exploitability: `run` stops once the measured exploitability falls to or below this
            (default 1e-6, as on the command line; None: never stop early).
        max_iterations: `run` never goes past this iteration (None: no limit).
        eval_episodes: episodes per cell when the evaluator samples (a `RolloutPool`).
        measure: measure exact NashConv each iteration (on by default where the engine applies).
        seed: seeds every stochastic part (learners, sampling evaluators) through one Generator.
        save_dir: if given, the run is saved there after every iteration (atomically).

    Example:
        >>> psro = PSRO("kuhn_poker", solver="nash")
        >>> for record in psro.run(10):  # doctest: +ELLIPSIS
        ...     print(record)
        iter   1 | sizes (2, 2) | NashConv 0.8333 | exploitability 0.4167 | meta-NashConv 0 | ...
        >>> psro.history[["nash_conv", "exploitability"]]  # doctest: +SKIP
    """

    #: solver used when none is given (subclasses fix their own)
    default_solver = "nash"

    def __init__(
        self,
        game: Game | str,
        solver: str | MetaSolverLike | None = None,
        learner: Oracle | str | None = None,
        evaluator: Evaluator | str | None = None,
        *,
        initial_policies: Sequence[Policy | Sequence[Policy]] | None = None,
        stop_exploitability: float | None = 1e-6,
        max_iterations: int | None = None,
        eval_episodes: int = 1000,
        measure: bool | None = None,
        seed: int | None = 0,
        save_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._configure(game, solver, learner, evaluator, stop_exploitability=stop_exploitability,
                        max_iterations=max_iterations, eval_episodes=eval_episodes, measure=measure,
                        seed=seed, save_dir=save_dir)
        self._initialise(initial_policies)

    def _configure(
        self,
        game: Game | str,
        solver: str | MetaSolverLike | None,
        learner: Oracle | str | None,
        evaluator: Evaluator | str | None,
        *,
        stop_exploitability: float | None,
        max_iterations: int | None,
        eval_episodes: int,
        measure: bool | None,
        seed: int | None,
        save_dir: str | os.PathLike[str] | None,
    ) -> None:
        """Set every option and the empty population; shared by `__init__` and `load`."""
        self.game = load_game(game) if isinstance(game, str) else game
        if not isinstance(self.game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        if seed is not None and (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))
                                 or not 0 <= seed < 2**63):
            raise ValueError(f"seed must be None or an int in [0, 2**63), got {seed!r}")
        if measure is not None and not isinstance(measure, (bool, np.bool_)):
            raise ValueError(f"measure must be True, False or None (measure where the game allows), got {measure!r}")
        if eval_episodes is not None and isinstance(eval_episodes, (int, np.integer)) and eval_episodes > MAX_EPISODES:
            raise ValueError(f"eval_episodes must be at most {MAX_EPISODES:,} per cell, got {eval_episodes!r}")
        self.solver: MetaSolverLike = _make_solver(solver if solver is not None else self.default_solver)
        self.evaluator: Evaluator = _make_evaluator(self.game, evaluator, seed)
        self.learner: Oracle = _make_oracle(self.game, learner, self.evaluator, seed)
        if stop_exploitability is not None and (isinstance(stop_exploitability, (bool, str))
                                                or not stop_exploitability >= 0):
            raise ValueError(f"stop_exploitability must be a non-negative number, got {stop_exploitability!r}")
        self.stop_exploitability = stop_exploitability
        if max_iterations is not None and (not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0):
            raise ValueError(f"max_iterations must be a non-negative int or None, got {max_iterations!r}")
        self.max_iterations = None if max_iterations is None else int(max_iterations)
        if not isinstance(eval_episodes, (int, np.integer)) or eval_episodes < 1:
            raise ValueError(f"eval_episodes must be a positive int, got {eval_episodes!r}")
        self.eval_episodes = int(eval_episodes)
        self.measure = _exact_capable(self.game) if measure is None else bool(measure)
        self.seed = None if seed is None else int(seed)
        self.rng = as_rng(self.seed)
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self.population = Population(self.game)
        self.table = PayoffTable(self.population)
        self.records: list[IterationRecord] = []
        self.meta_strategy: Any = None
        self._wall = 0.0
        self._env_steps = 0

    # -- the loop --------------------------------------------------------------
    def _initialise(self, initial_policies: Sequence[Policy | Sequence[Policy]] | None) -> None:
        start = time.perf_counter()
        if initial_policies is None:
            initial_policies = [_default_initial(self.game) for _ in range(self.game.num_players)]
        if len(initial_policies) != self.game.num_players:
            raise ValueError(
                f"initial_policies needs one entry per player ({self.game.num_players}), got {len(initial_policies)}"
            )
        ids = []
        for p, entry in enumerate(initial_policies):
            members: Sequence[Policy] = list(entry) if isinstance(entry, (list, tuple)) else [cast(Policy, entry)]
            for policy in members:
                ids.append(self.population.add(p, policy, name=f"initial-{p}", iteration=0, origin="initial"))
        seconds = {"oracle": time.perf_counter() - start}
        self._finish_iteration(0, seconds, tuple(ids), ())

    @all_or_nothing
    def step(self) -> IterationRecord:
        """One PSRO iteration; returns its record (also appended to `history`).

        All or nothing: if anything raises (a ``KeyboardInterrupt`` included) in any
        phase or in the save, the run is left exactly as before the call.
        """
        if self.save_dir is not None:  # a read-only run folder is found out before the work, not after
            from pbmarl.io import ensure_writable_folder

            ensure_writable_folder(self.save_dir, what="run folder")
        iteration = len(self.records)
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        opponents = self.population.mixture(self.meta_strategy)
        targets = self._oracle_targets(opponents)
        answers = self._best_responses(targets)
        ids = []
        for (player, _, label), answer in zip(targets, answers):
            ids.append(self.population.add(player, answer.policy, name=f"br{iteration}-{player}{label}",
                                           iteration=iteration, origin=self.learner.name,
                                           br_value=answer.value))
        seconds["oracle"] = time.perf_counter() - t0
        return self._finish_iteration(iteration, seconds, tuple(ids), tuple(a.value for a in answers))

    # -- all-or-nothing ----------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.algorithms.transaction`)."""
        learner = self.learner.snapshot() if isinstance(self.learner, Restorable) else None
        return (self.population.snapshot(), self.table.snapshot(), len(self.records), self.meta_strategy,
                self.rng.bit_generator.state, self._wall, self._env_steps, learner)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        population, table, n_records, meta, rng, wall, env_steps, learner = cast(
            "tuple[object, object, int, Any, dict[str, Any], float, int, object]", state)
        self.population.restore(population)
        self.table.restore(table)
        del self.records[n_records:]
        self.meta_strategy = meta
        self.rng.bit_generator.state = rng
        self._wall, self._env_steps = wall, env_steps
        if learner is not None and isinstance(self.learner, Restorable):
            self.learner.restore(learner)

    def _oracle_targets(self, opponents: Sequence[Any]) -> list[tuple[int, Sequence[Any], str]]:
        """(player, opponent mixtures, label) for every best response to train this iteration.

        Plain PSRO trains one per player against the meta-strategy; rectified Nash trains one
        per supported member against the opponents that member beats or ties.
        """
        rectified = getattr(self.meta_strategy, "rectified", None)
        if not rectified:
            return [(p, opponents, "") for p in range(self.game.num_players)]
        from pbmarl.policies.mixture import Mixture

        targets: list[tuple[int, Sequence[Any], str]] = []
        for p in range(self.game.num_players):
            for member, weights in sorted(rectified[p].items()):
                opps = list(opponents)
                q = 1 - p
                opps[q] = Mixture(self.population[q], weights)
                targets.append((p, opps, f"@{member}"))
        return targets

    def _best_responses(self, targets: Sequence[tuple[int, Opponents, str]]) -> list[BestResponse]:
        """The oracle's answers to `targets`: all at once from a `BatchOracle` (which may train them
        side by side), else one `respond` after another."""
        answers = respond_all(self.learner, [(player, opps) for player, opps, _ in targets])
        self._env_steps += sum(int(answer.env_steps) for answer in answers)
        return answers

    def _finish_iteration(
        self, iteration: int, seconds: dict[str, float], new_ids: tuple[str, ...], br_values: tuple[float, ...]
    ) -> IterationRecord:
        t0 = time.perf_counter()
        self._fill()
        seconds["evaluate"] = time.perf_counter() - t0
        gains, gain_se = self._gains(new_ids)
        t0 = time.perf_counter()
        self.meta_strategy = self.solver(self.table)
        seconds["solve"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        nash_conv = exploitability = None
        if self.measure:
            result = self._measurer().exploitability(self.population, self.meta_strategy)
            nash_conv, exploitability = float(result.nash_conv), float(result.exploitability)
        seconds["measure"] = time.perf_counter() - t0
        self._wall += sum(seconds.values())
        meta_nc = getattr(self.meta_strategy, "nash_conv", None)
        record = IterationRecord(
            iteration=iteration,
            sizes=self.population.sizes,
            meta_strategy=tuple(tuple(float(x) for x in self.meta_strategy[p]) for p in range(self.game.num_players)),
            nash_conv=nash_conv,
            exploitability=exploitability,
            meta_nash_conv=None if meta_nc is None else float(meta_nc),
            seconds=seconds,
            wall_time=self._wall,
            env_steps=self._env_steps,
            new_ids=new_ids,
            br_values=br_values,
            solver=getattr(self.solver, "name", type(self.solver).__name__),
            br_gains=tuple(gains),
            br_gain_stderr=tuple(gain_se),
        )
        self.records.append(record)
        if self.save_dir is not None:
            self.save(self.save_dir)
        return record

    def _gains(self, new_ids: tuple[str, ...]) -> tuple[list[float], list[float]]:
        """Each new policy's gain over the meta-strategy it answered (before it is re-solved)."""
        if self.meta_strategy is None or not new_ids:
            return [], []
        from pbmarl.algorithms.progress import br_gains

        members = [(m.player, m.index) for m in map(self.population.member, new_ids)]
        return br_gains(self.table.values, self.table.stderr, list(self.meta_strategy), members)

    def _measurer(self) -> Any:
        """The exact evaluator that measures NashConv: the run's own when it has one (its cache
        of realisation plans then serves both), else one kept for measuring."""
        from pbmarl.evaluation import ExactEvaluator

        if isinstance(self.evaluator, ExactEvaluator):
            return self.evaluator
        if getattr(self, "_measure_evaluator", None) is None:
            self._measure_evaluator = ExactEvaluator(self.game)
        return self._measure_evaluator

    def _fill(self) -> None:
        from pbmarl.evaluation import ExactEvaluator

        if isinstance(self.evaluator, ExactEvaluator):
            self.evaluator.fill(self.table)
            return
        # an explicit seed from the run's own (saved) rng keeps a resumed run on the same random stream
        seed = int(self.rng.integers(2**62))
        result = self.evaluator.fill(self.table, self.eval_episodes, seed=seed)
        if not isinstance(result, int):
            self._env_steps += int(result.steps)

    @property
    def converged(self) -> bool:
        """Whether the last measured exploitability is at or below `stop_exploitability`."""
        if self.stop_exploitability is None or not self.records:
            return False
        last = self.records[-1].exploitability
        return last is not None and last <= self.stop_exploitability

    def run(
        self, iterations: int | None = None, *, callback: Callable[[IterationRecord], Any] | None = None
    ) -> Iterator[IterationRecord]:
        """Yield the records of up to `iterations` more iterations (None: until `max_iterations`).

        Stops early once converged (see `stop_exploitability`) or at `max_iterations`.
        """
        if iterations is None:
            if self.max_iterations is None:
                raise ValueError("give run() a number of iterations, or set max_iterations on the PSRO object")
            iterations = max(self.max_iterations - self.iteration, 0)
        if not isinstance(iterations, (int, np.integer)) or iterations < 0:
            raise ValueError(f"iterations must be a non-negative int, got {iterations!r}")
        for _ in range(int(iterations)):
            if self.converged or (self.max_iterations is not None and self.iteration >= self.max_iterations):
                return
            record = self.step()
            if callback is not None:
                callback(record)
            yield record

    # -- views -----------------------------------------------------------------
    @property
    def iteration(self) -> int:
        return self.records[-1].iteration if self.records else -1

    @property
    def history(self) -> pd.DataFrame:
        """One row per iteration (see `IterationRecord`)."""
        return history_frame(self.records)

    def __repr__(self) -> str:
        last = self.records[-1] if self.records else None
        tail = f", exploitability={last.exploitability:.4g}" if last and last.exploitability is not None else ""
        return (f"{type(self).__name__}({self.game.name!r}, solver={getattr(self.solver, 'name', self.solver)!r}, "
                f"iteration={self.iteration}, sizes={self.population.sizes}{tail})")

    # -- files -------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the run to folder `path`; atomic per file, consistent at every instant."""
        from pbmarl.algorithms.checkpoint import save_run

        return save_run(self, Path(path))

    @classmethod
    def load(cls, path: str | os.PathLike[str], **overrides: Any) -> PSRO:
        """Resume a run saved by `save` from its last completed iteration."""
        from pbmarl.algorithms.checkpoint import load_run

        return load_run(cls, Path(path), **overrides)


class SelfPlay(PSRO):
    """Self-play: each new policy answers the opponent's latest policy (PSRO with the ``last`` solver)."""

    default_solver = "last"


class FictitiousPlay(PSRO):
    """Fictitious self-play: each new policy answers the uniform mixture of all earlier ones."""

    default_solver = "uniform"


def _make_solver(solver: str | MetaSolverLike) -> MetaSolverLike:
    if isinstance(solver, str):
        from pbmarl.solvers import MetaSolver

        return MetaSolver(solver)
    if not callable(solver):
        raise TypeError(f"solver must be a solver name or a MetaSolver, got {solver!r}")
    return solver


def _exact_capable(game: Game) -> bool:
    return _exact_refusal(game) is None


def _exact_refusal(game: Game) -> str | None:
    """Why the exact engine cannot take `game` (the tree builder's own message), or None."""
    try:
        game.tree()
    except ValueError as exc:
        return str(exc)
    return None


def _make_oracle(game: Game, learner: Oracle | str | None, evaluator: Evaluator, seed: int | None) -> Oracle:
    """The oracle: the one given, one built by name (``"exact"``, ``"dqn"``, ``"ppo"``, ``"a2c"``), or the default."""
    if learner is None or learner == "exact":
        return _default_learner(game, evaluator)
    if isinstance(learner, str):
        from pbmarl.learners.registry import LEARNERS, make_learner

        if learner not in LEARNERS:
            raise ValueError(f"unknown learner {learner!r}; pass one of {', '.join(map(repr, LEARNERS))} "
                             "or an object with respond(player, opponents) (a pbmarl.protocols.Oracle)")
        built = make_learner(game, {"name": learner, "seed": 0 if seed is None else seed})
        assert isinstance(built, Oracle)
        return built
    if not isinstance(learner, Oracle):
        raise TypeError(f"learner must be a learner name or an Oracle (with name and respond(player, opponents)), "
                        f"got {type(learner).__name__}: {learner!r}")
    return learner


def _make_evaluator(game: Game, evaluator: Evaluator | str | None, seed: int | None) -> Evaluator:
    """The evaluator: the one given, one built by name (``"exact"``, ``"rollout"``: a local `RolloutPool`), or the default."""
    if evaluator is None or evaluator == "exact":
        return _default_evaluator(game)
    if evaluator == "rollout":
        from pbmarl.rollout import RolloutPool

        return RolloutPool(game, seed=seed)
    if isinstance(evaluator, str):
        raise ValueError(f"unknown evaluator {evaluator!r}; pass 'exact', 'rollout' or an object with "
                         "fill(table, episodes, *, seed) (a pbmarl.protocols.Evaluator)")
    if not isinstance(evaluator, Evaluator):
        raise TypeError(f"evaluator must be 'exact', 'rollout' or an Evaluator (with fill(table, episodes, *, seed)), "
                        f"got {type(evaluator).__name__}: {evaluator!r}")
    return evaluator


def _default_learner(game: Game, evaluator: Evaluator) -> Oracle:
    refusal = _exact_refusal(game)
    if refusal is not None:
        raise ValueError(
            f"the exact best-response oracle cannot take {game.name!r} ({refusal}); "
            "pass learner=pb.DQN(game) or pb.PPO(game) (command line: --oracle dqn or ppo)"
        )
    from pbmarl.evaluation import ExactEvaluator
    from pbmarl.learners.exact import ExactBestResponse

    # sharing the evaluator shares its cache of realisation plans with the oracle
    return ExactBestResponse(game, evaluator=evaluator if isinstance(evaluator, ExactEvaluator) else None)


def _default_evaluator(game: Game) -> Evaluator:
    refusal = _exact_refusal(game)
    if refusal is not None:
        raise ValueError(
            f"the exact evaluator cannot take {game.name!r} ({refusal}); "
            "pass evaluator=pb.RolloutPool(game) to sample payoffs (command line: --evaluator rollout)"
        )
    from pbmarl.evaluation import ExactEvaluator

    return ExactEvaluator(game)
