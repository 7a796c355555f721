"""`JPSRO`: joint PSRO with correlated meta-solvers (Marris, Muller, Lanctot, Tuyls and Graepel 2021).

PSRO's meta-strategy is one distribution per player; JPSRO's is a joint distribution
``sigma`` over profiles of population members, a (coarse) correlated equilibrium of the
empirical game (`pbmarl.solvers.correlated`). One iteration:

* **JPSRO(CCE)**: each player p best-responds, in the full game, to the others' joint
  ``sigma(s_-p) = sum_{s_p} sigma(s)``. Its gain ``BR_p - E_sigma[u_p]`` is player p's
  full-game CCE gap.
* **JPSRO(CE)**: for every recommendation ``a`` with ``sigma_p(a) > 0``, player p
  best-responds to the conditional ``sigma(s_-p | s_p = a)``; the CE gap is
  ``sum_a sigma_p(a) (BR_{p,a} - E[u_p | a])``, each response weighted by its
  recommendation's probability.

New best responses that are not already in the population join it; the payoff table is
filled exactly (`ExactEvaluator`, any number of players) and re-solved. The summed gap
is recorded every iteration; it is 0 exactly when the joint is a (C)CE of the full game.

Example:
    >>> jpsro = JPSRO("kuhn_poker(players=3)", solver="mgcce", max_iterations=10)
    >>> for record in jpsro.run(progress=False):  # doctest: +ELLIPSIS
    ...     print(record)
    iter   1 | sizes (2, 2, 2) | CCE gap 0.8333 | marginals' NashConv 0.8333 | ...
    >>> jpsro.history["gap"]  # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, cast

import numpy as np

from pbmarl.algorithms.psro.records import _fmt
from pbmarl.config import Config, build_config, check_seed, is_int, is_real
from pbmarl.evaluation.engine import best_response_values, nash_conv
from pbmarl.evaluation.exact import ExactEvaluator
from pbmarl.evaluation.realization import terminal_reach
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.simple import RandomPolicy
from pbmarl.policies.tabular import TabularPolicy
from pbmarl.population import Population
from pbmarl.rollout.results import EvalResult
from pbmarl.runs import Record, Run, RunFolderError, SavedRun, State, shared_row
from pbmarl.runs.transaction import all_or_nothing
from pbmarl.solvers.metasolver import MetaSolver
from pbmarl.solvers.metastrategy import MetaStrategy

#: solver name -> the equilibrium whose gap JPSRO measures and whose best responses it adds
KINDS = {"mgcce": "cce", "mwcce": "cce", "cce": "cce", "mgce": "ce", "mwce": "ce", "ce": "ce"}


@dataclass(frozen=True)
class JPSROConfig(Config):
    """JPSRO's options (a `MetaSolver` object, when given, is the ``solver`` argument)."""

    solver: str = "mgcce"
    """``"mgcce"`` (default), ``"mgce"``, ``"mwcce"``, ``"mwce"``, ``"cce"`` or ``"ce"``."""
    stop_gap: float | None = 1e-9
    """`run()` stops once the summed gap is at or below this (or no new best response is found)."""
    max_iterations: int | None = None
    """`run()` never goes past this iteration."""
    tie_tol: float = 1e-10
    """A best response is new only if it gains more than this over the joint."""
    save_dir: str | None = None
    """If given, the run is saved there after every iteration (one atomic commit)."""

    checks: ClassVar[dict[str, Any]] = {
        "solver": (lambda v: v in KINDS, f"a correlated meta-solver ({', '.join(KINDS)})"),
        "stop_gap": (lambda v: v is None or (is_real(v) and v >= 0), "None or a non-negative number"),
        "max_iterations": (lambda v: v is None or (is_int(v) and v >= 0), "None or a non-negative int"),
        "tie_tol": (lambda v: is_real(v) and v >= 0, "a non-negative number"),
        "save_dir": (lambda v: v is None or (isinstance(v, str) and bool(v)), "None or a folder path"),
    }


