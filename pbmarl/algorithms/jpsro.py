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
    >>> jpsro = JPSRO("kuhn_poker(players=3)", solver="mgcce")
    >>> for record in jpsro.run(10):  # doctest: +ELLIPSIS
    ...     print(record)
    iter   1 | sizes (2, 2, 2) | CCE gap 0.8333 | marginals' NashConv 0.8333 | ...
    >>> jpsro.history["gap"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pbmarl.algorithms.jpsro_io import load_jpsro, save_jpsro
from pbmarl.algorithms.records import _fmt
from pbmarl.algorithms.stepping import run_steps
from pbmarl.algorithms.transaction import all_or_nothing
from pbmarl.evaluation.engine import best_response_values, nash_conv
from pbmarl.evaluation.exact import ExactEvaluator
from pbmarl.evaluation.realization import terminal_reach
from pbmarl.games.base import Game
from pbmarl.games.registry import load_game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.simple import RandomPolicy
from pbmarl.policies.tabular import TabularPolicy
from pbmarl.population import Population
from pbmarl.solvers.metasolver import MetaSolver
from pbmarl.solvers.metastrategy import MetaStrategy

#: solver name -> the equilibrium whose gap JPSRO measures and whose best responses it adds
KINDS = {"mgcce": "cce", "mwcce": "cce", "cce": "cce", "mgce": "ce", "mwce": "ce", "ce": "ce"}


@dataclass(frozen=True)
class JPSRORecord:
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
        seconds: wall seconds per phase (oracle, evaluate, solve, measure); wall_time: cumulative.
        new_ids: ids of the best responses added.
    """

    iteration: int
    sizes: tuple[int, ...]
    kind: str
    gap: float
    gaps: tuple[float, ...]
    nash_conv: float
    exploitability: float
    meta_gap: float
    seconds: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0
    new_ids: tuple[str, ...] = ()

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"iteration": self.iteration, "gap": self.gap, f"{self.kind}_gap": self.gap,
                               "nash_conv": self.nash_conv, "exploitability": self.exploitability,
                               "meta_gap": self.meta_gap, "wall_time": self.wall_time}
        row.update({f"gap_{p}": g for p, g in enumerate(self.gaps)})
        row.update({f"size_{p}": n for p, n in enumerate(self.sizes)})
        row.update({f"seconds_{k}": v for k, v in self.seconds.items()})
        row["new_ids"] = list(self.new_ids)
        return row

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(sizes=list(self.sizes), gaps=list(self.gaps), new_ids=list(self.new_ids))
        return data

    def __str__(self) -> str:
        return (f"iter {self.iteration:>3} | sizes {self.sizes} | {self.kind.upper()} gap {_fmt(self.gap)} | "
                f"marginals' NashConv {_fmt(self.nash_conv)} | {sum(self.seconds.values()):.3f}s")


class JPSRO:
    """Joint PSRO; see the module doc.

    Args:
        game: a `Game` (or its name) whose tree fits in memory; any number of players, general-sum.
        solver: ``"mgcce"`` (default), ``"mgce"``, ``"mwcce"``, ``"mwce"``, ``"cce"``, ``"ce"``, or a
            `MetaSolver` of one of them.
        stop_gap: `run` stops once the summed gap is at or below this.
        max_iterations: `run` never goes past this iteration.
        tie_tol: a best response is new only if it gains more than this over the joint.
        save_dir: if given, the run is saved there after every iteration (atomically).
    """

    def __init__(self, game: Game | str, solver: str | MetaSolver = "mgcce", *, stop_gap: float | None = 1e-9,
                 max_iterations: int | None = None, tie_tol: float = 1e-10,
                 save_dir: str | os.PathLike[str] | None = None) -> None:
        self._configure(game, solver, stop_gap=stop_gap, max_iterations=max_iterations, tie_tol=tie_tol,
                        save_dir=save_dir)
        for p in range(self.game.num_players):
            self.population.add(p, RandomPolicy(self.game), name=f"initial-{p}", iteration=0, origin="initial")
        self._finish(0, {"oracle": 0.0}, ())

    def _configure(self, game: Game | str, solver: str | MetaSolver, *, stop_gap: float | None,
                   max_iterations: int | None, tie_tol: float, save_dir: str | os.PathLike[str] | None) -> None:
        """Every option and the empty run; shared by `__init__` and `load`."""
        self.game = load_game(game) if isinstance(game, str) else game
        self.solver = solver if isinstance(solver, MetaSolver) else MetaSolver(solver)
        if self.solver.name not in KINDS:
            raise ValueError(f"JPSRO needs a correlated meta-solver ({', '.join(KINDS)}), got {self.solver.name!r}")
        self.kind = KINDS[self.solver.name]
        if stop_gap is not None and not stop_gap >= 0:
            raise ValueError(f"stop_gap must be a non-negative number or None, got {stop_gap!r}")
        if max_iterations is not None and (not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0):
            raise ValueError(f"max_iterations must be a non-negative int or None, got {max_iterations!r}")
        self.stop_gap, self.max_iterations, self.tie_tol = stop_gap, max_iterations, float(tie_tol)
        self.evaluator = ExactEvaluator(self.game)
        self.tree = self.evaluator.tree
        self.population = Population(self.game)
        self.table = PayoffTable(self.population)
        self.records: list[JPSRORecord] = []
        self.meta_strategy: MetaStrategy | None = None
        self._pending: list[tuple[int, np.ndarray]] = []
        self._wall = 0.0
        self.save_dir = Path(save_dir) if save_dir is not None else None

    # -- the loop ------------------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.algorithms.transaction`)."""
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

    def _finish(self, iteration: int, seconds: dict[str, float], ids: tuple[str, ...]) -> JPSRORecord:
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
        seconds.update(evaluate=t1 - t0, solve=t2 - t1, measure=t3 - t2)
        self._wall += sum(seconds.values())
        self.meta_strategy, self._pending = sigma, pending
        nc = float((br_values - values).sum())
        meta = sum(sigma.info.get(f"{self.kind}_gaps", (np.nan,)))
        record = JPSRORecord(iteration=iteration, sizes=self.population.sizes, kind=self.kind,
                             gap=float(gaps.sum()), gaps=tuple(float(g) for g in gaps), nash_conv=nc,
                             exploitability=nc / self.game.num_players, meta_gap=float(meta), seconds=seconds,
                             wall_time=self._wall, new_ids=ids)
        self.records.append(record)
        if self.save_dir is not None:
            self.save(self.save_dir)
        return record

    def _gaps(self, sigma: MetaStrategy) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
        """Per-player full-game gaps of the joint, and the new best responses ``(player, table)``."""
        P = self.game.num_players
        joint = np.asarray(sigma.joint)
        reach = [terminal_reach(self.evaluator.plans(p, self.population[p]), self.tree, p) for p in range(P)]
        values = np.tensordot(joint, self.table.values, axes=P)  # [P]
        gaps = np.zeros(P)
        pending: list[tuple[int, np.ndarray]] = []
        for p in range(P):
            weights = np.moveaxis(joint, p, 0)  # [n_p, others...]
            if self.kind == "cce":
                groups = [weights.sum(axis=0)]
            else:
                groups = [weights[a] for a in range(len(weights)) if weights[a].sum() > self.tie_tol]
            others = [reach[q] for q in range(P) if q != p]
            total = 0.0
            for w in groups:
                value, br = best_response_values(self.tree, p, self.tree.chance_reach * _correlated_reach(w, others))
                total += value
                if value - self._member_value(p, w, others) > self.tie_tol and not self._known(p, br, pending):
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
        """Whether the last gap is at or below `stop_gap`, or no new best response was found."""
        if not self.records:
            return False
        return not self._pending or (self.stop_gap is not None and self.records[-1].gap <= self.stop_gap)

    def run(self, iterations: int) -> Iterator[JPSRORecord]:
        """Yield the records of up to `iterations` more iterations (stops when converged or at `max_iterations`)."""
        return run_steps(self, iterations)

    @property
    def iteration(self) -> int:
        return self.records[-1].iteration if self.records else -1

    @property
    def history(self) -> pd.DataFrame:
        """One row per iteration (see `JPSRORecord`)."""
        return pd.DataFrame([r.as_row() for r in self.records]).set_index("iteration")

    def __repr__(self) -> str:
        gap = f", gap={self.records[-1].gap:.4g}" if self.records else ""
        return f"JPSRO({self.game.name!r}, solver={self.solver.name!r}, iteration={self.iteration}{gap})"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the run to folder `path` (population, table, pending best responses; ``run.json`` last)."""
        return save_jpsro(self, Path(path))

    @classmethod
    def load(cls, path: str | os.PathLike[str], **overrides: Any) -> JPSRO:
        """Resume a run saved by `save`; `overrides`: ``save_dir``, ``stop_gap``, ``max_iterations``, ``tie_tol``."""
        return load_jpsro(cls, Path(path), **overrides)


def _correlated_reach(weights: np.ndarray, reaches: list[np.ndarray]) -> np.ndarray:
    """``sum_s w(s) prod_j reaches[j][s_j]`` at each terminal: ``[Z]`` from weights over the others' profiles."""
    out = np.tensordot(weights, reaches[-1], axes=([weights.ndim - 1], [0]))  # [n_0, ..., n_{k-2}, Z]
    for j in range(len(reaches) - 2, -1, -1):
        out = np.einsum("...iz,iz->...z", out, reaches[j])
    return np.asarray(out)
