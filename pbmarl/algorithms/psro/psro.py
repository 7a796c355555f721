"""`PSRO`: Policy-Space Response Oracles, stepped one iteration at a time.

One iteration: every player's oracle answers the current meta-strategy mixture of
the others with a new policy; the policies join the population; the evaluator fills
the new payoff-table cells; the meta-solver solves the empirical game; and, where
the game allows, the meta-strategy's NashConv in the full game is measured exactly.

`SelfPlay` and `FictitiousPlay` are PSRO with the ``last`` and ``uniform`` solvers.
PSRO is a `pbmarl.runs.Run`: `step`, `run`, `history`, `evaluate`, `save` / `pb.load_run`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np

from pbmarl.algorithms.psro.parts import (
    evaluator_spec,
    exact_capable,
    learner_reader,
    learner_spec,
    learner_writer,
    make_evaluator,
    make_oracle,
    make_solver,
    oracle_episodes,
    rebuild_evaluator,
    rebuild_learner,
    rebuild_solver,
    solver_name,
    solver_spec,
)
from pbmarl.algorithms.psro.records import IterationRecord
from pbmarl.algorithms.psro.targets import MetaStrategyTargets, Target, TargetSelector
from pbmarl.config import FLAG, POSITIVE_INT, Config, build_config, check_seed, is_int, is_real
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.games.state import as_rng
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.population import Population
from pbmarl.protocols import (
    BestResponse,
    Evaluator,
    MetaSolverLike,
    Oracle,
    Restorable,
    respond_all,
)
from pbmarl.rollout.results import EvalResult
from pbmarl.runs import Run, RunFolderError, SavedRun, State
from pbmarl.runs.transaction import all_or_nothing, covered

# kept under their old names for the drivers that build their parts the same way (League, NFSP)
_exact_capable, _make_evaluator, _make_oracle = exact_capable, make_evaluator, make_oracle

#: most episodes per payoff-table cell a run may ask for (beyond this a fill would run for days)
MAX_EPISODES = 10_000_000


def _default_initial(game: Game) -> Policy:
    from pbmarl.policies.simple import RandomPolicy

    return RandomPolicy(game)


def _optional(rule: tuple[Any, str]) -> tuple[Any, str]:
    test, accepted = rule
    return (lambda v: v is None or test(v)), f"None or {accepted}"


@dataclass(frozen=True)
class PSROConfig(Config):
    """PSRO's options (its parts, the learner, evaluator and initial policies, are arguments)."""

    solver: str = "nash"
    """The meta-solver's name: ``"nash"``, ``"uniform"``, ``"last"``, ``"prd"``, ``"rm"``, ``"alpharank"``,
    ``"rectified_nash"`` (a `MetaSolver` object passed as ``solver`` sets it to its name)."""
    stop_exploitability: float | None = 1e-6
    """`run()` stops once the measured exploitability falls to or below this (None: never early)."""
    max_iterations: int | None = None
    """`run()` never goes past this iteration (None: no limit)."""
    eval_episodes: int = 1000
    """Episodes per payoff-table cell when the evaluator samples (a `RolloutPool`)."""
    measure: bool | None = None
    """Measure exact NashConv every iteration (None: where the exact engine can take the game)."""
    save_dir: str | None = None
    """If given, the run is saved there after every iteration (one atomic commit)."""

    checks: ClassVar[dict[str, Any]] = {
        "solver": (lambda v: isinstance(v, str) and bool(v), "a meta-solver name"),
        "stop_exploitability": (lambda v: v is None or (is_real(v) and v >= 0), "None or a non-negative number"),
        "max_iterations": (lambda v: v is None or (is_int(v) and v >= 0), "None or a non-negative int"),
        "eval_episodes": (lambda v: POSITIVE_INT[0](v) and v <= MAX_EPISODES, f"an int in [1, {MAX_EPISODES:,}]"),
        "measure": _optional(FLAG),
        "save_dir": (lambda v: v is None or (isinstance(v, str) and bool(v)), "None or a folder path"),
    }


