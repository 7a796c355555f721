"""Jobs in flight between two steps, kept so that a restored or loaded learner resumes exactly.

Under ASP, BAP and in the actor-learner set-ups (IMPALA, Ape-X) workers are still computing when
a `step()` returns: their jobs were handed out with weights of an older version and seeds drawn
from the learner's generator. A step that is undone (Ctrl-C) or a learner loaded from its folder
has no workers any more; it rebuilds them and hands the same jobs out again, in the same order
and, on the local backend, at the same simulated clock, so every result comes back as before.

`JobLog` wraps an executor and keeps the jobs handed out and not yet received. `server_rounds`
builds a learner's parameter-server rounds (`pbmarl.distributed.modes`) with the server at the
learner's version and the logged jobs handed out again; `rounds_state` / `set_rounds_state` are
what the learner's `_task_extra` / `_set_task_extra` keep of them.

A job's result depends only on its arguments and on the batch its worker is taking gradients of (PPO's
minibatch plan, `pbmarl.distributed.workers`); the log keeps, per worker, the job that collected that batch
and the gradients received of it, and a rebuilt worker collects it again and skips those
(`GradientWorker.resume_batch`) before its job in flight goes out again. DQN's replay gradient
workers (Gorila, ``workers > 1``) keep no replay of their own: their batches go into the learner's
replay, saved and undone with the learner, and the minibatches a job takes gradients of travel (and are
logged) with the job, so a restored or loaded Gorila task resumes exactly too (before, its replays lived in
the workers and were refilled from scratch). One case does not resume exactly: BAP's gradients waiting for
the next apply, which are not kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbmarl.distributed.executors import LocalExecutor, Restartable, make_executor
from pbmarl.distributed.modes import ParameterRounds, Rounds
from pbmarl.distributed.server import RemoteServer
from pbmarl.rollout.worker import game_for_worker

__all__ = ["Job", "JobLog", "batches_from_state", "jobs_from_state", "jobs_state", "rounds_state", "server_rounds", "set_rounds_state"]


@dataclass(frozen=True)
class Job:
    """One job handed to worker `w`: ``compute(weights, version, seeds, *extra)``, at simulated time `clock`."""

    w: int
    weights: Any
    version: int
    seeds: tuple[int, ...]
    extra: tuple[Any, ...]
    clock: float


class JobLog(Restartable):
    """A `Restartable` executor that remembers the jobs in flight (see the module doc).

    Args:
        backend, args, num_workers, worker_class: as `pbmarl.distributed.executors.make_executor`'s.
    """

    def __init__(self, backend: str, args: Any, num_workers: int, worker_class: type) -> None:
        super().__init__(make_executor(backend, args, num_workers, worker_class).build, num_workers)
        #: worker -> its job in flight, in the order they were handed out
        self.jobs: dict[int, Job] = {}
        #: worker -> the job that collected the batch it is taking gradients of, and the gradients received of it
        self.batches: dict[int, tuple[Job, int]] = {}

    @property
    def clock(self) -> float:
        """The local executor's simulated clock (0 elsewhere)."""
        return float(self.inner.clock) if isinstance(self.inner, LocalExecutor) else 0.0

    def submit(self, w: int, weights: Any, version: int, seeds: Sequence[int], *extra: Any) -> None:
        job = Job(w, weights, int(version), tuple(int(s) for s in seeds), tuple(extra), self.clock)
        super().submit(w, weights, version, seeds, *extra)
        self.jobs.pop(w, None)
        self.jobs[w] = job

    def next(self) -> tuple[int, Any]:
        w, result = super().next()
        job = self.jobs.pop(w, None)
        # a result that leaves gradients of its batch to come (PPO's minibatch plan) keeps the batch in its worker
        plan, left = int(getattr(result, "plan", 1)), int(getattr(result, "left", 0))
        if left == 0:
            self.batches.pop(w, None)
        elif plan - left == 1 and job is not None:
            self.batches[w] = (job, 1)
        elif w in self.batches:
            self.batches[w] = (self.batches[w][0], plan - left)
        return w, result

    def resume_batches(self, batches: dict[int, tuple[Job, int]]) -> None:
        """Put each worker back `consumed` gradients into the batch its job collected (`GradientWorker.resume_batch`)."""
        for w, (job, consumed) in batches.items():
            self.call(w, "resume_batch", job.weights, job.seeds, consumed)
        self.batches = dict(batches)

    def resubmit(self, jobs: Sequence[Job], clock: float) -> None:
        """Hand `jobs` out again, each at its own clock, then set the clock to `clock`."""
        self.ready()
        for job in jobs:
            if isinstance(self.inner, LocalExecutor):
                self.inner.clock = job.clock
            self.submit(job.w, job.weights, job.version, job.seeds, *job.extra)
        if isinstance(self.inner, LocalExecutor):
            self.inner.clock = clock

    def close(self) -> None:
        """Stop the workers; the jobs in flight are forgotten (`jobs_state` keeps them first where they matter)."""
        self.jobs.clear()
        self.batches.clear()
        super().close()


