"""The multi-agent learners (MAPPO, IPPO, QMIX, VDN, IQL, MADDPG) on a parameter server.

``pb.MARL(game, {"team": pb.MAPPO(workers=4, sync="bsp")})``: when the learning groups'
configs ask for ``workers > 1`` (all the same `ParallelOptions`), one `MARL.step()` is one
round of `Rounds` (BSP, ASP or BAP) over `MARLWorker` jobs. One job of a worker:

1. load the published *state*: every network of every learning group, target networks
   and running statistics included, as one flat vector (`get_state` of a `Team`); each
   learner's ``env_steps`` is set to the run's count (QMIX's epsilon follows it);
2. collect ``steps_per_round`` env steps on its own environments, all groups in the same
   episodes (the fixed groups too), exactly as `MARL.step` collects;
3. run every learner's own `train` with its one-gradient options (`GroupLearner.one_gradient`:
   MAPPO one epoch of one minibatch, QMIX and MADDPG one update) and *recording*
   optimisers: each ``opt.step()`` keeps that optimiser's (clipped) gradient instead of
   stepping. Off-policy learners store the rows in the worker's own replay and draw
   their batch from it (Gorila's layout); before MADDPG's ``learning_starts`` a job only
   collects.

The server (`MARLServerProcess`, a Ray actor on ``backend="ray"``) holds a copy of the
learners. An update steps each optimiser on the mean of the gradients that carry it
(weighted by the jobs' env steps), then runs each trained learner's `_after_update` with
the workers' reports: QMIX counts the update and copies its targets every
``target_update``, MADDPG moves its targets by Polyak, MAPPO's ValueNorm takes the step the
workers' `train` took, on their pooled return moments. So BSP with one worker is the
single-process update at the same weights, except that MADDPG's actor loss sees the critic
before (not after) that update's critic step. After every round the learners pull the
server's networks, optimisers and update counts, so `save`, `evaluate` and `policies` see
the trained weights; the workers' replays stay in the workers.

A failed or interrupted step (Ctrl-C) stops the workers and the server and leaves the run
as it was before the step (`MARL.step` is all-or-nothing); the next step starts fresh ones, and so
does the first step of a loaded run. Fresh workers draw new job seeds from the run's generator and
start with empty replays, so the run goes on from there, but not as one that went straight through
would: the record of every step that started workers says ``fresh_workers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from pbmarl.distributed.control_rounds import (
    StateProcess,
    StateServer,
    named_optimizers,
    record_steps,
    set_state,
    step_on_mean,
)
from pbmarl.distributed.executors import make_executor
from pbmarl.distributed.modes import Rounds
from pbmarl.distributed.workers import weighted_means
from pbmarl.learners.group import GroupLearner
from pbmarl.learners.nets import torch_threads

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


def _rebuild_run(game: Any, mapping_spec: Any, learners: Mapping[str, LearnerRecipe],
                 fixed: Mapping[str, Any], seed: int, num_envs: int, *, one_gradient: bool) -> Any:
    """A single-process `MARL` of the same game, mapping, learners (``workers=1``) and fixed groups."""
    from pbmarl.algorithms.marl import MARL
    from pbmarl.games.base import Game
    from pbmarl.rollout.mapping import AgentMapping

    if not isinstance(game, Game):
        from pbmarl.games.registry import game_from_spec

        game = game_from_spec(game)
    built: dict[str, GroupLearner] = {}
    for g, (cls, config, s) in learners.items():
        options = dict(cls.one_gradient or {}) if one_gradient else {}
        built[g] = cls(config=replace(config, workers=1, **options), seed=int(s))
    return MARL(game, built, AgentMapping.from_spec(game, mapping_spec), fixed=dict(fixed), seed=int(seed),
                num_envs=int(num_envs))


@dataclass(frozen=True)
class TeamGradient:
    """One job's gradients, one per optimiser that stepped (``"group/name"``), and each learner's report."""

    grads: dict[str, np.ndarray]
    reports: dict[str, dict[str, float]]

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
    returns: np.ndarray
    """``[episodes, agents]``: the returns of the episodes that ended in the job's collection."""
    losses: dict[str, dict[str, float]]

    @property
    def count(self) -> int:
        return 0 if self.grad is None else self.env_steps


