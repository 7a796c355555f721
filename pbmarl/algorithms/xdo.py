"""`XDO`: the extensive-form double oracle (McAleer, Lanier, Baldi and Fox 2021).

PSRO mixes whole policies, so it needs a population member for every combination of
choices at different information states. XDO mixes at every information state: the
**restricted game** is the full game with, at each information state, only the actions
that some population best response plays there. One iteration:

1. each player's exact best response to the current restricted-game solution joins
   the population (a pure policy: one action per information state);
2. the restricted game is solved to exploitability ``tau`` (its own NashConv / 2) with
   CFR+ (`pbmarl.evaluation.cfr.CFRPlus`, checked every `check_every` iterations), or
   exactly with the sequence-form LP (`pbmarl.evaluation.sequence_form.solve_tree`), or
   with magnetic mirror descent (``solver="mmd"``, below);
3. the solution's exploitability in the full game is measured exactly; when it is
   below ``tau``, ``tau`` is halved (the authors' schedule, starting from 16).

The population starts with each player's best response to the uniform policy, as in
the authors' code. Two-player zero-sum games only.

**MMD as the restricted-game solver** (``solver="mmd"``): the restricted game is an extensive-form
game (the full tree with fewer legal actions), so tabular MMD (`pbmarl.evaluation.mmd.DilatedMMD`,
the update `pb.MMD` runs and that matches OpenSpiel's to 1e-9) runs on it directly through the exact
engine, not on a normal-form table. Its **last iterate** is the solution (no average is kept). With a
fixed magnet MMD's last iterate converges to a quantal-response equilibrium of temperature
``mmd_alpha``, which is not a Nash equilibrium, so the magnet is moved to the current iterate every
``mmd_magnet_every`` iterations (the moving magnet of Sokota et al. 2023, a proximal-point scheme whose
last iterate converges to a Nash equilibrium of the restricted game). The step size is OpenSpiel's
automatic ``alpha / max|M|^2``. The defaults (alpha 0.05, magnet every 100) reach restricted
exploitability 1e-6 within about 1000 iterations on Kuhn's restricted games; on Leduc they are slower
than CFR+ (restricted exploitability 0.2 after 3000 iterations), so ``"cfr+"`` stays the default.

**With an RL oracle** (``learner=``, any `Oracle`: `DQN`, `PPO`, ...) step 1 trains each
player's best response against the current restricted-game solution (a `TabularPolicy`)
instead of computing it exactly; the trained policy is read at every information state of
the player and its most probable legal action there joins the population (a pure policy,
as XDO adds). This is XDO with a neural oracle and an exact restricted-game solver; the
authors' NXDO also approximates the restricted game (with NFSP). The environment steps the
oracle took are recorded (`XDORecord.env_steps`); exploitability stays exact.

Example:
    >>> xdo = XDO("leduc_poker")          # iteration 0: the best responses to the uniform policy
    >>> print(xdo.records[0])  # doctest: +ELLIPSIS
    iter   0 | sizes (1, 1) | exploitability 3.417 | restricted 0 | tau 16 | inner 10 | ...
    >>> for record in xdo.run(2, progress=False):  # doctest: +ELLIPSIS
    ...     print(record)
    iter   1 | sizes (2, 2) | ...
    iter   2 | sizes (3, 3) | ...
    >>> xdo.history[["exploitability", "tau", "inner_iterations"]]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np

from pbmarl.algorithms.psro.parts import learner_reader, learner_spec, learner_writer, oracle_episodes, rebuild_learner
from pbmarl.algorithms.psro.records import _fmt
from pbmarl.config import POSITIVE, POSITIVE_INT, Config, build_config, check_seed, is_int, is_real
from pbmarl.evaluation.cfr import CFRPlus
from pbmarl.evaluation.engine import best_response_values, nash_conv, opponent_reach
from pbmarl.evaluation.mmd import DilatedMMD
from pbmarl.evaluation.realization import behaviour_from_plan, policy_tables, realization_plans
from pbmarl.evaluation.sequence_form import check_zero_sum_tree, solve_tree
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.games.tree import GameTree
from pbmarl.policies.tabular import TabularPolicy
from pbmarl.population import Population
from pbmarl.protocols import Oracle, Restorable, respond_all
from pbmarl.rollout.results import EvalResult
from pbmarl.runs import Record, Run, RunFolderError, SavedRun, State, shared_row
from pbmarl.runs.transaction import all_or_nothing, covered

SOLVERS = ("cfr+", "lp", "mmd")


def restricted_tree(tree: GameTree, masks: tuple[np.ndarray, ...]) -> GameTree:
    """`tree` with each player's legal actions narrowed to ``masks[p]`` ``[S_p, A]`` (and the game's)."""
    infosets = tuple(dataclasses.replace(i, legal=i.legal & m) for i, m in zip(tree.infosets, masks))
    return dataclasses.replace(tree, infosets=infosets)


@dataclass(frozen=True)
class XDOConfig(Config):
    """XDO's options (an RL oracle, when wanted, is the ``learner`` argument)."""

    solver: str = "cfr+"
    """``"cfr+"`` or ``"mmd"`` (to tolerance `tau`), or ``"lp"`` (exact), for the restricted game."""
    tau: float = 16.0
    """The first restricted-game tolerance (exploitability); halved as in the paper."""
    check_every: int = 10
    """CFR+ (or MMD) iterations between checks of the restricted game's exploitability."""
    max_inner: int = 100_000
    """CFR+ (or MMD) iterations allowed per restricted game before giving up on `tau`."""
    mmd_alpha: float = 0.05
    """``solver="mmd"``: the temperature (weight of the magnet term, OpenSpiel's ``alpha``)."""
    mmd_magnet_every: int = 100
    """``solver="mmd"``: MMD iterations between moves of the magnet to the current iterate."""
    stop_exploitability: float | None = None
    """`run()` stops once the full-game exploitability is at or below this."""
    max_iterations: int | None = None
    """`run()` never goes past this iteration."""
    save_dir: str | None = None
    """If given, the run is saved there after every iteration (one atomic commit)."""

    checks: ClassVar[dict[str, Any]] = {
        "solver": (lambda v: v in SOLVERS, f"one of {SOLVERS}"),
        "tau": POSITIVE,
        "check_every": POSITIVE_INT,
        "max_inner": POSITIVE_INT,
        "mmd_alpha": POSITIVE,
        "mmd_magnet_every": POSITIVE_INT,
        "stop_exploitability": (lambda v: v is None or (is_real(v) and v >= 0), "None or a non-negative number"),
        "max_iterations": (lambda v: v is None or (is_int(v) and v >= 0), "None or a non-negative int"),
        "save_dir": (lambda v: v is None or (isinstance(v, str) and bool(v)), "None or a folder path"),
    }


