"""IMPALA (Espeholt et al. 2018): actors roll out with stale weights, one learner corrects with V-trace.

Each of `actors` actors holds a copy of the policy, steps `num_envs` environments at
once (one batched forward pass per step: batched inference) and returns whole
episodes with the behaviour probabilities ``mu(a|x)``. The learner takes one gradient
step per actor batch on

    -rho_pg * (r + gamma v_{s+1} - V(x)) * log pi(a|x) + vf_coef * 0.5 (V(x) - v_s)^2 - ent_coef * H

with the V-trace targets ``v_s`` of `pbmarl.rl.vtrace`, then sends that actor the
newest weights. Under the local backend actors come back in a simulated order in which
actor ``i`` is ``1 + i`` times slower than a fast one, so their data is really stale;
`staleness` records by how many versions.

Between steps every actor is busy with its next batch; those jobs are kept
(`pbmarl.distributed.resume`), so an interrupted step or a loaded learner hands them out again
and goes on exactly as it would have.

Example:
    >>> with pb.IMPALA("gym:CartPole-v1", seed=0, actors=4) as learner:  # doctest: +SKIP
    ...     records = learner.run(10)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import POSITIVE, POSITIVE_INT, Rule
from pbmarl.distributed.options import ACTORS_NOT_WORKERS
from pbmarl.distributed.resume import JobLog, jobs_from_state, jobs_state
from pbmarl.distributed.workers import GradientWorker
from pbmarl.learners.common.nets import to_tensor
from pbmarl.learners.oracles.a2c import A2C, A2CConfig, A2CRecord
from pbmarl.learners.oracles.base import Task
from pbmarl.rl.vtrace import vtrace
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories
from pbmarl.rollout.worker import game_for_worker

__all__ = ["IMPALA", "IMPALAConfig", "IMPALARecord", "RolloutActor"]


@dataclass(frozen=True)
class IMPALAConfig(A2CConfig):
    """IMPALA options: A2C's plus the actors and V-trace's truncation levels."""

    actors: int = 2
    """Rollout actors (each steps `num_envs` environments with batched inference)."""
    num_envs: int = 8
    """Environments each actor steps together."""
    rho_bar: float = 1.0
    """Truncation of the importance weight in V-trace's temporal differences and policy gradient."""
    c_bar: float = 1.0
    """Truncation of V-trace's trace coefficients."""

    checks: ClassVar[dict[str, Rule]] = {"actors": POSITIVE_INT, "rho_bar": POSITIVE, "c_bar": POSITIVE,
                                         "workers": ACTORS_NOT_WORKERS}


@dataclass(frozen=True)
class IMPALARecord(A2CRecord):
    """One IMPALA round (one batch per actor): A2C's statistics; `max_staleness` is the most versions
    any batch of the round lagged behind the learner."""


@dataclass(frozen=True)
class RolloutResult:
    """An actor's batch: the data, the weights' version it was collected with, its seeds."""

    traj: Trajectories
    version: int
    seeds: tuple[int, ...]


class RolloutActor(GradientWorker):
    """Collects whole episodes with the weights it was last sent (no gradients)."""

    def compute(self, weights: np.ndarray, version: int, seeds: Sequence[int]) -> RolloutResult:  # type: ignore[override]
        from pbmarl.distributed.server import set_vector

        learner = self.learner
        set_vector(self.params, weights)
        learner.actor.version += 1
        task = learner.task
        parts = [learner.pool.collect(task.player, learner.actor, task.opponents, learner.config.steps_per_round,
                                      seed=int(s)) for s in seeds]
        return RolloutResult(concat_trajectories(parts), int(version), tuple(int(s) for s in seeds))


class ActorJobs:
    """The actors' jobs of a learner with a fleet of rollout actors (`IMPALA`, `ApeX`): it keeps ``executor``
    (a `JobLog`), ``log`` (a row a consumed batch: actor, weights version, seeds, learner transitions, env
    steps) and ``_jobs_saved`` (the jobs the actors were busy with, to hand out again after a restore or load),
    and sends actor ``i`` its next job with ``_send(i)``."""

    executor: JobLog
    log: list[tuple[int, int, tuple[int, ...], int, int]]
    _jobs_saved: dict[str, Any] | None

    def _send(self, i: int) -> None:
        raise NotImplementedError

    def _hand_out(self, actors: int) -> None:
        """The saved jobs out again, then a job to every actor without one."""
        if self._jobs_saved is not None:  # the jobs the actors were busy with, out again
            self.executor.resubmit(*jobs_from_state(self._jobs_saved))
            self._jobs_saved = None
        for i in range(actors):
            if i not in self.executor.jobs:
                self._send(i)

    def _log_rows(self) -> list[list[Any]]:
        """`log` as JSON rows (the seeds a list)."""
        return [list(row[:2]) + [list(row[2])] + list(row[3:]) for row in self.log]

    def _jobs_extra(self) -> dict[str, Any]:
        """The actors' jobs as ``jobs.*`` entries of the task's extra state."""
        jobs = self._jobs_saved if self._jobs_saved is not None else jobs_state(self.executor)
        return {f"jobs.{k}": v for k, v in jobs.items()}

    def _set_jobs_extra(self, extra: dict[str, Any]) -> None:
        """`log` and the saved jobs back from the task's extra state."""
        self.log = [(int(i), int(v), tuple(int(s) for s in seeds), int(n), int(m)) for i, v, seeds, n, m in extra["log"]]
        self._jobs_saved = {k[5:]: v for k, v in extra.items() if k.startswith("jobs.")}

    def _close_workers(self) -> None:
        executor = self.__dict__.get("executor")
        if executor is not None:
            if self.__dict__.get("_jobs_saved") is None:
                self._jobs_saved = jobs_state(executor)  # the next round hands them out again
            executor.close()