@dataclass(frozen=True)
class JPSRORecord(Record):
    """One JPSRO iteration.

    Attributes:
        iteration: 0 for the initial population, then 1, 2, ...
        sizes: population size per player.
        kind: ``"cce"`` or ``"ce"``.
        gap: the summed full-game (C)CE gap of the joint meta-distribution.
        gaps: its per-player terms.
        nash_conv, exploitability: NashConv of the product of the marginals (a Nash measure;
            in two-player zero-sum games it goes to 0 with the gap).
        meta_gap: the summed (C)CE gap of the joint inside the empirical game (0 up to the solver).
        times: wall seconds per phase (oracle, evaluate, solve, measure); wall_time: cumulative.
        new_ids: ids of the best responses added.
        env_steps, episodes: always 0 (JPSRO is exact).
    """

    iteration: int
    sizes: tuple[int, ...]
    kind: str
    gap: float
    gaps: tuple[float, ...]
    nash_conv: float
    exploitability: float
    meta_gap: float
    times: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    new_ids: tuple[str, ...] = ()
    env_steps: int = 0
    episodes: int = 0

    def as_row(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"gap": self.gap, f"{self.kind}_gap": self.gap, "meta_gap": self.meta_gap}
        extra.update({f"gap_{p}": g for p, g in enumerate(self.gaps)})
        extra.update({f"size_{p}": n for p, n in enumerate(self.sizes)})
        extra["new_ids"] = list(self.new_ids)
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, exploitability=self.exploitability, nash_conv=self.nash_conv,
                          times=self.times, extra=extra)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(sizes=list(self.sizes), gaps=list(self.gaps), new_ids=list(self.new_ids))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JPSRORecord:
        return cls(**{**data, "sizes": tuple(data["sizes"]), "gaps": tuple(data["gaps"]),
                      "new_ids": tuple(data["new_ids"]), "times": dict(data["times"])})

    def __str__(self) -> str:
        return (f"iter {self.iteration:>3} | sizes {self.sizes} | {self.kind.upper()} gap {_fmt(self.gap)} | "
                f"marginals' NashConv {_fmt(self.nash_conv)} | {sum(self.times.values()):.3f}s")