@dataclass(frozen=True)
class XDORecord(Record):
    """One XDO iteration.

    Attributes:
        iteration: 0 for the initial population (best responses to uniform), then 1, 2, ...
        sizes: best responses per player.
        nash_conv, exploitability: of the restricted-game solution in the full game (exact).
        restricted_exploitability: of the solution inside the restricted game (<= `tau` unless
            `max_inner` ran out; 0 up to rounding with the LP).
        tau: the tolerance this iteration's restricted game was solved to.
        inner_iterations: CFR+ (or MMD) iterations spent on this restricted game (0 with the LP).
        total_inner_iterations: inner iterations of the run so far.
        restricted_actions: (information state, action) pairs in the restricted game.
        times: wall seconds per phase (oracle, solve, measure); wall_time: cumulative.
        new_ids: ids of the best responses added.
        solver: ``"cfr+"``, ``"lp"`` or ``"mmd"``.
        env_steps: environment steps the RL oracle has taken so far (0 with exact best responses).
        episodes: episodes the RL oracle has played so far (0 with exact best responses).
    """

    iteration: int
    sizes: tuple[int, ...]
    nash_conv: float
    exploitability: float
    restricted_exploitability: float
    tau: float
    inner_iterations: int
    total_inner_iterations: int
    restricted_actions: int
    times: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    new_ids: tuple[str, ...] = ()
    solver: str = "cfr+"
    env_steps: int = 0
    episodes: int = 0

    def as_row(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"restricted_exploitability": self.restricted_exploitability, "tau": self.tau,
                                 "inner_iterations": self.inner_iterations,
                                 "total_inner_iterations": self.total_inner_iterations,
                                 "restricted_actions": self.restricted_actions}
        extra.update({f"size_{p}": n for p, n in enumerate(self.sizes)})
        extra.update(solver=self.solver, new_ids=list(self.new_ids))
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, exploitability=self.exploitability, nash_conv=self.nash_conv,
                          times=self.times, extra=extra)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["sizes"], data["new_ids"] = list(self.sizes), list(self.new_ids)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> XDORecord:
        return cls(**{**data, "sizes": tuple(data["sizes"]), "new_ids": tuple(data["new_ids"]),
                      "times": dict(data["times"])})

    def __str__(self) -> str:
        return (f"iter {self.iteration:>3} | sizes {self.sizes} | exploitability {_fmt(self.exploitability)} | "
                f"restricted {_fmt(self.restricted_exploitability, 3)} | tau {self.tau:.3g} | "
                f"inner {self.inner_iterations} | "
                + (f"{self.env_steps:,} env steps | " if self.env_steps else "")
                + f"{sum(self.times.values()):.3f}s")


