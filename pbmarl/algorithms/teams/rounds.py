"""The multi-agent learners (MAPPO, IPPO, QMIX, VDN, IQL, MADDPG) on a parameter server.

``pb.MARL(game, {"team": pb.MAPPO(workers=4, sync="bsp")})``: when the learning groups'
configs ask for ``workers > 1`` (all the same `ParallelOptions`), one `MARL.step()` is one
step of rounds of `Rounds` (BSP, ASP or BAP) over `MARLWorker` jobs, until the jobs make
`workers` batches' worth of gradients. A worker's job:

1. loads the published *state*: every network of every learning group, target networks
   and running statistics included, as one flat vector (`get_state` of a `Team`); each
   learner's ``env_steps`` is set to the run's count (QMIX's epsilon follows it);
2. when the worker has no batch in hand, collects ``steps_per_round`` env steps on its own
   environments, all groups in the same episodes (the fixed groups too), exactly as
   `MARL.step` collects, and plans the batch's gradients as the single-process `train` takes
   its updates: MAPPO's ``epochs`` shuffled passes of ``minibatches`` parts, the advantages and
   returns fixed at the collecting weights (`MAPPO.round_data`); QMIX's and MADDPG's
   ``updates_per_round`` minibatches of the worker's own replay (Gorila's layout), into which
   the rows go;
3. takes the next planned gradient of every group at the state it was sent, with *recording*
   optimisers: each ``opt.step()`` keeps that optimiser's (clipped) gradient instead of
   stepping. Before MADDPG's ``learning_starts`` a job only collects.

(Before, a job was one gradient of a fresh batch: MAPPO took 1 epoch of 1 minibatch a batch
where the single learner takes ``epochs * minibatches`` (15), QMIX 1 update where it takes 8,
and two workers learned markedly slower than one learner on the combined batch.)

The server (`MARLServerProcess`, a Ray actor on ``backend="ray"``) holds a copy of the
learners. An update steps each optimiser on the mean of the gradients that carry it
(weighted by the samples behind each: MAPPO's minibatch rows; replay minibatches equally), then runs each trained learner's `_after_update` with
the workers' reports: QMIX counts the update and copies its targets every
``target_update``, MADDPG moves its targets by Polyak, MAPPO's ValueNorm takes, once a batch, the step the
workers' `round_data` took, on their pooled return moments. So under BSP (every worker at the
same place of its plan) MAPPO with ``norm_adv=False`` and ``value_norm=False`` is the single
learner on the union of the workers' batches, update by update (with them, each worker
normalises its own shard's advantages, and a batch's first gradient sees the worker's own
ValueNorm step); MADDPG's actor loss sees the critic before (not after) that update's critic step. After every round the learners pull the
server's networks, optimisers and update counts, so `save`, `evaluate` and `policies` see
the trained weights; the workers' replays stay in the workers.

A failed or interrupted step (Ctrl-C) stops the workers and the server and leaves the run
as it was before the step (`MARL.step` is all-or-nothing); the next step starts fresh ones, and so
does the first step of a loaded run. Fresh workers draw new job seeds from the run's generator, start
with empty replays and without the batches their predecessors were part-way through, so the run goes
on from there, but not as one that went straight through would: the record of every step that started
workers says ``fresh_workers``. (The job log of `pbmarl.distributed.resume`, which resumes PPO exactly,
would serve MAPPO's batches, which a worker can collect again from a job's state and seeds; QMIX's and
MADDPG's replays live in the workers, as Gorila DQN's do, and a save does not hold them.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from pbmarl.distributed.executors import make_executor
from pbmarl.distributed.modes import Rounds
from pbmarl.distributed.workers import weighted_means
from pbmarl.learners.control.rounds import (
    StateProcess,
    StateServer,
    named_optimizers,
    record_steps,
    set_state,
    step_on_mean,
)
from pbmarl.learners.multiagent.group import GroupLearner
from pbmarl.learners.multiagent.mappo import MAPPO, RoundData
from pbmarl.torchutil import torch_threads

__all__ = ["MARLResult", "MARLRounds", "MARLServerProcess", "MARLWorker", "Team", "TeamGradient"]

#: what rebuilds one group's learner: (class, config, seed)
LearnerRecipe = tuple[type[GroupLearner], Any, int]


class Team:
    """The learning groups of a run seen as one learner: their modules and optimisers as ``"group/name"``."""

    def __init__(self, learners: Mapping[str, GroupLearner]) -> None:
        self.learners = dict(learners)

    def _modules(self) -> dict[str, Any]:
        return {f"{g}/{k}": m for g, lr in self.learners.items() for k, m in lr.modules().items()}

    def counters(self) -> dict[str, int]:
        """Each learner's update count, where it keeps one (QMIX's target copies follow it)."""
        return {g: int(lr.updates) for g, lr in self.learners.items() if hasattr(lr, "updates")}

    def set_counters(self, counters: Mapping[str, int]) -> None:
        for g, n in counters.items():
            self.learners[g].updates = int(n)  # type: ignore[attr-defined]

    def loaded(self) -> None:
        """The weights were overwritten in place."""
        for lr in self.learners.values():
            lr._weights_loaded()


def _rebuild_run(run_class: type, game: Any, mapping_spec: Any, learners: Mapping[str, LearnerRecipe],
                 fixed: Mapping[str, Any], seed: int, num_envs: int, *, one_gradient: bool) -> Any:
    """A single-process run of `run_class` (`MARL`, which hands its own class over, so this module does not
    import it) of the same game, mapping, learners (``workers=1``) and fixed groups."""
    from pbmarl.games.base import Game
    from pbmarl.rollout.mapping import AgentMapping

    if not isinstance(game, Game):
        from pbmarl.games.registry import game_from_spec

        game = game_from_spec(game)
    built: dict[str, GroupLearner] = {}
    for g, (cls, config, s) in learners.items():
        # a worker's replay learners take one update a `train`; MAPPO's plan reads its own epochs and minibatches
        options = dict(cls.one_gradient or {}) if one_gradient and not issubclass(cls, MAPPO) else {}
        built[g] = cls(config=replace(config, workers=1, **options), seed=int(s))
    return run_class(game, built, AgentMapping.from_spec(game, mapping_spec), fixed=dict(fixed), seed=int(seed),
                num_envs=int(num_envs))


@dataclass(frozen=True)
class TeamGradient:
    """One job's gradients, one per optimiser that stepped (``"group/name"``), each learner's report and the
    samples behind each group's gradients (the server's weights)."""

    grads: dict[str, np.ndarray]
    reports: dict[str, dict[str, float]]
    counts: dict[str, int]

    def trained(self, group: str) -> bool:
        """Whether this job took a gradient of `group`'s learner."""
        return any(k.startswith(group + "/") for k in self.grads)


