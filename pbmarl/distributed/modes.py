"""BSP, ASP and BAP: how the parameter server turns workers' gradients into updates (MALib's modes).

One `Rounds.round()` consumes `workers` gradients (one per worker under BSP); a
`ParameterRounds.round()` (a learner's step) runs as many as make `workers` batches' worth:
one round for A2C and DQN (a gradient a batch), ``epochs * minibatches`` for PPO (see
`pbmarl.distributed.workers`):

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

What the learner supplies (`pbmarl.protocols.GradientSource`): the modules the server trains
(`server_modules`), the worker class (`worker_class`: `GradientWorker` for PPO and A2C,
`ReplayGradientWorker` for DQN), the extra arguments of each job (`job_args`: DQN's
epsilon, whether it learns yet, its target weights and the minibatch it drew from its
replay), what to do when its weights change (`weights_changed`) and, optionally, with each
consumed result (`result_received`: DQN adds the batch to its replay and sets the drawn
rows' priorities); its workers' copies give the minibatch plan and the loss.

The server is a `RemoteServer`: a Ray actor on the Ray backend (workers fetch the
weights it publishes straight from it), an in-process object on the local one. At the
end of every round (and on Ctrl-C) its weights and optimiser state are pulled into the
learner's own networks.

Env-step accounting: a gradient's data is counted into the task when its result is
consumed, exactly once.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from pbmarl.distributed.executors import Executor, make_executor
from pbmarl.distributed.server import RemoteServer
from pbmarl.distributed.workers import GradientResult, mean_stats
from pbmarl.protocols import GradientSource
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories
from pbmarl.rollout.worker import game_for_worker

__all__ = ["ParameterRounds", "Rounds"]


class Rounds:
    """BSP, ASP or BAP over a server handle and an executor (see the module doc).

    Subclasses say how a consumed result is counted (`_count`), what a job's extra
    arguments are (`_job_args`), what follows an applied update (`_weights_changed`)
    and what a round returns (`_summary`). Results answer ``grad`` (None: nothing to
    apply), ``count``, ``version`` and ``seeds``.
    """

    def __init__(self, learner: Any, server: Any, executor: Executor, *, mode: str, staleness: int,
                 workers: int) -> None:
        self.learner = learner
        self.server = server
        self.executor = executor
        self.mode, self.k, self.n = mode, staleness, workers
        self.inflight: dict[int, int] = {}  # worker -> version it computes at
        self.pending: list[Any] = []
        self.idle: list[int] = []  # BAP: workers whose gradient waits in `pending`
        #: every consumed job: (worker, version, seeds, learner transitions, env steps)
        self.log: list[tuple[int, int, tuple[int, ...], int, int]] = []
        #: the results consumed by the last round
        self.last: list[Any] = []
        #: each worker's latest result (its statistics describe its own state, e.g. its replay size)
        self.latest: dict[int, Any] = {}

    def _count(self, result: Any) -> tuple[int, int]:
        """Count a consumed result into the learner; ``(learner transitions, env steps)`` it brought."""
        raise NotImplementedError

    def _job_args(self) -> tuple[Any, ...]:
        return ()

    def _weights_changed(self) -> None:
        pass

    def _summary(self, got: list[Any], staleness: list[int]) -> Any:
        raise NotImplementedError

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
        self.executor.submit(w, weights, version, [seed], *self._job_args())
        self.inflight[w] = version

    def _receive(self) -> tuple[int, Any]:
        w, result = self.executor.next()
        del self.inflight[w]
        transitions, steps = self._count(result)
        self.log.append((w, result.version, result.seeds, transitions, steps))
        self.latest[w] = result
        return w, result

    def _apply(self, results: list[Any]) -> None:
        grads = [(r.grad, r.count, r.version) for r in results if r.grad is not None]
        if not grads:  # data only (an off-policy worker still filling its replay)
            return
        self.server.apply([g for g, _, _ in grads], [n for _, n, _ in grads], [v for _, _, v in grads])
        self._weights_changed()

    def round(self, *, pull: bool = True) -> Any:
        """Consume `workers` jobs' results under the mode; what `_summary` makes of them.

        With `pull` the server's weights and optimiser state reach the learner after the
        round (always on Ctrl-C); without, the caller pulls (``server.pull()``) when it needs them.
        """
        try:
            out = self._round()
        except KeyboardInterrupt:  # stop the workers; the next round starts fresh ones
            self.executor.close()
            self.inflight = {}
            self.server.pull()  # the updates already applied (their data is counted) reach the learner
            raise
        if pull:
            self.server.pull()
        return out

    def _round(self) -> Any:
        got: list[Any] = []
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
        return self._summary(got, self.server.staleness[applied:])

    def _planned_round(self) -> Any:
        """Rounds (`_round` of this class) until their results make `workers` batches' worth, each result
        ``1 / plan`` of its batch: the round of subclasses whose jobs are one of a batch's ``plan`` updates."""
        applied = len(self.server.staleness)
        got: list[Any] = []
        while sum(Fraction(1, r.plan) for r in got) < self.n:
            Rounds._round(self)
            got += self.last
        self.last = got
        return self._summary(got, self.server.staleness[applied:])

    def _apply_pending(self) -> None:
        self._apply(self.pending)
        self.pending = []
        for i in self.idle:
            self._dispatch(i)
        self.idle = []

    def close(self) -> None:
        self.executor.close()
        self.server.close()


class ParameterRounds(Rounds):
    """The server side of a distributed PPO/A2C/DQN task (built by the learner; see the module doc)."""

    def __init__(self, learner: GradientSource, *, executor: Executor | None = None) -> None:
        cfg = learner.config
        task = learner.task
        server = RemoteServer(learner.server_modules(), learner.optimizer, backend=cfg.backend,
                              max_grad_norm=cfg.max_grad_norm)
        spec = game_for_worker(learner.game)
        opponents = list(task.opponents)

        def args(w: int) -> tuple[Any, ...]:
            return (spec, type(learner), cfg, task.player, opponents)

        if executor is None:
            executor = make_executor(cfg.backend, args, cfg.workers, learner.worker_class())
        super().__init__(learner, server, executor, mode=cfg.sync, staleness=cfg.staleness, workers=cfg.workers)

    def _round(self) -> tuple[Trajectories, dict[str, float]]:
        """Rounds of `workers` gradients until they make `workers` batches' worth (each `1 / GradientResult.plan`).

        Under BSP the workers' plans are in step (PPO: ``epochs * minibatches`` rounds, one
        update each); under ASP and BAP a fast worker may end several batches meanwhile.
        """
        return self._planned_round()

    def _count(self, result: GradientResult) -> tuple[int, int]:
        task = self.learner.task
        task.learner_steps += len(result.traj)
        task.env_steps += int(result.traj.steps)
        received = getattr(self.learner, "result_received", None)
        if received is not None:  # DQN: the batch goes into the learner's replay
            received(result)
        return len(result.traj), int(result.traj.steps)

    def _job_args(self) -> tuple[Any, ...]:
        return tuple(self.learner.job_args(self))

    def _weights_changed(self) -> None:
        self.learner.weights_changed()

    def _summary(self, got: list[GradientResult], staleness: list[int]) -> tuple[Trajectories, dict[str, float]]:
        """The round's data and its statistics."""
        return concat_trajectories([r.traj for r in got]), {**mean_stats(got), "max_staleness": max(staleness, default=0)}
