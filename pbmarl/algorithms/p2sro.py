"""`P2SRO`: Pipeline PSRO (McAleer et al. 2020, "Pipeline PSRO: A Scalable Approach for
Finding Approximate Nash Equilibria in Large Games", NeurIPS), stepped like `PSRO`.

The population is a ladder. Its first ``k + 1`` rungs are *fixed* policies: they live in
the payoff table and the meta-Nash is solved over them. Above them, ``active`` rungs are
*active levels*, each training (one policy per player) against the meta-Nash of every rung
below it, fixed or active; the targets are refreshed every ``refresh_every`` learner
rounds. Only the lowest active level may freeze: once its training ends (the learner's
budget or a plateau of its learning curve) it joins the fixed policies, and a new active
level starts on top.

`step()` runs refresh periods until the lowest level freezes and returns that iteration's
`IterationRecord`, exactly like a `PSRO` iteration; with ``active=1`` the run *is* PSRO
(same seed, same history). `levels` shows the active levels; `level_history` has one row
per refresh period. Claiming a rung and freezing one go through one manager
(`pbmarl.algorithms.p2sro_manager`): a Ray actor with ``backend="ray"``, where each active
level is a learner actor too; the same manager in-process with ``backend="local"``. Either
way the calls are atomic and the fixed set is always members ``0..k``.

Example:
    >>> p2sro = P2SRO("kuhn_poker", learner=pb.DQN(game, seed=0, budget=20_000), active=3, refresh_every=4)  # doctest: +SKIP
    >>> for record in p2sro.run(10):  # doctest: +SKIP
    ...     print(record)
    >>> p2sro.levels, p2sro.level_history  # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import pandas as pd

from pbmarl.algorithms.driver_io import learner_copy
from pbmarl.algorithms.p2sro_manager import Ladder, LadderManager, make_ladder
from pbmarl.algorithms.psro import PSRO, PSROConfig, _default_initial
from pbmarl.algorithms.psro_parts import learner_reader, learner_writer, oracle_episodes
from pbmarl.algorithms.records import IterationRecord
from pbmarl.algorithms.targets import Target, against
from pbmarl.games.base import Game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population
from pbmarl.protocols import Restorable, Specified
from pbmarl.runs import RunFolderError, SavedRun, State
from pbmarl.runs.config import POSITIVE, POSITIVE_INT
from pbmarl.runs.transaction import all_or_nothing


class Level:
    """One active level: a learner training one policy per player against its target mixtures.

    With an RL `Learner` the players train one after the other, a task each, `rounds` learner
    rounds per `advance`; a level that is not the lowest starts again (warm) when it has
    finished, so it keeps improving until it is the lowest. A level that has finished once is
    `done`: when it becomes the lowest it freezes at once with each player's latest finished
    policy, and the cycle it had begun is dropped (waiting for that cycle to end made every
    freeze cost a whole extra cycle of all levels: on Leduc, 3 iterations in 8 minutes where
    PSRO made 7). An exact oracle answers every player at every `advance`.
    """

    def __init__(self, index: int, learner: Any, initial: Sequence[Policy]) -> None:
        self.index = index
        """The rung: this level's policies will be member `index` of every player's population."""
        self.learner = learner
        self.policies: list[Policy] = list(initial)
        self.values = [math.nan] * len(initial)
        self.trained = [False] * len(initial)
        self.player = 0
        self.cycles = 0
        self.targets: list[Mixture] = []

    @property
    def done(self) -> bool:
        """Every player's training has ended at least once: the level may freeze."""
        return all(self.trained) or self.cycles > 0

    def _rl(self) -> bool:
        from pbmarl.learners.oracles.base import Learner

        return isinstance(self.learner, Learner)

    def retarget(self, targets: list[Mixture]) -> None:
        """Train against `targets` (one mixture per player) from now on, the running task included."""
        self.targets = targets
        task = getattr(self.learner, "task", None) if self._rl() else None
        if task is not None:
            task.opponents = [None if q == task.player else t for q, t in enumerate(targets)]

    def select(self, rng: np.random.Generator | None = None) -> list[Target]:
        """The level's targets (a `TargetSelector`): each player against the others' mixtures."""
        return [Target(p, against(p, self.targets), f"level {self.index}") for p in range(len(self.targets))]

    def advance(self, rounds: int) -> int:
        """Train for `rounds` learner rounds (an exact oracle: one answer per player); returns env steps."""
        if not self._rl():
            spent = 0
            for t in self.select():
                answer = self.learner.respond(t.player, t.opponents)
                self.policies[t.player], self.values[t.player] = answer.policy, float(answer.value)
                spent += int(answer.env_steps)
            self.trained = [True] * len(self.trained)
            return spent
        learner, spent = self.learner, 0
        for _ in range(rounds):
            if all(self.trained):
                self.trained = [False] * len(self.trained)
                self.cycles += 1
            p = self.player
            if learner.task is None:
                learner.start(p, self.select()[p].opponents, warm_start=True if self.cycles else None)
            before = learner.task.env_steps
            learner.step()
            if learner.done:  # env steps counted per round, so a cycle dropped at a freeze is counted too
                self.policies[p], self.values[p] = learner.finish()
                spent += int(learner.last_env_steps) - before
                self.trained[p] = True
                self.player = (p + 1) % len(self.trained)
                if all(self.trained):
                    break
            else:
                spent += int(learner.task.env_steps) - before
        return spent

    def reset(self, index: int, initial: Sequence[Policy]) -> Level:
        """A fresh level at rung `index` that reuses this level's learner (a frozen level's learner moves up).

        A cycle begun after the level's last finished one is dropped unfinished; its networks stay
        until the next task replaces them, so an interrupted step can still restore it.
        """
        if self._rl() and self.learner.task is not None:
            self.learner.task = None
        return Level(index, self.learner, initial)

    def set_state(self, state: dict[str, Any]) -> None:
        self.index, self.policies, self.values = int(state["index"]), list(state["policies"]), list(state["values"])
        self.trained, self.player, self.cycles = list(state["trained"]), int(state["player"]), int(state["cycles"])

    def save_learner(self, folder: Path) -> None:
        """Write the level's learner state into `folder` (`pbmarl.algorithms.psro_parts.learner_writer`)."""
        keeper = learner_writer(self.learner)
        if keeper is None:
            raise ValueError(f"the level's learner {self.learner!r} keeps no state to save")
        keeper[1](folder)

    def load_learner(self, folder: Path) -> None:
        """Read back what `save_learner` wrote (a learner that is a run is replaced by the one loaded)."""
        keeper = learner_writer(self.learner)
        self.learner = learner_reader(keeper and keeper[0], folder, self.learner)

    def close(self) -> None:
        """Nothing to end: the learner lives in this process."""

    def current(self, player: int) -> Policy:
        """The level's policy for `player` now (a copy of the one in training, if it is training)."""
        task = getattr(self.learner, "task", None) if self._rl() else None
        if task is not None and task.player == player:
            return cast(Policy, self.learner.policy())
        return self.policies[player]