class JPSRO(Run):
    """Joint PSRO; see the module doc.

    Args:
        game: a `Game` (or its name) whose tree fits in memory; any number of players, general-sum.
        solver: a correlated meta-solver's name (the ``solver`` option) or a `MetaSolver` of one.
        seed: the run's seed (JPSRO is exact: it draws nothing at random).
        config: a `JPSROConfig`; keyword options (its fields) replace its values.
    """

    config: JPSROConfig
    records: list[JPSRORecord]

    def __init__(self, game: Game | str, solver: str | MetaSolver | None = None, *, seed: int = 0,
                 config: JPSROConfig | None = None, **options: Any) -> None:
        part = solver if isinstance(solver, MetaSolver) else None
        if solver is not None:
            options["solver"] = solver.name if isinstance(solver, MetaSolver) else solver
        if options.get("save_dir") is not None:
            options["save_dir"] = str(options["save_dir"])
        self._configure(game, part, build_config(JPSROConfig, config, options, owner="JPSRO"), check_seed(seed))
        for p in range(self.game.num_players):
            self.population.add(p, RandomPolicy(self.game), name=f"initial-{p}", iteration=0, origin="initial")
        self._finish(0, {"oracle": 0.0}, ())

    def _configure(self, game: Game | str, solver: MetaSolver | None, config: JPSROConfig, seed: int) -> None:
        """Every part and the empty run; shared by `__init__` and `from_state`."""
        self.game = load_game(game) if isinstance(game, str) else game
        self.config, self.seed = config, seed
        self.solver = solver if solver is not None else MetaSolver(config.solver)
        self.kind = KINDS[self.solver.name]
        self.evaluator = ExactEvaluator(self.game)
        self.tree = self.evaluator.tree
        self.population = Population(self.game)
        self.table = PayoffTable(self.population)
        self.records = []
        self.meta_strategy: MetaStrategy | None = None
        self._pending: list[tuple[int, np.ndarray]] = []
        self._wall = 0.0

    # -- the loop ------------------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.runs.transaction`)."""
        return (self.population.snapshot(), self.table.snapshot(), len(self.records), self.meta_strategy,
                list(self._pending), self._wall)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        population, table, n_records, meta, pending, wall = cast(
            "tuple[object, object, int, MetaStrategy | None, list[tuple[int, np.ndarray]], float]", state)
        self.population.restore(population)
        self.table.restore(table)
        del self.records[n_records:]
        self.meta_strategy, self._pending, self._wall = meta, pending, wall

    @all_or_nothing
    def step(self) -> JPSRORecord:
        """Add the best responses found when the last joint was measured, re-solve, measure.

        All or nothing: an exception (or ``KeyboardInterrupt``) anywhere, the save included,
        leaves the run as it was.
        """
        t0 = time.perf_counter()
        iteration = len(self.records)
        ids = tuple(self.population.add(p, self._policy(p, table), name=f"br{iteration}-{p}", iteration=iteration,
                                        origin="jpsro") for p, table in self._pending)
        return self._finish(iteration, {"oracle": time.perf_counter() - t0}, ids)

    def _finish(self, iteration: int, times: dict[str, float], ids: tuple[str, ...]) -> JPSRORecord:
        t0 = time.perf_counter()
        self.evaluator.fill(self.table)
        t1 = time.perf_counter()
        sigma = self.solver(self.table)
        t2 = time.perf_counter()
        gaps, pending = self._gaps(sigma)
        reach = [terminal_reach(self.evaluator.plans(p, self.population[p]), self.tree, p)
                 for p in range(self.game.num_players)]
        br_values, values = nash_conv(self.tree, [sigma[p] @ r for p, r in enumerate(reach)])
        t3 = time.perf_counter()
        times.update(evaluate=t1 - t0, solve=t2 - t1, measure=t3 - t2)
        self._wall += sum(times.values())
        self.meta_strategy, self._pending = sigma, pending
        nc = float((br_values - values).sum())
        meta = sum(sigma.info.get(f"{self.kind}_gaps", (np.nan,)))
        record = JPSRORecord(iteration=iteration, sizes=self.population.sizes, kind=self.kind,
                             gap=float(gaps.sum()), gaps=tuple(float(g) for g in gaps), nash_conv=nc,
                             exploitability=nc / self.game.num_players, meta_gap=float(meta), times=times,
                             wall_time=self._wall, new_ids=ids)
        self.records.append(record)
        if self.config.save_dir is not None:
            self.save(self.config.save_dir)
        return record

    def _gaps(self, sigma: MetaStrategy) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
        """Per-player full-game gaps of the joint, and the new best responses ``(player, table)``."""
        P = self.game.num_players
        joint = np.asarray(sigma.joint)
        reach = [terminal_reach(self.evaluator.plans(p, self.population[p]), self.tree, p) for p in range(P)]
        values = np.tensordot(joint, self.table.values, axes=P)  # [P]
        gaps = np.zeros(P)
        pending: list[tuple[int, np.ndarray]] = []
        tie_tol = self.config.tie_tol
        for p in range(P):
            weights = np.moveaxis(joint, p, 0)  # [n_p, others...]
            if self.kind == "cce":
                groups = [weights.sum(axis=0)]
            else:
                groups = [weights[a] for a in range(len(weights)) if weights[a].sum() > tie_tol]
            others = [reach[q] for q in range(P) if q != p]
            total = 0.0
            for w in groups:
                value, br = best_response_values(self.tree, p, self.tree.chance_reach * _correlated_reach(w, others))
                total += value
                if value - self._member_value(p, w, others) > tie_tol and not self._known(p, br, pending):
                    pending.append((p, br))
            gaps[p] = max(0.0, total - float(values[p]))
        return gaps, pending

    def _member_value(self, p: int, w: np.ndarray, others: list[np.ndarray]) -> float:
        """The best value any current member of p earns against the (unnormalised) others' weights `w`."""
        opp = self.tree.chance_reach * _correlated_reach(w, others) * self.tree.returns[:, p]
        own = terminal_reach(self.evaluator.plans(p, self.population[p]), self.tree, p)
        return float((own @ opp).max())

    def _known(self, player: int, table: np.ndarray, pending: list[tuple[int, np.ndarray]]) -> bool:
        infos = self.tree.infosets[player]
        tables = [t for q, t in pending if q == player]
        for policy in self.population[player]:
            if isinstance(policy, TabularPolicy):
                tables.append(policy.table[[policy.index[k] for k in infos.keys]])
        return any(np.array_equal(t, table) for t in tables)

    def _policy(self, player: int, table: np.ndarray) -> TabularPolicy:
        policy = TabularPolicy(self.game)
        policy.table[[policy.index[k] for k in self.tree.infosets[player].keys]] = table
        return policy

    @property
    def converged(self) -> bool:
        """Whether the last gap is at or below ``config.stop_gap``, or no new best response was found."""
        if not self.records:
            return False
        stop = self.config.stop_gap
        return not self._pending or (stop is not None and self.records[-1].gap <= stop)

    @property
    def done(self) -> bool:
        """Converged or at ``max_iterations``: where `run()` stops."""
        cfg = self._budgeted(self.config, "stop_gap")
        return self.converged or (cfg.max_iterations is not None and self.iteration >= cfg.max_iterations)

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` episodes of the joint's marginals (one `Mixture` per player, drawn independently:
        the product of the marginals, not the correlated joint) with a local `RolloutPool`.

        ``deterministic=True`` is refused: the marginals are mixtures, random by definition.
        """
        if deterministic:
            raise ValueError("JPSRO evaluates mixtures of policies drawn at random per episode; "
                             "deterministic=True does not apply")
        from pbmarl.rollout import RolloutPool

        with RolloutPool(self.game, backend="local", seed=seed) as pool:
            return pool.evaluate(self.population.mixture(self.meta_strategy), episodes, seed=seed)

    def __repr__(self) -> str:
        gap = f", gap={self.records[-1].gap:.4g}" if self.records else ""
        return f"JPSRO({self.game.name!r}, solver={self.solver.name!r}, iteration={self.iteration}{gap})"

    # -- files ------------------------------------------------------------------------
    def state(self) -> State:
        """The population and table (sub-folders), the pending best responses (arrays), records."""
        table = self.table

        def write_table(folder: Any) -> None:
            folder.mkdir()
            table.save(folder / "table.npz")

        arrays = {"pending_players": np.array([p for p, _ in self._pending], dtype=np.int64),
                  **{f"pending_{i}": t for i, (_, t) in enumerate(self._pending)}}
        data = {"solver": {"name": self.solver.name, "options": dict(self.solver.options)},
                "sizes": list(self.population.sizes), "wall_time": self._wall,
                "records": [r.to_json() for r in self.records],
                "marginals": [list(map(float, m)) for m in (self.meta_strategy or ())]}
        return State(data=data, arrays=arrays, folders={"population": self.population.save, "table": write_table},
                     config=self.config.to_dict(), seed=self.seed, game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> JPSRO:
        """Rebuild a run `state` wrote; `overrides`: options (``max_iterations=``, ``save_dir=``, ...).

        The joint is solved again from the table and checked against the saved marginals (the
        maximum-Gini solvers' answer is unique).
        """
        options = {**saved.config, **overrides}
        if saved.config.get("save_dir") is not None and "save_dir" not in overrides:
            options["save_dir"] = str(saved.folder)
        if options.get("save_dir") is not None:
            options["save_dir"] = str(options["save_dir"])
        data = saved.data
        run = cls.__new__(cls)
        try:
            solver = MetaSolver(data["solver"]["name"], **data["solver"]["options"])
            run._configure(saved.game(), solver, build_config(JPSROConfig, None, options, owner="JPSRO"),
                           check_seed(saved.seed))
            sizes = [int(n) for n in data["sizes"]]
            run.records = [JPSRORecord.from_json(r) for r in data["records"]]
            run._wall = float(data["wall_time"])
            marginals = [list(m) for m in data["marginals"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: malformed JPSRO state ({type(exc).__name__}: {exc})") \
                from None
        P = run.game.num_players
        run.population = Population.load(saved.subfolder("population"), run.game, sizes=sizes)
        run.table = PayoffTable.load(saved.subfolder("table") / "table.npz", run.population, sizes=sizes)
        players = saved.arrays({"pending_players": (None, "iu")})["pending_players"]
        if players.ndim != 1 or not np.all((players >= 0) & (players < P)):
            raise RunFolderError(f"{str(saved.state_dir)!r}: 'pending_players' must list player indices 0..{P - 1}")
        shapes = {f"pending_{i}": ((run.tree.infosets[p].size, run.game.num_actions), "f") for i, p in enumerate(players)}
        tables = saved.arrays(shapes) if shapes else {}
        run._pending = [(int(p), tables[f"pending_{i}"]) for i, p in enumerate(players)]
        run.meta_strategy = run.solver(run.table)
        for p, dist in enumerate(marginals):
            if not np.allclose(run.meta_strategy[p], dist, atol=1e-6):
                raise RunFolderError(f"re-solving the saved table in {str(saved.folder)!r} gave a different "
                                     f"meta-strategy for player {p}: {np.round(run.meta_strategy[p], 6).tolist()} "
                                     f"vs saved {dist}")
        return run


def _correlated_reach(weights: np.ndarray, reaches: list[np.ndarray]) -> np.ndarray:
    """``sum_s w(s) prod_j reaches[j][s_j]`` at each terminal: ``[Z]`` from weights over the others' profiles."""
    out = np.tensordot(weights, reaches[-1], axes=([weights.ndim - 1], [0]))  # [n_0, ..., n_{k-2}, Z]
    for j in range(len(reaches) - 2, -1, -1):
        out = np.einsum("...iz,iz->...z", out, reaches[j])
    return np.asarray(out)
