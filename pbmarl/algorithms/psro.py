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
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.algorithms.records import IterationRecord, history_frame
from pbmarl.games.base import Game, as_rng
from pbmarl.games.registry import load_game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.population import Population


def _default_initial(game: Game) -> Policy:
    from pbmarl.policies.simple import RandomPolicy

    return RandomPolicy(game)


class PSRO:
    """The PSRO outer loop, composed of a game, a meta-solver, a learner and an evaluator.

    Args:
        game: a `Game` or a name for `pb.load_game`.
        solver: a meta-solver name (``"nash"``, ``"uniform"``, ``"last"``, ``"prd"``, ``"rm"``,
            ``"alpharank"``, ``"rectified_nash"``) or a `MetaSolver`.
        learner: the oracle; default `ExactBestResponse` (games whose tree fits in memory).
        evaluator: fills the payoff table; default `ExactEvaluator`, or a `RolloutPool`.
        initial_policies: one policy per player (or one list per player); default uniform random.
        stop_exploitability: `run` stops once exploitability falls to or below this.
        max_iterations: `run` never goes past this iteration (None: no limit).
        eval_episodes: episodes per cell when the evaluator samples (a `RolloutPool`).
        measure: measure exact NashConv each iteration (on by default where the engine applies).
        seed: seeds every stochastic part (learners, sampling evaluators) through one Generator.
        save_dir: if given, the run is saved there after every iteration (atomically).

    Example:
        >>> psro = PSRO("kuhn_poker", solver="nash")
        >>> for record in psro.run(10):
        ...     print(record)
        >>> psro.history[["nash_conv", "exploitability"]]
    """

    #: solver used when none is given (subclasses fix their own)
    default_solver = "nash"

    def __init__(
        self,
        game: Game | str,
        solver: Any = None,
        learner: Any = None,
        evaluator: Any = None,
        *,
        initial_policies: Sequence[Policy | Sequence[Policy]] | None = None,
        stop_exploitability: float | None = None,
        max_iterations: int | None = None,
        eval_episodes: int = 1000,
        measure: bool | None = None,
        seed: int = 0,
        save_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._configure(game, solver, learner, evaluator, stop_exploitability=stop_exploitability,
                        max_iterations=max_iterations, eval_episodes=eval_episodes, measure=measure,
                        seed=seed, save_dir=save_dir)
        self._initialise(initial_policies)

    def _configure(
        self,
        game: Game | str,
        solver: Any,
        learner: Any,
        evaluator: Any,
        *,
        stop_exploitability: float | None,
        max_iterations: int | None,
        eval_episodes: int,
        measure: bool | None,
        seed: int,
        save_dir: str | os.PathLike[str] | None,
    ) -> None:
        """Set every option and the empty population; shared by `__init__` and `load`."""
        self.game = load_game(game) if isinstance(game, str) else game
        self.solver = _make_solver(solver if solver is not None else self.default_solver)
        self.evaluator = evaluator if evaluator is not None else _default_evaluator(self.game)
        self.learner = learner if learner is not None else _default_learner(self.game, self.evaluator)
        if stop_exploitability is not None and not stop_exploitability >= 0:
            raise ValueError(f"stop_exploitability must be a non-negative number, got {stop_exploitability!r}")
        self.stop_exploitability = stop_exploitability
        if max_iterations is not None and (not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0):
            raise ValueError(f"max_iterations must be a non-negative int or None, got {max_iterations!r}")
        self.max_iterations = None if max_iterations is None else int(max_iterations)
        if not isinstance(eval_episodes, (int, np.integer)) or eval_episodes < 1:
            raise ValueError(f"eval_episodes must be a positive int, got {eval_episodes!r}")
        self.eval_episodes = int(eval_episodes)
        self.measure = _exact_capable(self.game) if measure is None else bool(measure)
        self.seed = int(seed)
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
            for policy in entry if isinstance(entry, (list, tuple)) else [entry]:
                ids.append(self.population.add(p, policy, name=f"initial-{p}", iteration=0, origin="initial"))
        seconds = {"oracle": time.perf_counter() - start}
        self._finish_iteration(0, seconds, tuple(ids), ())

    def step(self) -> IterationRecord:
        """One PSRO iteration; returns its record (also appended to `history`)."""
        iteration = len(self.records)
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        opponents = self.population.mixture(self.meta_strategy)
        targets = self._oracle_targets(opponents)
        new_policies: list[tuple[int, Policy, float]] = []
        for player, opps, _label in targets:
            policy, value = self._best_response(player, opps)
            new_policies.append((player, policy, value))
        ids = []
        for (player, policy, value), (_, _, label) in zip(new_policies, targets):
            ids.append(self.population.add(player, policy, name=f"br{iteration}-{player}{label}",
                                           iteration=iteration, origin=getattr(self.learner, "name", "oracle"),
                                           br_value=value))
        seconds["oracle"] = time.perf_counter() - t0
        record = self._finish_iteration(iteration, seconds, tuple(ids), tuple(v for _, _, v in new_policies))
        return record

    def _oracle_targets(self, opponents: list[Any]) -> list[tuple[int, list[Any], str]]:
        """(player, opponent mixtures, label) for every best response to train this iteration.

        Plain PSRO trains one per player against the meta-strategy; rectified Nash trains one
        per supported member against the opponents that member beats or ties.
        """
        rectified = getattr(self.meta_strategy, "rectified", None)
        if not rectified:
            return [(p, opponents, "") for p in range(self.game.num_players)]
        from pbmarl.policies.mixture import Mixture

        targets = []
        for p in range(self.game.num_players):
            for member, weights in sorted(rectified[p].items()):
                opps = list(opponents)
                q = 1 - p
                opps[q] = Mixture(self.population[q], weights)
                targets.append((p, opps, f"@{member}"))
        return targets

    def _best_response(self, player: int, opponents: list[Any]) -> tuple[Policy, float]:
        learner = self.learner
        if hasattr(learner, "best_response_with_value"):
            policy, value = learner.best_response_with_value(player, opponents)
        else:
            policy = learner.best_response(player, opponents)
            value = float(getattr(learner, "last_value", np.nan))
        self._env_steps += int(getattr(learner, "last_env_steps", 0) or 0)
        return policy, float(value)

    def _finish_iteration(
        self, iteration: int, seconds: dict[str, float], new_ids: tuple[str, ...], br_values: tuple[float, ...]
    ) -> IterationRecord:
        t0 = time.perf_counter()
        self._fill()
        seconds["evaluate"] = time.perf_counter() - t0
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
        )
        self.records.append(record)
        if self.save_dir is not None:
            self.save(self.save_dir)
        return record

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
        result = self.evaluator.fill(self.table, episodes=self.eval_episodes, seed=seed)
        self._env_steps += int(getattr(result, "steps", 0) or 0)

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


