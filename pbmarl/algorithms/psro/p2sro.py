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
(`pbmarl.algorithms.psro.ladder`): a Ray actor with ``backend="ray"``, where each active
level is a learner actor too; the same manager in-process with ``backend="local"``. Either
way the calls are atomic and the fixed set is always members ``0..k``.

Example:
    >>> p2sro = P2SRO("kuhn_poker", learner=pb.DQN(game, seed=0, budget=20_000), active=3, refresh_every=4)  # doctest: +SKIP
    >>> for record in p2sro.run(10):  # doctest: +SKIP
    ...     print(record)
    >>> p2sro.levels, p2sro.level_history  # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import pandas as pd

from pbmarl.algorithms.psro.ladder import Ladder, LadderManager, make_ladder
from pbmarl.algorithms.psro.levels import Level, RemoteLevel
from pbmarl.algorithms.psro.parts import learner_copy, learner_writer, oracle_episodes
from pbmarl.algorithms.psro.psro import PSRO, PSROConfig, _default_initial
from pbmarl.algorithms.psro.records import IterationRecord
from pbmarl.config import POSITIVE, POSITIVE_INT
from pbmarl.games.base import Game
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.population import Population
from pbmarl.protocols import Restorable, Specified
from pbmarl.runs import RunFolderError, SavedRun, State
from pbmarl.runs.transaction import all_or_nothing, covered


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
        with covered(*self._level_learners()):  # this step's snapshot holds theirs: their rounds need none of their own
            self._train_until_a_freeze(iteration)
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

    def _train_until_a_freeze(self, iteration: int) -> None:
        """Refresh periods until the lowest active level is done, each recorded in `level_records`."""
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

    def _level_learners(self) -> list[Any]:
        """The in-process levels' learners, each once (`snapshot` holds every one's state)."""
        return list({id(lv.learner): lv.learner for lv in self.levels if isinstance(lv, Level)}.values())

    def _level_episodes(self) -> int:
        """Episodes the in-process levels' learners have played (a frozen level's learner moves up: the set
        of learners stays the same across a step)."""
        return sum(oracle_episodes(learner) for learner in self._level_learners())

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