@dataclass(frozen=True)
class SelfPlayConfig(PSROConfig):
    """`SelfPlay`'s options: PSRO's, with the ``last`` solver."""

    solver: str = "last"


@dataclass(frozen=True)
class FictitiousPlayConfig(PSROConfig):
    """`FictitiousPlay`'s options: PSRO's, with the ``uniform`` solver."""

    solver: str = "uniform"


class PSRO(Run):
    """The PSRO outer loop, composed of a game, a meta-solver, a learner and an evaluator.

    Args:
        game: a `Game` or a name for `pb.load_game`.
        solver: a meta-solver name (the ``solver`` option) or a `MetaSolver` object.
        learner: the oracle; default `ExactBestResponse` (games whose tree fits in memory).
        evaluator: fills the payoff table; default `ExactEvaluator`, or a `RolloutPool` (``"rollout"``).
        initial_policies: one policy per player (or one list per player); default uniform random.
        seed: seeds every stochastic part (learners, sampling evaluators) through one Generator.
        config: a `PSROConfig`; keyword options (its fields) replace its values.

    Example:
        >>> psro = PSRO("kuhn_poker", solver="nash", max_iterations=10)
        >>> for record in psro.run(progress=False):  # doctest: +ELLIPSIS
        ...     print(record)
        iter   1 | sizes (2, 2) | NashConv 0.8333 | exploitability 0.4167 | meta-NashConv 0 | ...
        >>> psro.history[["nash_conv", "exploitability"]]  # doctest: +SKIP
    """

    config_class: ClassVar[type[PSROConfig]] = PSROConfig
    config: PSROConfig
    records: list[IterationRecord]

    def __init__(self, game: Game | str, solver: str | MetaSolverLike | None = None,
                 learner: Oracle | str | None = None, evaluator: Evaluator | str | None = None, *,
                 initial_policies: Sequence[Policy | Sequence[Policy]] | None = None, seed: int = 0,
                 config: PSROConfig | None = None, **options: Any) -> None:
        part = None
        if solver is not None and not isinstance(solver, str):
            part = solver
            options["solver"] = solver_name(solver)
        elif solver is not None:
            options["solver"] = solver
        if "save_dir" in options and options["save_dir"] is not None and not isinstance(options["save_dir"], str):
            options["save_dir"] = str(options["save_dir"])  # a Path: the config keeps JSON-ready text
        cfg = build_config(self.config_class, config, options, owner=type(self).__name__)
        self._configure(game, part, learner, evaluator, cfg, check_seed(seed))
        self._initialise(initial_policies)

    def _configure(self, game: Game | str, solver: MetaSolverLike | None, learner: Oracle | str | None,
                   evaluator: Evaluator | str | None, config: PSROConfig, seed: int) -> None:
        """Set every part and the empty population; shared by `__init__` and `from_state`."""
        self.game = load_game(game) if isinstance(game, str) else game
        if not isinstance(self.game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        self.config, self.seed = config, seed
        self.solver: MetaSolverLike = solver if solver is not None else make_solver(config.solver)
        self.evaluator: Evaluator = make_evaluator(self.game, evaluator, seed)
        self.learner: Oracle = make_oracle(self.game, learner, self.evaluator, seed)
        self.measure = exact_capable(self.game) if config.measure is None else bool(config.measure)
        self.rng = as_rng(seed)
        self.population = Population(self.game)
        self.table = PayoffTable(self.population)
        self.records = []
        self.meta_strategy: Any = None
        self.selector: TargetSelector = MetaStrategyTargets(self)
        """What each iteration trains against (`pbmarl.algorithms.psro.targets`): the meta-strategy, or its
        rectified members. A driver that trains against something else sets its own selector here."""
        self._wall = 0.0
        self._env_steps = 0
        self._episodes = 0
        self._measure_evaluator: Any = None

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
        times = {"oracle": time.perf_counter() - start}
        self._finish_iteration(0, times, tuple(ids), ())

    @all_or_nothing
    def step(self) -> IterationRecord:
        """One PSRO iteration; returns its record (also in `records` and `history`).

        All or nothing: if anything raises (a ``KeyboardInterrupt`` included) in any
        phase or in the save, the run is left exactly as before the call.
        """
        if self.config.save_dir is not None:  # a read-only run folder is found out before the work, not after
            from pbmarl.io import ensure_writable_folder

            ensure_writable_folder(self.config.save_dir, what="run folder")
        iteration = len(self.records)
        times: dict[str, float] = {}
        t0 = time.perf_counter()
        targets = list(self.selector.select(self.rng))
        with covered(self.learner):  # this step's snapshot holds the learner's: its steps need none of their own
            answers = self._best_responses(targets)
        ids = []
        for target, answer in zip(targets, answers):
            ids.append(self.population.add(target.player, answer.policy, name=f"br{iteration}-{target.player}{target.label}",
                                           iteration=iteration, origin=self.learner.name,
                                           br_value=answer.value))
        times["oracle"] = time.perf_counter() - t0
        return self._finish_iteration(iteration, times, tuple(ids), tuple(a.value for a in answers))

    # -- all-or-nothing ----------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.runs.transaction`)."""
        learner = self.learner.snapshot() if isinstance(self.learner, Restorable) else None
        return (self.population.snapshot(), self.table.snapshot(), len(self.records), self.meta_strategy,
                self.rng.bit_generator.state, (self._wall, self._env_steps, self._episodes), learner)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        population, table, n_records, meta, rng, counters, learner = cast(
            "tuple[object, object, int, Any, dict[str, Any], tuple[float, int, int], object]", state)
        self.population.restore(population)
        self.table.restore(table)
        del self.records[n_records:]
        self.meta_strategy = meta
        self.rng.bit_generator.state = rng
        self._wall, self._env_steps, self._episodes = counters
        if learner is not None and isinstance(self.learner, Restorable):
            self.learner.restore(learner)

    def _best_responses(self, targets: Sequence[Target]) -> list[BestResponse]:
        """The oracle's answers to `targets`: all at once from a `BatchOracle` (which may train them
        side by side), else one `respond` after another."""
        before = oracle_episodes(self.learner)
        answers = respond_all(self.learner, [(t.player, t.opponents) for t in targets])
        self._env_steps += sum(int(answer.env_steps) for answer in answers)
        self._episodes += oracle_episodes(self.learner) - before
        return answers

    def _finish_iteration(
        self, iteration: int, times: dict[str, float], new_ids: tuple[str, ...], br_values: tuple[float, ...]
    ) -> IterationRecord:
        t0 = time.perf_counter()
        self._fill()
        times["evaluate"] = time.perf_counter() - t0
        gains, gain_se = self._gains(new_ids)
        t0 = time.perf_counter()
        self.meta_strategy = self.solver(self.table)
        times["solve"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        nash_conv = exploitability = None
        if self.measure:
            result = self._measurer().exploitability(self.population, self.meta_strategy)
            nash_conv, exploitability = float(result.nash_conv), float(result.exploitability)
        times["measure"] = time.perf_counter() - t0
        self._wall += sum(times.values())
        meta_nc = getattr(self.meta_strategy, "nash_conv", None)
        record = IterationRecord(
            iteration=iteration,
            sizes=self.population.sizes,
            meta_strategy=tuple(tuple(float(x) for x in self.meta_strategy[p]) for p in range(self.game.num_players)),
            nash_conv=nash_conv,
            exploitability=exploitability,
            meta_nash_conv=None if meta_nc is None else float(meta_nc),
            times=times,
            wall_time=self._wall,
            env_steps=self._env_steps,
            episodes=self._episodes,
            new_ids=new_ids,
            br_values=br_values,
            solver=solver_name(self.solver),
            br_gains=tuple(gains),
            br_gain_stderr=tuple(gain_se),
        )
        self.records.append(record)
        if self.config.save_dir is not None:
            self.save(self.config.save_dir)
        return record

    def _gains(self, new_ids: tuple[str, ...]) -> tuple[list[float], list[float]]:
        """Each new policy's gain over the meta-strategy it answered (before it is re-solved)."""
        if self.meta_strategy is None or not new_ids:
            return [], []
        from pbmarl.algorithms.psro.gains import br_gains

        members = [(m.player, m.index) for m in map(self.population.member, new_ids)]
        return br_gains(self.table.values, self.table.stderr, list(self.meta_strategy), members)

    def _measurer(self) -> Any:
        """The exact evaluator that measures NashConv: the run's own when it has one (its cache
        of realisation plans then serves both), else one kept for measuring."""
        from pbmarl.evaluation import ExactEvaluator

        if isinstance(self.evaluator, ExactEvaluator):
            return self.evaluator
        if self._measure_evaluator is None:
            self._measure_evaluator = ExactEvaluator(self.game)
        return self._measure_evaluator

    def _fill(self) -> None:
        from pbmarl.evaluation import ExactEvaluator

        if isinstance(self.evaluator, ExactEvaluator):
            self.evaluator.fill(self.table)
            return
        # an explicit seed from the run's own (saved) rng keeps a resumed run on the same random stream
        seed = int(self.rng.integers(2**62))
        result = self.evaluator.fill(self.table, self.config.eval_episodes, seed=seed)
        if not isinstance(result, int):
            self._env_steps += int(result.steps)
            self._episodes += int(result.episodes)

    @property
    def converged(self) -> bool:
        """Whether the last measured exploitability is at or below ``config.stop_exploitability``."""
        stop = self.config.stop_exploitability
        if stop is None or not self.records:
            return False
        last = self.records[-1].exploitability
        return last is not None and last <= stop

    @property
    def done(self) -> bool:
        """Converged (``stop_exploitability``) or at ``max_iterations``: where `run()` stops."""
        cfg = self.config
        if cfg.max_iterations is None and (cfg.stop_exploitability is None or not self.measure):
            raise ValueError(f"{type(self).__name__} has no budget: set max_iterations (or stop_exploitability on a "
                             "game whose exploitability is measured), or give run() a number of steps or "
                             "until=pb.Stop(...)")
        return self.converged or (cfg.max_iterations is not None and self.iteration >= cfg.max_iterations)

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` episodes of the meta-strategy profile (one `Mixture` per player, a member drawn
        per episode) with a local `RolloutPool`; returns the mean return per player.

        The run is not changed: the pool is fresh and seeded with `seed`. ``deterministic=True`` is
        refused: a meta-strategy is a mixture, random by definition.
        """
        if deterministic:
            raise ValueError(f"{type(self).__name__} evaluates its meta-strategy, a mixture of policies drawn at "
                             "random per episode; deterministic=True does not apply")
        from pbmarl.rollout import RolloutPool

        with RolloutPool(self.game, backend="local", seed=seed) as pool:
            return pool.evaluate(self.population.mixture(self.meta_strategy), episodes, seed=seed)

    def close(self) -> None:
        """End what the run's parts keep running (a `ParallelOracle`'s actors); idempotent."""
        from pbmarl.algorithms.psro.parallel_oracle import ParallelOracle

        if isinstance(self.learner, ParallelOracle):
            self.learner.close()

    def __repr__(self) -> str:
        last = self.records[-1] if self.records else None
        tail = f", exploitability={last.exploitability:.4g}" if last and last.exploitability is not None else ""
        return (f"{type(self).__name__}({self.game.name!r}, solver={solver_name(self.solver)!r}, "
                f"iteration={self.iteration}, sizes={self.population.sizes}{tail})")

    # -- files -------------------------------------------------------------------
    def state(self) -> State:
        """The population and table (sub-folders), the learner's state, records, counters and rng."""
        table = self.table

        def write_table(folder: Any) -> None:
            folder.mkdir()
            table.save(folder / "table.npz")

        folders: dict[str, Any] = {"population": self.population.save, "table": write_table}
        keeper = learner_writer(self.learner)
        if keeper is not None:
            folders["learner"] = keeper[1]
        data = {"solver": solver_spec(self.solver), "learner": learner_spec(self.learner),
                "evaluator": evaluator_spec(self.evaluator), "sizes": list(self.population.sizes),
                "rng": self.rng.bit_generator.state, "wall_time": self._wall, "env_steps": self._env_steps,
                "episodes": self._episodes, "learner_state": keeper and keeper[0],
                "records": [r.to_json() for r in self.records]}
        return State(data=data, folders=folders, config=self.config.to_dict(), seed=self.seed,
                     game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> Any:
        """Rebuild a run `state` wrote, at its last completed iteration.

        `overrides`: parts (``solver=``, ``learner=``, ``evaluator=``: needed where one cannot be
        rebuilt from its saved spec; a learner that is a run is loaded from its own folder unless
        ``learner=`` replaces it) and options (``max_iterations=``, ``save_dir=``, ...). A run that
        saved itself after every iteration keeps doing so, into the folder it was loaded from.
        """
        parts = {k: overrides.pop(k) for k in ("solver", "learner", "evaluator") if k in overrides}
        options = {**saved.config, **overrides}
        if saved.config.get("save_dir") is not None and "save_dir" not in overrides:
            options["save_dir"] = str(saved.folder)
        if options.get("save_dir") is not None:
            options["save_dir"] = str(options["save_dir"])
        config = build_config(cls.config_class, None, options, owner=cls.__name__)
        seed = check_seed(saved.seed)
        game = saved.game()
        data = saved.data
        try:
            solver = parts.get("solver") or rebuild_solver(data["solver"])
            kind = data["learner_state"]
            learner = parts.get("learner")
            if learner is None and kind == "run":
                learner = learner_reader(kind, saved.subfolder("learner"), None)
            elif learner is None:
                learner = rebuild_learner(game, data["learner"])
            evaluator = parts.get("evaluator") or rebuild_evaluator(game, data["evaluator"])
            sizes = [int(n) for n in data["sizes"]]
            records = [IterationRecord.from_json(r) for r in data["records"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: cannot rebuild the run's parts or records "
                                 f"({type(exc).__name__}: {exc}); pass solver=, learner= or evaluator= to load") \
                from None
        if len(sizes) != game.num_players or not records or list(records[-1].sizes) != sizes:
            raise RunFolderError(f"{str(saved.state_dir)!r}: 'sizes' {sizes} does not match the game's players "
                                 "or the last record")
        run = cls.__new__(cls)
        run._configure(game, solver, learner, evaluator, config, seed)
        run.population = Population.load(saved.subfolder("population"), game, sizes=sizes)
        run.table = PayoffTable.load(saved.subfolder("table") / "table.npz", run.population, sizes=sizes)
        if kind == "folder":
            learner_reader(kind, saved.subfolder("learner"), run.learner)
        run.records = records
        try:
            run.rng.bit_generator.state = data["rng"]
            run._wall, run._env_steps = float(data["wall_time"]), int(data["env_steps"])
            run._episodes = int(data["episodes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: bad rng or counters ({exc})") from None
        run._resolve(saved)
        return run

    def _resolve(self, saved: SavedRun) -> None:
        """Solve the loaded table again, checked against the meta-strategy the run had."""
        last = self.records[-1].meta_strategy
        prime = getattr(self.solver, "prime", None)
        if callable(prime):  # warm-started solvers (n-player Nash) re-solve from the answer the run had
            prime(self.table, last)
        self.meta_strategy = self.solver(self.table)
        for p, dist in enumerate(last):
            if not np.allclose(self.meta_strategy[p], dist, atol=1e-9):
                raise RunFolderError(
                    f"re-solving the saved table in {str(saved.folder)!r} gave a different meta-strategy for player "
                    f"{p}: {np.round(self.meta_strategy[p], 6).tolist()} vs saved {list(dist)}")


class SelfPlay(PSRO):
    """Self-play: each new policy answers the opponent's latest policy (PSRO with the ``last`` solver)."""

    config_class = SelfPlayConfig


class FictitiousPlay(PSRO):
    """Fictitious self-play: each new policy answers the uniform mixture of all earlier ones."""

    config_class = FictitiousPlayConfig