class IMPALA(ActorJobs, A2C):
    """IMPALA on one machine (local backend) or a Ray cluster (``backend="ray"``); see the module doc."""

    name = "impala"
    config_class = IMPALAConfig
    record_class = IMPALARecord  # a subclass of A2CRecord
    config: IMPALAConfig  # type: ignore[assignment]
    task_attributes = ("actor", "critic", "optimizer", "_rounds", "_rounds_saved", "executor", "params", "weights_version",
                       "_staleness", "log", "learn_seconds", "_jobs_saved")

    def _cpu_only(self) -> str | None:
        return "its actors run apart from the learner and take its weights as CPU arrays"

    def _init_task(self, player: int, warm: dict[str, dict[str, Any]] | None) -> None:
        super()._init_task(player, warm)
        cfg, task = self.config, self._require_task()
        spec, opponents = game_for_worker(self.game), list(task.opponents)

        def args(i: int) -> tuple[Any, ...]:
            return (spec, A2C, A2CConfig(hidden=cfg.hidden, gamma=cfg.gamma, num_envs=cfg.num_envs,
                                         steps_per_round=cfg.steps_per_round), task.player, opponents)

        self.executor = JobLog(cfg.backend, args, cfg.actors, RolloutActor)
        self.executor.ready()  # the actors start with the task, not inside its first round
        self.params = list(self.actor.net.parameters()) + list(self.critic.parameters())
        self.weights_version = 0
        self._staleness: list[int] = []
        #: every consumed batch: (actor, version, seeds, learner transitions, env steps)
        self.log: list[tuple[int, int, tuple[int, ...], int, int]] = []
        #: wall seconds the learner spent in V-trace updates (the server's share of the time)
        self.learn_seconds = 0.0
        self._jobs_saved: dict[str, Any] | None = None  # the actors' jobs, to hand out again (after a restore or load)

    @property
    def staleness(self) -> list[int]:
        """Versions every consumed batch lagged behind the learner, in order (this task)."""
        return list(self.__dict__.get("_staleness", []))

    def _send(self, i: int) -> None:
        from pbmarl.distributed.server import get_vector

        self.executor.submit(i, get_vector(self.params), self.weights_version, [int(self.rng.integers(2**63 - 1))])

    def _round(self, task: Task) -> tuple[Trajectories, dict[str, float]]:
        self._hand_out(self.config.actors)
        got, stats = [], []
        for _ in range(self.config.actors):
            i, result = self.executor.next()
            task.learner_steps += len(result.traj)
            task.env_steps += int(result.traj.steps)
            self._staleness.append(self.weights_version - result.version)
            self.log.append((i, result.version, result.seeds, len(result.traj), int(result.traj.steps)))
            t0 = time.perf_counter()
            stats.append(self._vtrace_step(result.traj, task))
            self.learn_seconds += time.perf_counter() - t0
            self.weights_version += 1
            self.actor.version += 1
            got.append(result)
            self._send(i)
        mean = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]}
        return concat_trajectories([r.traj for r in got]), {
            **mean, "max_staleness": max(self._staleness[-len(got):])}

    def _task_extra(self) -> dict[str, Any]:
        return {"weights_version": self.weights_version, "staleness": list(self._staleness), "log": self._log_rows(),
                "learn_seconds": self.learn_seconds, **self._jobs_extra()}

    def _set_task_extra(self, extra: dict[str, Any]) -> None:
        self.weights_version, self._staleness = int(extra["weights_version"]), [int(x) for x in extra["staleness"]]
        self.learn_seconds = float(extra["learn_seconds"])
        self._set_jobs_extra(extra)

    def _vtrace_step(self, traj: Trajectories, task: Task) -> dict[str, float]:
        cfg = self.config
        batch = self._prepare(traj)
        logp, entropy, value = self._evaluate(batch)
        T = len(traj)
        with torch.no_grad():
            next_value = self.critic(to_tensor(traj.next_obs).reshape(T, -1)).squeeze(-1).double().numpy()
        live = 1.0 - np.asarray(traj.done, dtype=float)
        log_rhos = logp.detach().double().numpy() - np.log(np.asarray(traj.action_prob, dtype=float))
        vs, adv = vtrace(log_rhos, live, traj.reward, value.detach().double().numpy(), next_value * live,
                         gamma=cfg.gamma, rho_bar=cfg.rho_bar, c_bar=cfg.c_bar)
        pg_loss = -(to_tensor(adv) * logp).mean()
        v_loss = 0.5 * (value - to_tensor(vs)).pow(2).mean()
        ent = entropy.mean()
        loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
        self._gradient_step(loss)
        task.updates += 1
        return {"loss": loss.item(), "policy_loss": pg_loss.item(), "value_loss": v_loss.item(), "entropy": ent.item()}

    def node_ids(self) -> list[str]:
        """The Ray node of every actor (Ray backend only)."""
        return self.executor.node_ids()