@dataclass(frozen=True)
class P2SROConfig(PSROConfig):
    """P2SRO's options: PSRO's, plus the pipeline's."""

    active: int = 3
    """Number of active levels (1: plain PSRO)."""
    refresh_every: int = 4
    """Learner rounds between refreshes of the levels' targets."""
    backend: str = "local"
    """``"local"``: the levels advance in this process, bottom up, each seeing the levels below as
    trained so far; ``"ray"``: every level is a learner actor and all advance at once against targets
    computed at the start of the refresh period (RL learners only)."""
    level_cpus: float = 1.0
    """CPUs each level actor asks Ray for (``backend="ray"``); below 1 lets more active levels than
    CPUs share them (``active=3, level_cpus=2/3`` on two cores)."""

    checks: ClassVar[dict[str, Any]] = {
        "active": (POSITIVE_INT[0], "a positive int (number of active levels)"),
        "refresh_every": (POSITIVE_INT[0], "a positive int (learner rounds)"),
        "backend": (lambda v: v in ("local", "ray"), "'local' or 'ray'"),
        "level_cpus": (POSITIVE[0], "a positive number of CPUs per level actor"),
    }


class P2SRO(PSRO):
    """Pipeline PSRO; see the module doc. Built as `PSRO` (parts and options), with the options of
    `P2SROConfig` besides: ``active``, ``refresh_every``, ``backend``, ``level_cpus``."""

    config_class: ClassVar[type[PSROConfig]] = P2SROConfig
    config: P2SROConfig

    def __init__(self, game: Game | str, solver: Any = None, learner: Any = None, evaluator: Any = None, *,
                 initial_policies: Any = None, seed: int = 0, config: P2SROConfig | None = None,
                 **options: Any) -> None:
        super().__init__(game, solver, learner, evaluator, initial_policies=initial_policies, seed=seed,
                         config=config, **options)
        self._start_levels()

    def _configure(self, game: Game | str, solver: Any, learner: Any, evaluator: Any, config: PSROConfig,
                   seed: int) -> None:
        super()._configure(game, solver, learner, evaluator, config, seed)
        if self.config.backend == "ray" and not isinstance(self.learner, Specified):
            raise ValueError(f"backend='ray' runs RL learners (with a spec to rebuild them in an actor), "
                             f"not {self.learner!r}; use backend='local'")
        self.levels: list[Any] = []  # Level, or RemoteLevel with backend="ray"; started after iteration 0
        self.level_records: list[dict[str, Any]] = []
        self.manager: Ladder = LadderManager(0)

    def _start_levels(self) -> None:
        self.manager = make_ladder(self.config.backend, self.population.sizes[0])
        self.levels = []
        for j in range(self.config.active):
            learner = self.learner if j == 0 else learner_copy(self.learner, j)
            self.levels.append(self._level(self.manager.claim(), learner, self._initial()))

    def _level(self, index: int, learner: Any, initial: list[Policy]) -> Any:
        if self.config.backend == "ray":
            from pbmarl.algorithms.p2sro_ray import RemoteLevel

            return RemoteLevel(self.game, learner, index, initial, num_cpus=self.config.level_cpus)
        return Level(index, learner, initial)

    def close(self) -> None:
        """End the active levels' actors (``backend="ray"``) so their CPUs are free; a no-op locally.

        Save first to keep the levels' progress: `pb.load_run` starts new actors from the folder.
        """
        for level in self.levels:
            level.close()
        self.manager.close()
        super().close()

    def _initial(self) -> list[Policy]:
        return [_default_initial(self.game) for _ in range(self.game.num_players)]

    # -- targets ---------------------------------------------------------------------
    def level_targets(self, j: int) -> list[Mixture]:
        """The meta-Nash (the run's solver) over the fixed policies and active levels below level `j`."""
        if j == 0:
            return self.population.mixture(self.meta_strategy)
        P = self.game.num_players
        pols = [list(self.population[p]) + [lv.current(p) for lv in self.levels[:j]] for p in range(P)]
        sigma = self.solver(self._table_of(pols))
        return [Mixture(pols[p], sigma[p]) for p in range(P)]

    def _table_of(self, pols: list[list[Policy]]) -> PayoffTable:
        from pbmarl.evaluation import ExactEvaluator
        from pbmarl.population import Population

        if isinstance(self.evaluator, ExactEvaluator):
            return PayoffTable.from_array(self.evaluator.payoffs(pols))
        pop = Population(self.game)
        for p, members in enumerate(pols):
            for policy in members:
                pop.add(p, policy)
        table = PayoffTable(pop)
        self.evaluator.fill(table, self.config.eval_episodes, seed=int(self.rng.integers(2**62)))
        return table

    # -- the loop --------------------------------------------------------------------
    @all_or_nothing
    def step(self) -> IterationRecord:
        """Refresh periods until the lowest active level freezes; returns that iteration's record."""
        iteration = len(self.records)
        t0 = time.perf_counter()
        episodes = self._level_episodes()
        while not self.levels[0].done:  # a level whose training ended while higher up freezes at once
            if self.config.backend == "ray":  # all levels at once, against this period's targets
                for j, level in enumerate(self.levels):
                    level.retarget(self.level_targets(j))
                refs = [level.start(self.config.refresh_every) for level in self.levels]
                self._env_steps += sum(level.finish(ref) for level, ref in zip(self.levels, refs))
            else:
                for j, level in enumerate(self.levels):  # bottom up: each level sees the ones below as trained so far
                    level.retarget(self.level_targets(j))
                    self._env_steps += level.advance(self.config.refresh_every)
            low = self.levels[0]
            self.level_records.append({
                "period": len(self.level_records), "iteration": iteration, "frozen": low.done,
                "levels": [lv.index for lv in self.levels], "trained": [sum(lv.trained) for lv in self.levels],
                "cycles": [lv.cycles for lv in self.levels], "env_steps": self._env_steps})
        low = self.levels[0]
        rung = self.manager.freeze(low.index)  # refused unless it is the lowest active rung
        if rung != self.population.sizes[0]:
            raise RuntimeError(f"the manager froze rung {rung} but the population has {self.population.sizes[0]} "
                               "fixed members: the ladder and the table disagree")
        ids = [self.population.add(p, low.policies[p], name=f"br{iteration}-{p}", iteration=iteration,
                                   origin=self.learner.name, br_value=low.values[p])
               for p in range(self.game.num_players)]
        self.levels.pop(0)
        self.levels.append(low.reset(self.manager.claim(), self._initial()))
        self._episodes += self._level_episodes() - episodes
        seconds = {"oracle": time.perf_counter() - t0}
        return self._finish_iteration(iteration, seconds, tuple(ids), tuple(low.values))

    def _level_episodes(self) -> int:
        """Episodes the in-process levels' learners have played (a frozen level's learner moves up: the set
        of learners stays the same across a step)."""
        learners = {id(lv.learner): lv.learner for lv in self.levels if isinstance(lv, Level)}
        return sum(oracle_episodes(learner) for learner in learners.values())

    def snapshot(self) -> object:
        # remote learners (backend="ray") are not rolled back: only the driver's side is
        learners = [lv.learner.snapshot() if isinstance(lv, Level) and isinstance(lv.learner, Restorable)
                    and lv.learner is not self.learner else None for lv in self.levels]
        levels = [(lv, dict(lv.__dict__), list(lv.policies), list(lv.trained), list(lv.values)) for lv in self.levels]
        return super().snapshot(), levels, learners, len(self.level_records), self.manager.state()

    def restore(self, state: object) -> None:
        base, levels, learners, n, ladder = cast("tuple[object, list[Any], list[Any], int, dict[str, Any]]", state)
        super().restore(base)
        self.manager.set_state(ladder)
        self.levels = []
        for (level, attrs, policies, trained, values), saved in zip(levels, learners):
            level.__dict__.update(attrs)
            level.policies, level.trained, level.values = policies, trained, values
            if saved is not None:
                level.learner.restore(saved)
            self.levels.append(level)
        del self.level_records[n:]

    @property
    def level_history(self) -> pd.DataFrame:
        """One row per refresh period: the active levels' rungs, how many players each has trained, env steps."""
        return pd.DataFrame(self.level_records, columns=["period", "iteration", "frozen", "levels", "trained",
                                                         "cycles", "env_steps"])

    @property
    def fixed(self) -> list[list[str]]:
        """Ids of the fixed policies per player: always members ``0..k`` of the population."""
        return [self.population.ids(p) for p in range(self.game.num_players)]

    @property
    def ladder(self) -> dict[str, list[int]]:
        """The manager's view: fixed rungs (``0..k``) and the active levels' rungs, lowest first."""
        return {"fixed": self.manager.fixed_rungs(), "active": self.manager.active_rungs()}

    # -- files -----------------------------------------------------------------------
    def state(self) -> State:
        """PSRO's state, plus the active levels: their policies (a population, level j as member j),
        their learners' state (a folder each, but the run's own learner's), progress and the ladder."""
        state = super().state()
        P = self.game.num_players
        if self.levels:
            levels = Population(self.game)
            for lv in self.levels:
                for p in range(P):
                    levels.add(p, lv.policies[p], name=f"level-{lv.index}")
            state.folders["levels"] = levels.save
        entries = []
        for j, lv in enumerate(self.levels):
            main = isinstance(lv, Level) and lv.learner is self.learner  # saved with the run by PSRO.state
            keeps = not main and (not isinstance(lv, Level) or learner_writer(lv.learner) is not None)
            if keeps:
                state.folders[f"level-{j}-learner"] = lv.save_learner
            entries.append({"index": lv.index, "values": [float(v) for v in lv.values], "trained": list(lv.trained),
                            "player": int(lv.player), "cycles": int(lv.cycles), "main_learner": main,
                            "learner_state": keeps, "offset": j})
        state.data["p2sro"] = {"levels": entries, "level_records": list(self.level_records),
                               "ladder": self.manager.state()}
        return state

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> Any:
        """Rebuild a run `state` wrote, active levels included (see `PSRO.from_state`)."""
        run = super().from_state(saved, **overrides)
        try:
            data = saved.data["p2sro"]
            entries, records, ladder = list(data["levels"]), list(data["level_records"]), dict(data["ladder"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: no valid 'p2sro' state ({exc})") from None
        if not entries:  # saved at iteration 0, before the levels started
            run._start_levels()
            return run
        P = run.game.num_players
        pop = Population.load(saved.subfolder("levels"), run.game, sizes=[len(entries)] * P)
        for j, entry in enumerate(entries):
            learner = run.learner if entry["main_learner"] else learner_copy(run.learner, int(entry["offset"]))
            policies = [pop[p][j] for p in range(P)]
            level = run._level(int(entry["index"]), learner, policies)
            if entry["learner_state"]:
                level.load_learner(saved.subfolder(f"level-{j}-learner"))
            level.set_state({**entry, "policies": policies})
            run.levels.append(level)
        run.level_records = records
        run.manager = make_ladder(run.config.backend, run.population.sizes[0], [lv.index for lv in run.levels])
        run.manager.set_state(ladder)
        return run