@dataclass(frozen=True)
class MARLResult:
    """A MARL worker's job (see the module doc)."""

    grad: TeamGradient | None
    """None: no learner took a gradient (the job only collected)."""
    version: int
    seeds: tuple[int, ...]
    env_steps: int
    """Env steps the job collected (0 for a job that took a later gradient of its batch)."""
    returns: np.ndarray
    """``[episodes, agents]``: the returns of the episodes that ended in the job's collection."""
    losses: dict[str, dict[str, float]]
    plan: int = 1
    """Gradients the worker planned for the batch behind this job (a step consumes `workers` batches' worth)."""
    left: int = 0
    """Gradients of that batch still to come after this job (0: the worker's next job collects)."""

    @property
    def count(self) -> int:
        return 0 if self.grad is None else max(sum(self.grad.counts.values()), 1)


@dataclass
class Batch:
    """A worker's collected batch and what is left of its plan: per MAPPO group its `RoundData` and
    minibatches, per replay group the number of updates still due."""

    parts: dict[str, list[np.ndarray]]
    data: dict[str, RoundData]
    updates: dict[str, int]
    planned: int

    @property
    def left(self) -> int:
        return max([len(p) for p in self.parts.values()] + list(self.updates.values()), default=0)


class MARLWorker:
    """One worker (an ordinary object locally, a Ray actor on Ray): a single-process copy of the run
    whose optimisers record instead of stepping; it keeps one collected batch and its plan (see the module doc).

    Args:
        run_class: the run's class (`MARL`).
        game: the run's game, or what `game_for_worker` sends for it.
        mapping_spec: the run's `AgentMapping.spec()`.
        learners: ``{group: (class, config, seed)}`` of the learning groups.
        fixed: the fixed groups' policies.
        seed: seeds the worker's pool (every job reseeds collection and learners).
        num_envs: environment instances the worker steps together.
    """

    def __init__(self, run_class: type, game: Any, mapping_spec: Any, learners: Mapping[str, LearnerRecipe],
                 fixed: Mapping[str, Any], seed: int, num_envs: int) -> None:
        torch.set_num_threads(1)
        self.run = _rebuild_run(run_class, game, mapping_spec, learners, fixed, seed, num_envs, one_gradient=True)
        self.team = Team(self.run.learners)
        #: each replay learner's updates per batch (its copy here takes one a `train`)
        self.updates = {g: int(cfg.updates_per_round) for g, (cls, cfg, _) in learners.items()
                        if not issubclass(cls, MAPPO)}
        self.recorded: dict[str, np.ndarray] = {}
        record_steps(self.team, self.recorded)
        self.batch: Batch | None = None

    def _reseed(self, seeds: tuple[int, ...], env_steps: int) -> None:
        self.run.rng = np.random.default_rng(seeds[0])
        for i, lr in enumerate(self.run.learners.values()):
            lr.env_steps = int(env_steps)
            lr.rng = np.random.default_rng([seeds[0], i])
            lr.torch_gen.manual_seed((seeds[0] + i) % 2**63)

    def compute(self, state: np.ndarray, version: int, seeds: Sequence[int], env_steps: int) -> MARLResult:
        """Load `state` (at `version`); collect and plan a batch when none is in hand; the next planned gradients."""
        run, seeds = self.run, tuple(int(s) for s in seeds)
        set_state(self.team, state)
        self.team.loaded()
        self._reseed(seeds, env_steps)
        self.recorded.clear()
        counts: dict[str, int] = {}
        reports: dict[str, dict[str, float]] = {}
        with torch_threads(1):
            if self.batch is None or self.batch.left == 0:
                rows = run._collect()
                first = next(iter(rows.values()))
                steps, returns = int(first.steps), np.asarray(first.episode_returns, dtype=float)
                losses = self._start_batch(rows, int(env_steps) + steps, counts, reports)
            else:
                steps, returns = 0, np.zeros((0, run.stepped.num_players))
                losses = self._next_gradients(int(env_steps), counts)
        batch = self.batch
        assert batch is not None
        grad = None
        if self.recorded:
            trained = {g for g in run.learners if any(k.startswith(g + "/") for k in self.recorded)}
            grad = TeamGradient(dict(self.recorded), {g: reports.get(g, {}) for g in trained},
                                {g: counts.get(g, 1) for g in trained})
        return MARLResult(grad, int(version), seeds, steps, returns,
                          {g: {k: float(v) for k, v in d.items()} for g, d in losses.items()},
                          plan=batch.planned, left=batch.left)

    def _start_batch(self, rows: Mapping[str, Any], env_steps: int, counts: dict[str, int],
                     reports: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """Plan the batch `rows` and take its first gradients (the replay learners store the rows)."""
        parts: dict[str, list[np.ndarray]] = {}
        data: dict[str, RoundData] = {}
        updates: dict[str, int] = {}
        losses = {}
        for g, lr in self.run.learners.items():
            if isinstance(lr, MAPPO):
                data[g] = lr.round_data(rows[g], env_steps)
                reports[g] = lr._update_report()  # the ValueNorm's step, once a batch
                parts[g] = [part for _ in range(lr.config.epochs) for part in lr.epoch_parts(data[g], lr.rng)]
            else:
                before = set(self.recorded)
                losses[g] = lr.train(rows[g], env_steps)
                # before MADDPG's learning_starts nothing is learned: the batch ends with its collection
                updates[g] = self.updates[g] - 1 if set(self.recorded) - before else 0
        self.batch = Batch(parts, data, updates, 1)
        self.batch.planned = max(len(p) for p in parts.values()) if parts else 0
        self.batch.planned = max(self.batch.planned, max(self.updates.values(), default=1), 1)
        losses.update(self._mappo_gradients(counts))
        return losses

    def _next_gradients(self, env_steps: int, counts: dict[str, int]) -> dict[str, dict[str, float]]:
        """The next planned gradient of every group whose plan is not done (the replay learners on their replay)."""
        assert self.batch is not None
        losses = self._mappo_gradients(counts)
        for g, due in self.batch.updates.items():
            if due > 0:
                self.batch.updates[g] -= 1
                lr = self.run.learners[g]
                lr._store = _stored_already  # the batch is in the replay already
                try:
                    losses[g] = lr.train(_NO_ROWS, env_steps)
                finally:
                    del lr._store
        return losses

    def _mappo_gradients(self, counts: dict[str, int]) -> dict[str, dict[str, float]]:
        assert self.batch is not None
        losses = {}
        for g, parts in self.batch.parts.items():
            if parts:
                lr = self.run.learners[g]
                assert isinstance(lr, MAPPO)
                part, data = parts.pop(0), self.batch.data[g]
                losses[g] = lr.minibatch_step(data, part)
                counts[g] = int(data.seqs[1][part].sum()) if data.seqs is not None else len(part)
        return losses

    def ping(self) -> bool:
        return True


#: what a replay learner's `train` is handed when its batch is in its replay already
_NO_ROWS: Any = None


def _stored_already(rows: Any) -> None:
    """`_store` of a replay learner whose rows went into its replay with the job that collected them."""


class MARLServerProcess(StateProcess):
    """A copy of the learners that applies averaged per-optimiser gradients (the server actor's body).

    Args:
        run_class, game, mapping_spec, learners, fixed: rebuild the run (see `MARLWorker`).
        state: the learners' `get_state` vector; optimizers: the optimisers' ``state_dict`` by name;
        counters: the learners' update counts; version: the updates applied so far.
    """

    def __init__(self, run_class: type, game: Any, mapping_spec: Any, learners: Mapping[str, LearnerRecipe],
                 fixed: Mapping[str, Any], state: np.ndarray, optimizers: dict[str, dict[str, Any]], counters: dict[str, int],
                 version: int) -> None:
        torch.set_num_threads(1)
        run = _rebuild_run(run_class, game, mapping_spec, learners, fixed, 0, 1, one_gradient=False)
        self.team = self.owner = Team(run.learners)
        self._load(state, optimizers, version)
        self.team.set_counters(counters)

    def apply(self, grads: Sequence[TeamGradient], counts: Sequence[int], versions: Sequence[int],
              lr: float | None = None) -> np.ndarray:
        """One update: each optimiser on its gradients' weighted mean, then each trained learner's `_after_update`."""
        for name, opt in named_optimizers(self.team):
            group = name.split("/", 1)[0]
            rows = [(g.grads[name], g.counts[group]) for g in grads if name in g.grads]
            if rows:
                step_on_mean(opt, rows)
        for group, learner in self.team.learners.items():
            reports = [(g.reports[group], g.counts[group]) for g in grads if g.trained(group)]
            if reports:
                learner._after_update(reports)
        self.version += 1
        return self.weights()[1]

    def _extra_state(self) -> tuple[Any, ...]:
        return (self.team.counters(),)


class MARLServer(StateServer):
    """The run's handle on a `MARLServerProcess` (the learners' update counts come back with their state)."""

    def __init__(self, team: Team, args: tuple[Any, ...], version: int, *, backend: str) -> None:
        self.team = team
        super().__init__(team, MARLServerProcess, args, version, backend=backend, extra=(team.counters(),))

    def _pulled(self, version: int, *extra: Any) -> None:
        (counters,) = extra
        self.team.set_counters(counters)
        self.team.loaded()


class MARLRounds(Rounds):
    """A `MARL` run's rounds on the parameter server (built by `MARL.step`)."""

    def __init__(self, run: Any) -> None:
        from pbmarl.rollout.worker import game_for_worker

        opts = run.parallel
        recipes = {g: (type(lr), lr.config, lr.seed) for g, lr in run.learners.items()}
        common = (type(run), game_for_worker(run.game), run.mapping.spec(), recipes, dict(run.fixed))
        base = int(run.rng.integers(2**31))

        def args(w: int) -> tuple[Any, ...]:
            return (*common, base + w, run.config.num_envs)

        self.team = Team(run.learners)
        server = MARLServer(self.team, common, 0, backend=opts.backend)
        super().__init__(run, server, make_executor(opts.backend, args, opts.workers, MARLWorker),
                         mode=opts.sync, staleness=opts.staleness, workers=opts.workers)

    def _round(self) -> Any:
        """Rounds of `workers` jobs until they make `workers` batches' worth (each job ``1 / MARLResult.plan``)."""
        return self._planned_round()

    def _count(self, result: MARLResult) -> tuple[int, int]:
        self.learner.env_steps += result.env_steps  # the run's count (its step is all-or-nothing)
        return result.env_steps, result.env_steps

    def _job_args(self) -> tuple[Any, ...]:
        return (self.learner.env_steps,)

    def _summary(self, got: list[MARLResult],
                 staleness: list[int]) -> tuple[np.ndarray, dict[str, dict[str, float]], int, int]:
        """The returns ``[episodes, agents]`` of the step's episodes, each group's losses (means weighted by
        the samples behind each gradient), the round's largest staleness and the run's env steps."""
        returns = [r.returns for r in got if len(r.returns)]
        width = self.learner.stepped.num_players
        losses = {g: weighted_means([(r.losses[g], r.grad.counts[g]) for r in got
                                     if r.grad is not None and r.grad.trained(g)])
                  for g in self.team.learners}
        return ((np.concatenate(returns) if returns else np.zeros((0, width))), losses, int(max(staleness, default=0)),
                int(self.learner.env_steps))
