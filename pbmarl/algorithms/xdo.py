"""`XDO`: the extensive-form double oracle (McAleer, Lanier, Baldi and Fox 2021).

PSRO mixes whole policies, so it needs a population member for every combination of
choices at different information states. XDO mixes at every information state: the
**restricted game** is the full game with, at each information state, only the actions
that some population best response plays there. One iteration:

1. each player's exact best response to the current restricted-game solution joins
   the population (a pure policy: one action per information state);
2. the restricted game is solved to exploitability ``tau`` (its own NashConv / 2) with
   CFR+ (`pbmarl.evaluation.cfr.CFRPlus`, checked every `check_every` iterations), or
   exactly with the sequence-form LP (`pbmarl.evaluation.sequence_form.solve_tree`);
3. the solution's exploitability in the full game is measured exactly; when it is
   below ``tau``, ``tau`` is halved (the authors' schedule, starting from 16).

The population starts with each player's best response to the uniform policy, as in
the authors' code. Two-player zero-sum games only.

**With an RL oracle** (``learner=``, any `Oracle`: `DQN`, `PPO`, ...) step 1 trains each
player's best response against the current restricted-game solution (a `TabularPolicy`)
instead of computing it exactly; the trained policy is read at every information state of
the player and its most probable legal action there joins the population (a pure policy,
as XDO adds). This is XDO with a neural oracle and an exact restricted-game solver; the
authors' NXDO also approximates the restricted game (with NFSP). The environment steps the
oracle took are recorded (`XDORecord.env_steps`); exploitability stays exact.

Example:
    >>> xdo = XDO("leduc_poker")
    >>> for record in xdo.run(3):  # doctest: +ELLIPSIS
    ...     print(record)
    iter   0 | sizes (1, 1) | exploitability 3.417 | restricted 0 | tau 16 | inner 10 | ...
    >>> xdo.history[["exploitability", "tau", "inner_iterations"]]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pbmarl.algorithms.stepping import run_steps
from pbmarl.algorithms.transaction import all_or_nothing
from pbmarl.algorithms.xdo_io import XDORecord, load_xdo, save_xdo
from pbmarl.evaluation.cfr import CFRPlus
from pbmarl.evaluation.engine import best_response_values, nash_conv, opponent_reach
from pbmarl.evaluation.realization import behaviour_from_plan, policy_tables, realization_plans
from pbmarl.evaluation.sequence_form import check_zero_sum_tree, solve_tree
from pbmarl.games.base import Game
from pbmarl.games.registry import load_game
from pbmarl.games.tree import GameTree
from pbmarl.policies.tabular import TabularPolicy
from pbmarl.population import Population
from pbmarl.protocols import Oracle, Restorable, respond_all

SOLVERS = ("cfr+", "lp")


def restricted_tree(tree: GameTree, masks: tuple[np.ndarray, ...]) -> GameTree:
    """`tree` with each player's legal actions narrowed to ``masks[p]`` ``[S_p, A]`` (and the game's)."""
    infosets = tuple(dataclasses.replace(i, legal=i.legal & m) for i, m in zip(tree.infosets, masks))
    return dataclasses.replace(tree, infosets=infosets)


class XDO:
    """The extensive-form double oracle; see the module doc.

    Args:
        game: a two-player zero-sum `Game` (or its name) whose tree fits in memory.
        solver: ``"cfr+"`` (to tolerance `tau`) or ``"lp"`` (exact) for the restricted game.
        tau: the first restricted-game tolerance (exploitability); halved as in the paper.
        check_every: CFR+ iterations between checks of the restricted game's exploitability.
        max_inner: CFR+ iterations allowed per restricted game before giving up on `tau`.
        stop_exploitability: `run` stops once the full-game exploitability is at or below this.
        max_iterations: `run` never goes past this iteration.
        save_dir: if given, the run is saved there after every iteration (atomically).
        learner: an RL `Oracle` that trains each best response (see the module doc); ``None``
            (the default) computes them exactly.
    """

    def __init__(self, game: Game | str, *, solver: str = "cfr+", tau: float = 16.0, check_every: int = 10,
                 max_inner: int = 100_000, stop_exploitability: float | None = None,
                 max_iterations: int | None = None, save_dir: str | os.PathLike[str] | None = None,
                 learner: Oracle | None = None) -> None:
        self.game = load_game(game) if isinstance(game, str) else game
        if learner is not None and not isinstance(learner, Oracle):
            raise TypeError(f"XDO's learner must be an Oracle with respond(player, opponents) (pb.DQN, pb.PPO, ...) "
                            f"or None for exact best responses, got {type(learner).__name__}: {learner!r}")
        if solver not in SOLVERS:
            raise ValueError(f"XDO's restricted-game solver must be one of {SOLVERS}, got {solver!r}")
        if isinstance(tau, bool) or not isinstance(tau, (int, float, np.floating)) or not tau > 0:
            raise ValueError(f"tau (the restricted-game tolerance) must be a positive number, got {tau!r}")
        for name, value in (("check_every", check_every), ("max_inner", max_inner)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if stop_exploitability is not None and not stop_exploitability >= 0:
            raise ValueError(f"stop_exploitability must be a non-negative number, got {stop_exploitability!r}")
        if max_iterations is not None and (not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0):
            raise ValueError(f"max_iterations must be a non-negative int or None, got {max_iterations!r}")
        self.tree = self.game.tree()
        check_zero_sum_tree(self.game, self.tree, who="XDO")
        self.solver, self.tau, self.check_every, self.max_inner = solver, float(tau), int(check_every), int(max_inner)
        self.stop_exploitability, self.max_iterations = stop_exploitability, max_iterations
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self.learner = learner
        self.population = Population(self.game)
        self.records: list[XDORecord] = []
        self.plans: tuple[np.ndarray, ...] = ()
        self._wall = 0.0
        self._inner_total = 0
        self._env_steps = 0

    @classmethod
    def _blank(cls) -> XDO:
        return cls.__new__(cls)

    # -- the loop ------------------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.algorithms.transaction`)."""
        learner = self.learner.snapshot() if isinstance(self.learner, Restorable) else None
        return (self.population.snapshot(), self.plans, self.tau, len(self.records), self._wall, self._inner_total,
                self._env_steps, learner)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        population, plans, tau, n_records, wall, inner, env_steps, learner = cast(
            "tuple[object, tuple[np.ndarray, ...], float, int, float, int, int, object]", state)
        self.population.restore(population)
        self.plans, self.tau, self._wall, self._inner_total = plans, tau, wall, inner
        self._env_steps = env_steps
        del self.records[n_records:]
        if learner is not None and isinstance(self.learner, Restorable):
            self.learner.restore(learner)

    @all_or_nothing
    def step(self) -> XDORecord:
        """One XDO iteration (the first call builds the initial population); returns its record.

        All or nothing: an exception (or ``KeyboardInterrupt``) anywhere, the save included,
        leaves the run as it was.
        """
        start = time.perf_counter()
        uniform = not self.plans
        plans = self.plans or tuple(realization_plans(self.tree.infosets[p].legal / np.maximum(
            self.tree.infosets[p].legal.sum(axis=1, keepdims=True), 1), self.tree.infosets[p], self.tree.num_actions)
            for p in range(2))
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
        seconds = {"oracle": oracle - start, "solve": solved - oracle, "measure": measured - solved}
        self._wall += sum(seconds.values())
        record = XDORecord(iteration=iteration, sizes=self.population.sizes, nash_conv=nc, exploitability=nc / 2,
                           restricted_exploitability=restricted, tau=tau_used, inner_iterations=inner,
                           total_inner_iterations=self._inner_total,
                           restricted_actions=int(sum(m.sum() for m in masks)), seconds=seconds,
                           wall_time=self._wall, new_ids=ids, solver=self.solver, env_steps=self._env_steps)
        self.records.append(record)
        if self.save_dir is not None:
            self.save(self.save_dir)
        return record

    def _best_responses(self, plans: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        """Each player's pure best response ``[S_p, A]`` (one-hot rows) to the other's plan in `plans`."""
        if self.learner is None:
            reach = [x[self.tree.terminal_seq[p]] for p, x in enumerate(plans)]
            return [best_response_values(self.tree, p, opponent_reach(self.tree, p, reach))[1] for p in range(2)]
        solution = self._solution(plans)
        requests = [(p, [None, solution[1]] if p == 0 else [solution[0], None]) for p in range(2)]
        answers = respond_all(self.learner, requests)  # side by side from a `ParallelOracle`
        self._env_steps += sum(int(answer.env_steps) for answer in answers)
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
        """Plans of a solution of the restricted `tree`, the CFR+ iterations spent, its exploitability."""
        if self.solver == "lp":
            exact, _, _ = solve_tree(tree)
            return exact, 0, _restricted_exploitability(tree, exact)
        cfr = CFRPlus(tree)
        while True:
            cfr.run(self.check_every)
            plans = tuple(realization_plans(t, tree.infosets[p], tree.num_actions)
                          for p, t in enumerate(cfr.average_tables()))
            expl = _restricted_exploitability(tree, plans)
            if expl <= self.tau or cfr.iterations >= self.max_inner:
                return plans, cfr.iterations, expl

    @property
    def converged(self) -> bool:
        if self.stop_exploitability is None or not self.records:
            return False
        return self.records[-1].exploitability <= self.stop_exploitability

    def run(self, iterations: int) -> Iterator[XDORecord]:
        """Yield the records of up to `iterations` more iterations (stops when converged or at `max_iterations`)."""
        return run_steps(self, iterations)

    # -- views ------------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        return self.records[-1].iteration if self.records else -1

    @property
    def policies(self) -> tuple[TabularPolicy, ...]:
        """The current restricted-game solution as one `TabularPolicy` per player."""
        if not self.plans:
            raise ValueError("XDO has no solution yet: call step() first")
        return self._solution(self.plans)

    def _solution(self, plans: tuple[np.ndarray, ...]) -> tuple[TabularPolicy, ...]:
        """Realisation plans as one behaviour `TabularPolicy` per player."""
        return tuple(self._policy(p, behaviour_from_plan(x, self.tree.infosets[p], self.tree.num_actions))
                     for p, x in enumerate(plans))

    @property
    def history(self) -> pd.DataFrame:
        """One row per iteration (see `XDORecord`)."""
        return pd.DataFrame([r.as_row() for r in self.records]).set_index("iteration") if self.records else \
            pd.DataFrame(columns=["exploitability", "nash_conv", "tau", "inner_iterations", "wall_time"])

    def __repr__(self) -> str:
        tail = f", exploitability={self.records[-1].exploitability:.4g}" if self.records else ""
        return f"XDO({self.game.name!r}, solver={self.solver!r}, iteration={self.iteration}, tau={self.tau:.3g}{tail})"

    # -- files ------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the run to folder `path` (population, solution plans, records; ``run.json`` last)."""
        return save_xdo(self, Path(path))

    @classmethod
    def load(cls, path: str | os.PathLike[str], **overrides: Any) -> XDO:
        """Resume a run saved by `save`; `overrides` replace saved options (``save_dir=``, ``max_inner=``, ...)."""
        return load_xdo(cls, Path(path), **overrides)


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
