"""BSP, ASP and BAP: how the parameter server turns workers' gradients into updates (MALib's modes).

One `ParameterRounds.round()` consumes `workers` gradients (one per worker under BSP):

* **BSP**: every worker computes a gradient at the same version; the server applies their
  sample-weighted mean once (staleness always 0). With ``norm_adv=False`` this equals one
  worker on the union of the data.
* **ASP**: each gradient is applied on arrival and its worker restarts from the new weights;
  staleness (``server version - gradient's version``) is recorded, unbounded.
* **BAP** (``staleness=k``): arrived gradients wait in a queue, applied (averaged) as soon as
  the new version would leave no worker in flight more than ``k`` versions behind; a
  worker whose gradient waits stays idle until the next apply. Every applied gradient has
  staleness <= k (``k = 0`` is BSP without the barrier's fixed order).

Results without a gradient (an off-policy worker whose task has not reached
``learning_starts``: it only filled its replay) are counted and not applied; their worker
is sent the next job at once.

What the learner supplies (`ServerLearner`): the modules the server trains
(`_server_modules`), the worker class (`_worker_class`: `GradientWorker` for PPO and A2C,
`ReplayGradientWorker` for DQN), the extra arguments of each job (`_job_args`: DQN's
epsilon, whether it learns yet and its target weights) and what to do when its weights
change (`_weights_changed`).

The server is a `RemoteServer`: a Ray actor on the Ray backend (workers fetch the
weights it publishes straight from it), an in-process object on the local one. At the
end of every round (and on Ctrl-C) its weights and optimiser state are pulled into the
learner's own networks.

Env-step accounting: a gradient's data is counted into the task when its result is
consumed, exactly once.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from pbmarl.distributed.executors import Executor, make_executor
from pbmarl.distributed.server import RemoteServer
from pbmarl.distributed.workers import GradientResult, mean_stats
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories
from pbmarl.rollout.worker import game_for_worker

__all__ = ["ParameterRounds", "ServerLearner"]


class ServerLearner(Protocol):
    """What a learner hands `ParameterRounds` (PPO, A2C and DQN answer it)."""

    @property
    def config(self) -> Any:
        """A `LearnerConfig` with `ParallelOptions` and ``max_grad_norm``."""

    @property
    def game(self) -> Any: ...

    @property
    def rng(self) -> np.random.Generator: ...

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimiser the server copies (and whose state it hands back)."""

    @property
    def task(self) -> Any: ...

    def _server_modules(self) -> list[torch.nn.Module]:
        """The networks the server trains, in the order of the flat weight vectors."""

    def _worker_class(self) -> type:
        """The gradient worker class (built with ``(game, learner class, config, player, opponents)``)."""

    def _job_args(self, rounds: ParameterRounds) -> tuple[Any, ...]:
        """Extra arguments of the next job, after ``(weights, version, seeds)``."""

    def _weights_changed(self) -> None:
        """The server applied an update (policies cached by version must be refreshed)."""


class ParameterRounds:
    """The server side of a distributed PPO/A2C/DQN task (built by the learner; see the module doc)."""

    def __init__(self, learner: ServerLearner, *, executor: Executor | None = None) -> None:
        cfg = learner.config
        task = learner.task
        self.learner = learner
        self.mode, self.k, self.n = cfg.sync, cfg.staleness, cfg.workers
        self.server = RemoteServer(learner._server_modules(), learner.optimizer, backend=cfg.backend,
                                   max_grad_norm=cfg.max_grad_norm)
        spec = game_for_worker(learner.game)
        opponents = list(task.opponents)

        def args(w: int) -> tuple[Any, ...]:
            return (spec, type(learner), cfg, task.player, opponents)

        self.executor = (make_executor(cfg.backend, args, self.n, learner._worker_class()) if executor is None
                         else executor)
        self.inflight: dict[int, int] = {}  # worker -> version it computes at
        self.pending: list[GradientResult] = []
        self.idle: list[int] = []  # BAP: workers whose gradient waits in `pending`
        #: every consumed gradient: (worker, version, seeds, learner transitions, env steps)
        self.log: list[tuple[int, int, tuple[int, ...], int, int]] = []
        #: the results consumed by the last round
        self.last: list[GradientResult] = []
        #: each worker's latest result (its statistics describe its own state, e.g. its replay size)
        self.latest: dict[int, GradientResult] = {}

    @property
    def staleness(self) -> list[int]:
        """Staleness of every applied gradient, in order."""
        return self.server.staleness

    @property
    def version(self) -> int:
        """The server's weights version (updates applied this task)."""
        return self.server.version

    def _dispatch(self, w: int) -> None:
        version, weights = self.server.weights()
        seed = int(self.learner.rng.integers(2**63 - 1))
        self.executor.submit(w, weights, version, [seed], *self.learner._job_args(self))
        self.inflight[w] = version

    def _receive(self) -> tuple[int, GradientResult]:
        w, result = self.executor.next()
        del self.inflight[w]
        task = self.learner.task
        task.learner_steps += len(result.traj)
        task.env_steps += int(result.traj.steps)
        self.log.append((w, result.version, result.seeds, len(result.traj), int(result.traj.steps)))
        self.latest[w] = result
        return w, result

    def _apply(self, results: list[GradientResult]) -> None:
        grads = [(r.grad, r.count, r.version) for r in results if r.grad is not None]
        if not grads:  # data only (an off-policy worker still filling its replay)
            return
        self.server.apply([g for g, _, _ in grads], [n for _, n, _ in grads], [v for _, _, v in grads])
        self.learner._weights_changed()

    def round(self) -> tuple[Trajectories, dict[str, float]]:
        """Consume `workers` gradients under the mode; the data and its statistics."""
        try:
            out = self._round()
        except KeyboardInterrupt:  # stop the workers; the next round starts fresh ones
            self.executor.close()
            self.inflight = {}
            self.server.pull()  # the updates already applied (their data is counted) reach the learner
            raise
        self.server.pull()
        return out

    def _round(self) -> tuple[Trajectories, dict[str, float]]:
        """Consume `workers` jobs' results (one per worker under BSP)."""
        got: list[GradientResult] = []
        applied = len(self.server.staleness)
        if self.mode == "bsp":
            for w in range(self.n):
                self._dispatch(w)
            by_worker = dict(self._receive() for _ in range(self.n))
            got = [by_worker[w] for w in range(self.n)]
            self._apply(got)
        else:
            for w in range(self.n):
                if w not in self.inflight and w not in self.idle:
                    self._dispatch(w)
            if self.idle and all(self.server.version + 1 - v <= self.k for v in self.inflight.values()):
                self._apply_pending()  # after an interrupt every worker may be waiting
            for _ in range(self.n):
                w, result = self._receive()
                got.append(result)
                if self.mode == "asp" or result.grad is None:  # nothing to wait for: apply (if any), go on
                    self._apply([result])
                    self._dispatch(w)
                else:
                    self.pending.append(result)
                    self.idle.append(w)
                if self.pending and all(self.server.version + 1 - v <= self.k for v in self.inflight.values()):
                    self._apply_pending()
        self.last = got
        new = self.server.staleness[applied:]
        return concat_trajectories([r.traj for r in got]), {**mean_stats(got), "max_staleness": max(new, default=0)}

    def _apply_pending(self) -> None:
        self._apply(self.pending)
        self.pending = []
        for i in self.idle:
            self._dispatch(i)
        self.idle = []

    def close(self) -> None:
        self.executor.close()
        self.server.close()