def jobs_state(log: JobLog | None, saved: dict[str, Any] | None = None) -> dict[str, Any]:
    """The jobs in flight and the clock, as ``{"jobs": [...], "clock": t, "job<i>.<j>": array}`` (flat, for a save)."""
    if log is None:
        return dict(saved or {})
    out: dict[str, Any] = {"clock": log.clock, "jobs": []}
    for i, job in enumerate(log.jobs.values()):
        if not isinstance(job.weights, np.ndarray):  # a Ray reference: cannot be kept, the job is dropped
            continue
        values = (job.weights, *job.extra)
        out["jobs"].append({"w": job.w, "version": job.version, "seeds": list(job.seeds), "clock": job.clock,
                            "values": [None if isinstance(v, np.ndarray) else v for v in values]})
        out.update({f"job{i}.{j}": v for j, v in enumerate(values) if isinstance(v, np.ndarray)})
    out["batches"] = []
    for i, (job, consumed) in enumerate(log.batches.values()):
        if not isinstance(job.weights, np.ndarray):  # a Ray reference: the worker starts a new batch instead
            continue
        out["batches"].append({"w": job.w, "seeds": list(job.seeds), "consumed": int(consumed)})
        out[f"batch{i}"] = job.weights
    return out


def jobs_from_state(state: dict[str, Any]) -> tuple[list[Job], float]:
    """The jobs and clock `jobs_state` wrote."""
    jobs = []
    for i, job in enumerate(state.get("jobs", [])):
        values = [state[f"job{i}.{j}"] if v is None else v for j, v in enumerate(job["values"])]
        jobs.append(Job(int(job["w"]), values[0], int(job["version"]), tuple(int(s) for s in job["seeds"]),
                        tuple(values[1:]), float(job["clock"])))
    return jobs, float(state.get("clock", 0.0))


def batches_from_state(state: dict[str, Any]) -> dict[int, tuple[Job, int]]:
    """The workers' batches `jobs_state` wrote: worker -> (the job that collected it, gradients taken of it)."""
    out = {}
    for i, b in enumerate(state.get("batches", [])):
        job = Job(int(b["w"]), state[f"batch{i}"], 0, tuple(int(s) for s in b["seeds"]), (), 0.0)
        out[job.w] = (job, int(b["consumed"]))
    return out


# -- the parameter-server rounds of PPO, A2C, A3C and DQN with workers > 1 --------------------------
def server_rounds(learner: Any, rounds: Rounds | None) -> Rounds:
    """`rounds`, or new ones for `learner`'s task: the server at the learner's weights and version, logged jobs out again."""
    if rounds is not None:
        return rounds
    cfg, task = learner.config, learner.task
    saved = learner.__dict__.get("_rounds_saved") or {}
    learner.__dict__["_rounds_saved"] = None
    server = RemoteServer(learner.server_modules(), learner.optimizer, backend=cfg.backend,
                          max_grad_norm=cfg.max_grad_norm, version=int(saved.get("version", 0)))
    spec, opponents = game_for_worker(learner.game), list(task.opponents)

    def args(w: int) -> tuple[Any, ...]:
        return (spec, type(learner), cfg, task.player, opponents)

    log = JobLog(cfg.backend, args, cfg.workers, learner.worker_class())
    out = ParameterRounds.__new__(ParameterRounds)
    Rounds.__init__(out, learner, server, log, mode=cfg.sync, staleness=cfg.staleness, workers=cfg.workers)
    jobs, clock = jobs_from_state(saved)
    batches = batches_from_state(saved)
    if batches:
        log.resume_batches(batches)  # before the jobs in flight: they take the next gradients of these batches
    log.resubmit(jobs, clock)
    out.inflight = {job.w: job.version for job in jobs}
    return out


def rounds_state(learner: Any) -> dict[str, Any]:
    """What `set_rounds_state` needs to rebuild the learner's rounds as they are ({} without workers)."""
    rounds = learner.__dict__.get("_rounds")
    if rounds is None:
        return {f"rounds.{k}": v for k, v in (learner.__dict__.get("_rounds_saved") or {}).items()}
    # BAP's gradients waiting for the next apply (`rounds.pending`) are not kept: a BAP task resumes
    # with those workers' jobs handed out afresh (the one case that does not resume exactly)
    return {f"rounds.{k}": v for k, v in {"version": rounds.server.version, **jobs_state(rounds.executor)}.items()}


def set_rounds_state(learner: Any, extra: dict[str, Any]) -> None:
    """Keep `rounds_state`'s output for the next round, which rebuilds the rounds from it."""
    saved = {k[7:]: v for k, v in extra.items() if k.startswith("rounds.")}
    learner.__dict__["_rounds_saved"] = saved or None