class XDO(Run):
    """The extensive-form double oracle; see the module doc.

    Args:
        game: a two-player zero-sum `Game` (or its name) whose tree fits in memory.
        learner: an RL `Oracle` that trains each best response (see the module doc); ``None``
            (the default) computes them exactly.
        seed: the run's seed (XDO itself draws nothing at random; an RL learner has its own).
        config: an `XDOConfig`; keyword options (its fields) replace its values.

    Building the run makes iteration 0: each player's best response to the uniform policy.
    """

    config: XDOConfig
    records: list[XDORecord]

    def __init__(self, game: Game | str, learner: Oracle | None = None, *, seed: int = 0,
                 config: XDOConfig | None = None, **options: Any) -> None:
        if options.get("save_dir") is not None:
            options["save_dir"] = str(options["save_dir"])
        self._configure(game, learner, build_config(XDOConfig, config, options, owner="XDO"), check_seed(seed))
        self._advance()

    def _configure(self, game: Game | str, learner: Oracle | None, config: XDOConfig, seed: int) -> None:
        self.game = load_game(game) if isinstance(game, str) else game
        if learner is not None and not isinstance(learner, Oracle):
            raise TypeError(f"XDO's learner must be an Oracle with respond(player, opponents) (pb.DQN, pb.PPO, ...) "
                            f"or None for exact best responses, got {type(learner).__name__}: {learner!r}")
        self.tree = self.game.tree()
        check_zero_sum_tree(self.game, self.tree, who="XDO")
        self.config, self.seed, self.learner = config, seed, learner
        self.tau = float(config.tau)
        self.population = Population(self.game)
        self.records = []
        self.plans: tuple[np.ndarray, ...] = ()
        self._wall = 0.0
        self._inner_total = 0
        self._env_steps = 0
        self._episodes = 0

    # -- the loop ------------------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.runs.transaction`)."""
        learner = self.learner.snapshot() if isinstance(self.learner, Restorable) else None
        return (self.population.snapshot(), self.plans, self.tau, len(self.records), self._wall, self._inner_total,
                (self._env_steps, self._episodes), learner)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        population, plans, tau, n_records, wall, inner, counts, learner = cast(
            "tuple[object, tuple[np.ndarray, ...], float, int, float, int, tuple[int, int], object]", state)
        self.population.restore(population)
        self.plans, self.tau, self._wall, self._inner_total = plans, tau, wall, inner
        self._env_steps, self._episodes = counts
        del self.records[n_records:]
        if learner is not None and isinstance(self.learner, Restorable):
            self.learner.restore(learner)

    @all_or_nothing
    def step(self) -> XDORecord:
        """One XDO iteration; returns its record.

        All or nothing: an exception (or ``KeyboardInterrupt``) anywhere, the save included,
        leaves the run as it was.
        """
        return self._advance()

    def _advance(self) -> XDORecord:
        start = time.perf_counter()
        uniform = not self.plans
        plans = self.plans or tuple(realization_plans(self.tree.infosets[p].legal / np.maximum(
            self.tree.infosets[p].legal.sum(axis=1, keepdims=True), 1), self.tree.infosets[p], self.tree.num_actions)
            for p in range(2))
        with covered(self.learner):  # this step's snapshot holds the learner's: its steps need none of their own
            brs = self._best_responses(plans)
        masks = tuple(self._masks(p) | (brs[p] > 0) for p in range(2))
        oracle = time.perf_counter()
        new_plans, inner, restricted = self._solve(restricted_tree(self.tree, masks))
        solved = time.perf_counter()
        br_values, values = nash_conv(self.tree, [x[self.tree.terminal_seq[p]] for p, x in enumerate(new_plans)])
        nc = float((br_values - values).sum())
        measured = time.perf_counter()
        iteration = len(self.records)
        origin = "xdo" if self.learner is None else self.learner.name
        ids = tuple(self.population.add(p, self._policy(p, brs[p]), name=f"{'initial' if uniform else 'br'}{iteration}-{p}",
                                        iteration=iteration, origin=origin) for p in range(2))
        self.plans = new_plans
        tau_used = self.tau
        if nc / 2 < self.tau:
            self.tau /= 2
        self._inner_total += inner
        times = {"oracle": oracle - start, "solve": solved - oracle, "measure": measured - solved}
        self._wall += sum(times.values())
        record = XDORecord(iteration=iteration, sizes=self.population.sizes, nash_conv=nc, exploitability=nc / 2,
                           restricted_exploitability=restricted, tau=tau_used, inner_iterations=inner,
                           total_inner_iterations=self._inner_total,
                           restricted_actions=int(sum(m.sum() for m in masks)), times=times,
                           wall_time=self._wall, new_ids=ids, solver=self.config.solver, env_steps=self._env_steps,
                           episodes=self._episodes)
        self.records.append(record)
        if self.config.save_dir is not None:
            self.save(self.config.save_dir)
        return record

    def _best_responses(self, plans: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        """Each player's pure best response ``[S_p, A]`` (one-hot rows) to the other's plan in `plans`."""
        if self.learner is None:
            reach = [x[self.tree.terminal_seq[p]] for p, x in enumerate(plans)]
            return [best_response_values(self.tree, p, opponent_reach(self.tree, p, reach))[1] for p in range(2)]
        solution = self._solution(plans)
        requests = [(p, [None, solution[1]] if p == 0 else [solution[0], None]) for p in range(2)]
        before = oracle_episodes(self.learner)
        answers = respond_all(self.learner, requests)  # side by side from a `ParallelOracle`
        self._env_steps += sum(int(answer.env_steps) for answer in answers)
        self._episodes += oracle_episodes(self.learner) - before
        return [pure_table(policy_tables(answer.policy, self.tree, p), self.tree.infosets[p].legal)
                for p, answer in enumerate(answers)]

    def _masks(self, player: int) -> np.ndarray:
        """Actions some population member of `player` plays at each of its information states."""
        infos = self.tree.infosets[player]
        mask = np.zeros(infos.legal.shape, bool)
        for policy in self.population[player]:
            rows = [policy.index[k] for k in infos.keys]  # type: ignore[attr-defined]
            mask |= policy.table[rows] > 0  # type: ignore[attr-defined]
        return mask

    def _policy(self, player: int, table: np.ndarray) -> TabularPolicy:
        policy = TabularPolicy(self.game)
        policy.table[[policy.index[k] for k in self.tree.infosets[player].keys]] = table
        return policy

    def _solve(self, tree: GameTree) -> tuple[tuple[np.ndarray, ...], int, float]:
        """Plans of a solution of the restricted `tree`, the CFR+ (MMD) iterations spent, its exploitability."""
        if self.config.solver == "lp":
            exact, _, _ = solve_tree(tree)
            return exact, 0, _restricted_exploitability(tree, exact)
        if self.config.solver == "mmd":
            return self._solve_mmd(tree)
        cfr = CFRPlus(tree)
        while True:
            cfr.run(self.config.check_every)
            plans = tuple(realization_plans(t, tree.infosets[p], tree.num_actions)
                          for p, t in enumerate(cfr.average_tables()))
            expl = _restricted_exploitability(tree, plans)
            if expl <= self.tau or cfr.iterations >= self.config.max_inner:
                return plans, cfr.iterations, expl

    def _solve_mmd(self, tree: GameTree) -> tuple[tuple[np.ndarray, ...], int, float]:
        """MMD's last iterate on the restricted `tree`, the magnet moved every ``mmd_magnet_every`` iterations,
        checked every ``check_every``, until its exploitability is at most `tau` (or ``max_inner`` iterations)."""
        cfg = self.config
        mmd = DilatedMMD(tree, alpha=cfg.mmd_alpha)
        while True:
            for _ in range(cfg.check_every):
                mmd.step()
                if mmd.iterations % cfg.mmd_magnet_every == 0:
                    # the iterate as the new magnet, kept positive: a probability that underflowed to 0 would
                    # make the KL anchor infinite
                    mmd.set_magnet([np.where(i.legal, np.maximum(t, 1e-30), 0.0)
                                    for t, i in zip(mmd.tables(), tree.infosets)])
            plans = tuple(mmd.plans)
            expl = _restricted_exploitability(tree, plans)
            if expl <= self.tau or mmd.iterations >= cfg.max_inner:
                return plans, mmd.iterations, expl

    @property
    def converged(self) -> bool:
        """Whether the last exploitability is at or below ``config.stop_exploitability``."""
        stop = self.config.stop_exploitability
        return stop is not None and bool(self.records) and self.records[-1].exploitability <= stop

    @property
    def done(self) -> bool:
        """Converged (``stop_exploitability``) or at ``max_iterations``: where `run()` stops."""
        cfg = self._budgeted(self.config, "stop_exploitability")
        return self.converged or (cfg.max_iterations is not None and self.iteration >= cfg.max_iterations)

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` episodes of the restricted-game solution (`policies`) with a local `RolloutPool`.

        ``deterministic=True`` plays each information state's most probable action instead.
        """
        from pbmarl.rollout import RolloutPool

        policies = self.policies
        if deterministic:
            policies = tuple(self._policy(p, pure_table(policy_tables(pi, self.tree, p), self.tree.infosets[p].legal))
                             for p, pi in enumerate(policies))
        with RolloutPool(self.game, backend="local", seed=seed) as pool:
            return pool.evaluate(list(policies), episodes, seed=seed)

    # -- views ------------------------------------------------------------------------
    @property
    def policies(self) -> tuple[TabularPolicy, ...]:
        """The current restricted-game solution as one `TabularPolicy` per player."""
        return self._solution(self.plans)

    def _solution(self, plans: tuple[np.ndarray, ...]) -> tuple[TabularPolicy, ...]:
        """Realisation plans as one behaviour `TabularPolicy` per player."""
        return tuple(self._policy(p, behaviour_from_plan(x, self.tree.infosets[p], self.tree.num_actions))
                     for p, x in enumerate(plans))

    def __repr__(self) -> str:
        tail = f", exploitability={self.records[-1].exploitability:.4g}" if self.records else ""
        return (f"XDO({self.game.name!r}, solver={self.config.solver!r}, iteration={self.iteration}, "
                f"tau={self.tau:.3g}{tail})")

    # -- files ------------------------------------------------------------------------
    def state(self) -> State:
        """The population (a sub-folder), the solution's plans, tau, counters, records, the learner's state."""
        folders: dict[str, Any] = {"population": self.population.save}
        keeper = learner_writer(self.learner)
        if keeper is not None:
            folders["learner"] = keeper[1]
        data = {"learner": None if self.learner is None else learner_spec(self.learner),
                "learner_state": keeper and keeper[0], "tau": self.tau, "sizes": list(self.population.sizes),
                "wall_time": self._wall, "inner_total": self._inner_total, "env_steps": self._env_steps,
                "episodes": self._episodes,
                "records": [r.to_json() for r in self.records]}
        arrays = {f"plan_{p}": x for p, x in enumerate(self.plans)}
        return State(data=data, arrays=arrays, folders=folders, config=self.config.to_dict(), seed=self.seed,
                     game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> XDO:
        """Rebuild a run `state` wrote; `overrides`: ``learner=`` (where it cannot be rebuilt from its
        spec) and options (``max_iterations=``, ``save_dir=``, ...)."""
        learner = overrides.pop("learner", None)  # replaces the saved one (a run learner's state is not read)
        options = {**saved.config, **overrides}
        if saved.config.get("save_dir") is not None and "save_dir" not in overrides:
            options["save_dir"] = str(saved.folder)
        if options.get("save_dir") is not None:
            options["save_dir"] = str(options["save_dir"])
        game, data = saved.game(), saved.data
        run = cls.__new__(cls)
        try:
            kind = data["learner_state"]
            if learner is None and kind == "run":
                learner = learner_reader(kind, saved.subfolder("learner"), None)
            elif learner is None and data["learner"] is not None:
                learner = rebuild_learner(game, data["learner"])
            run._configure(game, learner, build_config(XDOConfig, None, options, owner="XDO"), check_seed(saved.seed))
            sizes = [int(n) for n in data["sizes"]]
            run.records = [XDORecord.from_json(r) for r in data["records"]]
            run.tau, run._wall = float(data["tau"]), float(data["wall_time"])
            run._inner_total, run._env_steps = int(data["inner_total"]), int(data["env_steps"])
            run._episodes = int(data["episodes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: malformed XDO state ({type(exc).__name__}: {exc})") \
                from None
        if kind == "folder":
            learner_reader(kind, saved.subfolder("learner"), run.learner)
        run.population = Population.load(saved.subfolder("population"), game, sizes=sizes)
        arrays = saved.arrays({f"plan_{p}": ((run.tree.num_sequences(p),), "f") for p in range(2)})
        run.plans = tuple(arrays[f"plan_{p}"] for p in range(2))
        return run


def pure_table(table: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """One-hot rows ``[S, A]``: the most probable legal action of behaviour `table` at each information
    state (the lowest such action on ties); all zeros where no action is legal."""
    scores = np.where(legal, np.asarray(table, dtype=float), -np.inf)
    pure = np.zeros(scores.shape)
    rows = np.flatnonzero(legal.any(axis=1))
    pure[rows, scores[rows].argmax(axis=1)] = 1.0
    return pure


def _restricted_exploitability(tree: GameTree, plans: tuple[np.ndarray, ...]) -> float:
    """NashConv / 2 of `plans` inside the (restricted) `tree`."""
    br_values, values = nash_conv(tree, [x[tree.terminal_seq[p]] for p, x in enumerate(plans)])
    return float((br_values - values).sum()) / 2
