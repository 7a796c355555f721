"""The control learners (DDPG, TD3, HDDPG, SAC, Rainbow) on a parameter server.

``pb.SAC(game, workers=N, sync="bsp" | "asp" | "bap")``. One job of worker ``w``
(`pbmarl.learners.control.jobs`): load the learner's published *state* (every network, target
networks included, as one flat vector: `get_state`), play ``train_freq`` env steps on its own
environment (episodes run on across jobs) and return them for the learner's replay, then, once
``learning_starts`` env steps are in, run the algorithm's own `_update` on a minibatch the learner
drew from its replay and sent with the job, with *recording* optimisers: each ``opt.step()`` keeps
the (clipped) gradients of that optimiser's parameters instead of stepping. One job is one gradient
(``gradient_steps`` is a single-process option).

A `step()` of the learner runs rounds of `workers` jobs (`Rounds`: BSP, ASP or BAP)
until ``steps_per_round`` env steps are in.

The server (`ControlServerProcess`, a Ray actor on ``backend="ray"``) holds a copy of the
learner. It averages each optimiser's gradients over the results that carry them
(weighted by batch size), steps that optimiser, then runs the algorithm's
`_after_update` (the target networks' move) and counts the update. So an update under
BSP with one worker is the single-process update computed at the same weights, except
that SAC's actor and temperature losses see the critic before (not after) that update's
critic step. The learner pulls the state and the optimisers back after every round, so
`save`, `evaluate` and `policy` see the trained networks.

Resuming exactly: the replay is the learner's, saved and undone with it; the jobs in flight are
logged (`pbmarl.distributed.resume.JobLog`, their minibatches with them) and each worker's episode in
progress is kept as its reset seed and actions (`pbmarl.learners.control.jobs.Episode`).
`rounds_state` is what a save and a step's snapshot keep of the rounds; the next step rebuilds
them from it (`ControlRounds`): the workers replay their episodes and the logged jobs go out again,
so a loaded run, or one stepped again after a Ctrl-C, takes the steps of the run that was never
stopped. As for Gorila, BAP's gradients waiting for the next apply are not kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from pbmarl.distributed.modes import Rounds
from pbmarl.distributed.resume import JobLog, jobs_from_state, jobs_state
from pbmarl.distributed.server import RemoteServer
from pbmarl.distributed.workers import weighted_means
from pbmarl.hosting.hosted import Hosted
from pbmarl.learners.control.jobs import (
    ControlResult,
    ControlWorker,
    Episode,
    add_result,
    episodes_from_state,
    episodes_state,
    job_minibatch,
    next_episode,
)
from pbmarl.learners.control.vectors import get_state, named_optimizers, record_steps, set_state, step_on_mean
from pbmarl.rollout.worker import game_for_worker
from pbmarl.torchutil import copy_state

__all__ = ["ControlResult", "ControlRounds", "server_round", "ControlServer", "ControlServerProcess", "ControlWorker",
           "StateProcess", "StateServer", "get_state", "named_optimizers", "record_steps", "rounds_state", "set_state",
           "split_state", "array_kinds", "step_on_mean"]


class StateProcess:
    """What a hosted copy that keeps a whole learner state (networks, targets, optimisers) publishes:
    versioned state vectors for the workers, and its state with the optimisers' for `StateServer.pull`.
    Subclasses set `owner` (what answers ``_modules()``) and call `_load`."""

    owner: Any
    version: int

    def _load(self, state: np.ndarray, optimizers: dict[str, dict[str, Any]], version: int) -> None:
        set_state(self.owner, state)
        for name, opt in named_optimizers(self.owner):
            opt.load_state_dict(optimizers[name])
        self.version = int(version)
        self._published = (self.version, get_state(self.owner))

    def weights(self) -> tuple[int, np.ndarray]:
        if self._published[0] != self.version:
            self._published = (self.version, get_state(self.owner))
        return self._published

    def _extra_state(self) -> tuple[Any, ...]:
        """What `state` returns after the optimisers (default: nothing)."""
        return ()

    def state(self) -> tuple[Any, ...]:
        """``(version, state vector, optimiser state_dicts by name, *_extra_state())``, copies."""

        return (self.version, get_state(self.owner).copy(),
                {k: copy_state(opt.state_dict()) for k, opt in named_optimizers(self.owner)}, *self._extra_state())

    def ping(self) -> bool:
        return True


class ControlServerProcess(StateProcess):
    """A copy of the learner that applies averaged per-optimiser gradients (the server actor's body).

    Args:
        game, learner_class, config: build the copy (``workers=1``).
        state: the learner's `get_state` vector; optimizers: its optimisers' ``state_dict`` by name.
        version: the updates the learner has taken.
    """

    def __init__(self, game: Any, learner_class: type, config: Any, state: np.ndarray,
                 optimizers: dict[str, dict[str, Any]], version: int) -> None:
        from pbmarl.games.base import Game

        if not isinstance(game, Game):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        torch.set_num_threads(1)
        self.learner = self.owner = learner_class(game, config=replace(config, workers=1), seed=0)
        self._load(state, optimizers, version)
        self.learner.updates = self.version

    def apply(self, grads: Sequence[dict[str, np.ndarray]], counts: Sequence[int], versions: Sequence[int],
              lr: float | None = None) -> np.ndarray:
        """One update: each optimiser steps on the count-weighted mean of the gradients that carry it."""
        for name, opt in named_optimizers(self.learner):
            rows = [(g[name], n) for g, n in zip(grads, counts) if name in g]
            if rows:  # none: e.g. TD3's actor between delayed updates
                step_on_mean(opt, rows)
        self.learner._after_update()
        self.learner.updates += 1
        self.version += 1
        return self.weights()[1]


class StateServer(RemoteServer):
    """The handle on a `StateProcess`: `RemoteServer`'s versions, publishing and checks, with
    per-optimiser gradients (each optimiser keeps its own learning rate) and the whole state pulled
    back into `owner`; what the process returns beyond it goes to `_pulled`.

    Args:
        owner: what answers ``_modules()`` (the learner, or a MARL run's `Team`).
        process: the `StateProcess` class, built with ``(*args, state, optimizers, *extra, version)``.
        version: the updates applied so far.
    """

    def __init__(self, owner: Any, process: type, args: tuple[Any, ...], version: int, *, backend: str,
                 extra: tuple[Any, ...] = ()) -> None:
        self.owner = owner
        self.version = int(version)
        #: staleness of every applied gradient, in order
        self.staleness: list[int] = []
        state = get_state(owner)
        self.host = Hosted(process, (*args, state, {k: o.state_dict() for k, o in named_optimizers(owner)}, *extra,
                                     self.version), backend=backend, name="parameter server")
        self._published: tuple[int, Any] = (self.version, self.host.put(state))

    def _lr(self) -> float | None:
        return None  # each optimiser keeps its own

    def pull(self) -> int:
        """Copy the server's networks and optimisers into `owner`; returns the version."""
        version, state, optimizers, *extra = self.host.call("state")
        if version == self.version + 1:  # an `apply` interrupted after the server took the update: count it
            self.version = version
        if version != self.version:
            raise RuntimeError(f"parameter server is at version {version}, expected {self.version}")
        set_state(self.owner, state)
        for name, opt in named_optimizers(self.owner):
            opt.load_state_dict(optimizers[name])
        self._pulled(int(version), *extra)
        return int(version)

    def _pulled(self, version: int, *extra: Any) -> None:
        """After `pull` copied the state: what else follows it (counts, caches)."""


class ControlServer(StateServer):
    """The learner's handle on a `ControlServerProcess` (its `updates` follow the server's version)."""

    def __init__(self, learner: Any, spec: Any, *, backend: str) -> None:
        self.learner = learner
        super().__init__(learner, ControlServerProcess, (spec, type(learner), learner.config), int(learner.updates),
                         backend=backend)

    def _pulled(self, version: int, *extra: Any) -> None:
        self.learner.updates = version


class ControlRounds(Rounds):
    """A control learner's rounds on the parameter server (built by `server_round`), rebuilt as they were from
    `saved` (`rounds_state`: the workers' seed, their episodes and the jobs in flight; empty: fresh rounds)."""

    def __init__(self, learner: Any, saved: dict[str, Any] | None = None) -> None:
        cfg = learner.config
        saved = saved or {}
        job_rows = cfg.train_freq + int(getattr(cfg, "n_step", 1)) - 1
        if cfg.buffer_size < job_rows:
            raise ValueError(f"buffer_size={cfg.buffer_size} cannot hold one parameter-server job's transitions "
                             f"(up to {job_rows}: train_freq + n_step - 1); raise buffer_size or lower train_freq")
        spec = game_for_worker(learner.game)
        #: seeds the workers' networks (overwritten by every job): drawn once, kept with the rounds
        self.base = int(saved["base"]) if "base" in saved else int(learner.rng.integers(2**31))

        def args(w: int) -> tuple[Any, ...]:
            return (spec, type(learner), cfg, self.base + w)

        log = JobLog(cfg.backend, args, cfg.workers, ControlWorker)
        super().__init__(learner, ControlServer(learner, spec, backend=cfg.backend), log,
                         mode=cfg.sync, staleness=cfg.staleness, workers=cfg.workers)
        self._arrived: list[tuple[int, ControlResult]] = []  # BSP: this round's results so far
        #: each worker's episode in progress after its last consumed job (`pbmarl.learners.control.jobs`)
        # (a run loaded with fewer workers goes on without the others' episodes and jobs)
        self.episodes: dict[int, Episode] = {w: e for w, e in episodes_from_state(saved).items() if w < cfg.workers}
        try:
            for w, episode in self.episodes.items():
                log.call(w, "resume_episode", episode.seed, episode.actions, episode.extra)
            jobs, clock = jobs_from_state(saved)
            jobs = [job for job in jobs if job.w < cfg.workers]
            log.resubmit(jobs, clock)
        except BaseException:  # a Ctrl-C while rebuilding: no workers left behind
            self.close()
            raise
        self.inflight = {job.w: job.version for job in jobs}

    def _receive(self) -> tuple[int, Any]:
        w, result = super()._receive()
        self.episodes[w] = next_episode(self.episodes.get(w), result)
        if self.mode != "bsp":
            add_result(self.learner, result)
            return w, result
        # BSP: the round's transitions go into the replay in worker order, whatever order Ray's results came in
        self._arrived.append((w, result))
        if len(self._arrived) == self.n:
            for _, got in sorted(self._arrived, key=lambda x: x[0]):
                add_result(self.learner, got)
            self._arrived = []
        return w, result

    def _count(self, result: ControlResult) -> tuple[int, int]:
        self.learner.env_steps += result.env_steps
        self.learner.episodes += len(result.returns)
        return result.env_steps, result.env_steps

    def _job_args(self) -> tuple[Any, ...]:
        return (self.learner.env_steps, *job_minibatch(self.learner))

    def _summary(self, got: list[ControlResult], staleness: list[int]) -> tuple[list[float], dict[str, float]]:
        """The returns of the episodes that ended this round, and the losses' batch-weighted means."""
        stats = weighted_means([(r.stats, r.count) for r in got if r.count > 0])
        stats["max_staleness"] = float(max(staleness, default=0))
        return [x for r in got for x in r.returns], stats


def rounds_state(learner: Any) -> dict[str, Any]:
    """What rebuilds the learner's rounds as they are (`ControlRounds`' `saved`; {} before the first step):
    flat, JSON values and arrays side by side. BAP's gradients waiting for the next apply are not kept."""
    rounds = learner.__dict__.get("_rounds")
    if rounds is None:
        return dict(learner.__dict__.get("_rounds_saved") or {})
    return {"base": rounds.base, **jobs_state(rounds.executor), **episodes_state(rounds.episodes)}


def server_round(learner: Any) -> tuple[list[float], dict[str, list[float]]]:
    """One `ControlLearner.step` on the parameter server: rounds of `workers` jobs until ``steps_per_round`` env
    steps (or the rest of the budget); the returns of the episodes that ended and the rounds' losses. The
    server (built by the first call, or again after a Ctrl-C or a load) hands its networks, optimisers and
    ``updates`` back at the end."""
    from pbmarl.torchutil import torch_threads

    cfg = learner.config
    start = learner.env_steps
    goal = cfg.steps_per_round if learner.done else min(cfg.steps_per_round, cfg.budget - learner.env_steps)
    returns: list[float] = []
    losses: dict[str, list[float]] = {}
    with torch_threads(cfg.num_threads):
        if learner._rounds is None:
            saved, learner._rounds_saved = learner._rounds_saved, None
            learner._rounds = ControlRounds(learner, saved)
        while learner.env_steps - start < goal:
            done, stats = learner._rounds.round(pull=False)
            returns.extend(done)
            for k, v in stats.items():
                losses.setdefault(k, []).append(v)
        learner._rounds.server.pull()
    return returns, losses


def split_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """`rounds_state` for a save: its JSON values, and its arrays (kept as ``rounds.<key>`` beside the replay)."""
    arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
    return {k: v for k, v in state.items() if k not in arrays}, arrays


def array_kinds(data: dict[str, Any]) -> dict[str, str]:
    """The saved rounds' array names and dtype kinds (``rounds_arrays`` of a folder's JSON), checked."""
    kinds = data.get("rounds_arrays", {})
    if not isinstance(kinds, dict) or not all(isinstance(k, str) and v in ("f", "i", "u", "b") for k, v in kinds.items()):
        raise ValueError(f"rounds_arrays must map names to dtype kinds among 'fiub', got {kinds!r}")
    return kinds