def _make_solver(solver: Any) -> Any:
    if isinstance(solver, str):
        from pbmarl.solvers import MetaSolver

        return MetaSolver(solver)
    if not callable(solver):
        raise TypeError(f"solver must be a solver name or a MetaSolver, got {solver!r}")
    return solver


def _exact_capable(game: Game) -> bool:
    if not game.enumerable:
        return False
    try:
        game.tree()
    except ValueError:
        return False
    return True


def _default_learner(game: Game, evaluator: Any) -> Any:
    if not _exact_capable(game):
        raise ValueError(
            f"game {game.name!r} is too large for the exact best-response oracle; "
            "pass learner=pb.DQN(game) or pb.PPO(game) (command line: --oracle dqn or ppo)"
        )
    from pbmarl.evaluation import ExactEvaluator
    from pbmarl.learners.exact import ExactBestResponse

    # sharing the evaluator shares its cache of realisation plans with the oracle
    return ExactBestResponse(game, evaluator=evaluator if isinstance(evaluator, ExactEvaluator) else None)


def _default_evaluator(game: Game) -> Any:
    if not _exact_capable(game):
        raise ValueError(
            f"game {game.name!r} is too large for the exact evaluator; "
            "pass evaluator=pb.RolloutPool(game) to sample payoffs (command line: --evaluator rollout)"
        )
    from pbmarl.evaluation import ExactEvaluator

    return ExactEvaluator(game)