class MARLWorker:
    """One worker (an ordinary object locally, a Ray actor on Ray): a single-process copy of the run
    whose learners take one gradient a job and whose optimisers record instead of stepping.

    Args:
        game: the run's game, or what `game_for_worker` sends for it.
        mapping_spec: the run's `AgentMapping.spec()`.
        learners: ``{group: (class, config, seed)}`` of the learning groups.
        fixed: the fixed groups' policies.
        seed: seeds the worker's pool (every job reseeds collection and learners).
        num_envs: environment instances the worker steps together.
    """

    def __init__(self, game: Any, mapping_spec: Any, learners: Mapping[str, LearnerRecipe], fixed: Mapping[str, Any],
                 seed: int, num_envs: int) -> None:
        torch.set_num_threads(1)
        self.run = _rebuild_run(game, mapping_spec, learners, fixed, seed, num_envs, one_gradient=True)
        self.team = Team(self.run.learners)
        self.recorded: dict[str, np.ndarray] = {}
        record_steps(self.team, self.recorded)

    def compute(self, state: np.ndarray, version: int, seeds: Sequence[int], env_steps: int) -> MARLResult:
        """Load `state` (at `version`), collect one round, one recorded `train` of every learner."""
        run, seeds = self.run, tuple(int(s) for s in seeds)
        set_state(self.team, state)
        self.team.loaded()
        run.rng = np.random.default_rng(seeds[0])
        for i, lr in enumerate(run.learners.values()):
            lr.env_steps = int(env_steps)
            lr.rng = np.random.default_rng([seeds[0], i])
            lr.torch_gen.manual_seed((seeds[0] + i) % 2**63)
        rows = run._collect()
        first = next(iter(rows.values()))
        steps = int(first.steps)
        self.recorded.clear()
        with torch_threads(1):
            losses = {g: lr.train(rows[g], int(env_steps) + steps) for g, lr in run.learners.items()}
        grad = None
        if self.recorded:
            trained = {g for g in run.learners if any(k.startswith(g + "/") for k in self.recorded)}
            grad = TeamGradient(dict(self.recorded), {g: run.learners[g]._update_report() for g in trained})
        return MARLResult(grad, int(version), seeds, steps, np.asarray(first.episode_returns, dtype=float),
                          {g: {k: float(v) for k, v in d.items()} for g, d in losses.items()})

    def ping(self) -> bool:
        return True


class MARLServerProcess(StateProcess):
    """A copy of the learners that applies averaged per-optimiser gradients (the server actor's body).

    Args:
        game, mapping_spec, learners, fixed: rebuild the run (see `MARLWorker`).
        state: the learners' `get_state` vector; optimizers: the optimisers' ``state_dict`` by name;
        counters: the learners' update counts; version: the updates applied so far.
    """

    def __init__(self, game: Any, mapping_spec: Any, learners: Mapping[str, LearnerRecipe], fixed: Mapping[str, Any],
                 state: np.ndarray, optimizers: dict[str, dict[str, Any]], counters: dict[str, int],
                 version: int) -> None:
        torch.set_num_threads(1)
        run = _rebuild_run(game, mapping_spec, learners, fixed, 0, 1, one_gradient=False)
        self.team = self.owner = Team(run.learners)
        self._load(state, optimizers, version)
        self.team.set_counters(counters)

    def apply(self, grads: Sequence[TeamGradient], counts: Sequence[int], versions: Sequence[int],
              lr: float | None = None) -> np.ndarray:
        """One update: each optimiser on its gradients' weighted mean, then each trained learner's `_after_update`."""
        for name, opt in named_optimizers(self.team):
            rows = [(g.grads[name], n) for g, n in zip(grads, counts) if name in g.grads]
            if rows:
                step_on_mean(opt, rows)
        for group, learner in self.team.learners.items():
            reports = [(g.reports.get(group, {}), n) for g, n in zip(grads, counts) if g.trained(group)]
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
        common = (game_for_worker(run.game), run.mapping.spec(), recipes, dict(run.fixed))
        base = int(run.rng.integers(2**31))

        def args(w: int) -> tuple[Any, ...]:
            return (*common, base + w, run.config.num_envs)

        self.team = Team(run.learners)
        server = MARLServer(self.team, common, 0, backend=opts.backend)
        super().__init__(run, server, make_executor(opts.backend, args, opts.workers, MARLWorker),
                         mode=opts.sync, staleness=opts.staleness, workers=opts.workers)

    def _count(self, result: MARLResult) -> tuple[int, int]:
        self.learner.env_steps += result.env_steps  # the run's count (its step is all-or-nothing)
        return result.env_steps, result.env_steps

    def _job_args(self) -> tuple[Any, ...]:
        return (self.learner.env_steps,)

    def _summary(self, got: list[MARLResult],
                 staleness: list[int]) -> tuple[np.ndarray, dict[str, dict[str, float]], int, int]:
        """The returns ``[episodes, agents]`` of the round's episodes, each group's losses (means weighted by
        the env steps of the jobs that trained it), the round's largest staleness and the run's env steps."""
        returns = [r.returns for r in got if len(r.returns)]
        width = self.learner.stepped.num_players
        losses = {g: weighted_means([(r.losses[g], r.env_steps) for r in got if r.grad is not None and r.grad.trained(g)])
                  for g in self.team.learners}
        return ((np.concatenate(returns) if returns else np.zeros((0, width))), losses, int(max(staleness, default=0)),
                int(self.learner.env_steps))
