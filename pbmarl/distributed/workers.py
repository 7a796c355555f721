"""Gradient workers: pull weights, collect whole episodes, return gradients of the actor-critic loss.

A worker holds a private copy of the learner (same class and config, one worker), so
collection and advantage estimation are exactly the learner's own (`_collect` path,
`_prepare`). A job is one gradient. The first job of a batch collects it (with the job's
weights and seed) and plans its minibatches; every job returns the gradient of the next
planned minibatch at the weights it was sent:

* **A2C**: one minibatch, the whole batch: ``-(A * log pi(a|s)) + vf_coef * value loss -
  ent_coef * entropy`` averaged over it.
* **PPO**: ``epochs`` shuffled passes of ``minibatches`` shards of the worker's batch (with
  ``minibatch_size``: shards of ``minibatch_size / workers`` samples), each the clipped
  surrogate against the batch's behaviour probabilities. Under BSP every worker is at the
  same shard of its plan, so one server update is PPO's minibatch step on the union of the
  workers' shards: the learner on the combined batch, with minibatches that take an equal
  share of each worker's data. (Before, a worker returned one gradient per batch and PPO
  took a single step where it takes ``epochs * minibatches``: it did not learn.) With
  ``norm_adv`` the advantages are normalised per shard, not over the union; with
  ``target_kl`` each worker stops its own epochs on its own shard's KL.

With ``norm_adv=False`` the gradient of one minibatch made of several workers' shards equals
the sample-weighted mean of the per-shard gradients, which is what BSP relies on.

`ReplayGradientWorker` is DQN's (Gorila, Nair et al. 2015, with the paper's global replay): the
replay is the learner's. A job that starts a batch collects ``steps_per_round`` with the
epsilon-greedy weights and returns it, and the learner adds it to its replay when it consumes the
result; every job returns the TD-loss gradient of one minibatch that the learner drew from its
replay and sent with the job (or no gradient while the task is before ``learning_starts``), with
the minibatch's TD errors for the replay's priorities. Like PPO's minibatches, a collected batch is
followed by ``updates_per_round`` such gradients (before, one: BSP took one update where the
learner takes 32, and two workers did not learn). The target network is whatever weights the
learner sends with the job: the server's weights as of the last multiple of
``target_update_interval`` updates. The worker keeps no data a step needs back (only how many
gradients its batch still owes, which `resume_batch` puts back), so the learner's replay is saved
and undone as single-process DQN's is. (Before, each worker kept its own replay, which a loaded or
interrupted task refilled from scratch.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch

from pbmarl.distributed.server import get_vector, set_vector
from pbmarl.games.base import Game
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories

__all__ = ["GradientResult", "GradientWorker", "ReplayGradientWorker", "empty_like", "mean_stats", "weighted_means"]


@dataclass(frozen=True)
class GradientResult:
    """What a worker pushes: the gradient, the version it was computed at, the data behind it."""

    grad: np.ndarray | None
    """The flat gradient; None when the job only collected (nothing to apply)."""
    version: int
    seeds: tuple[int, ...]
    traj: Trajectories
    """The data the job collected (counted into the task when the result is consumed)."""
    stats: dict[str, float]
    batch: int | None = None
    """Samples the gradient averages over when they are not `traj` (a replay or PPO minibatch)."""
    plan: int = 1
    """Gradients the worker planned for the batch behind this one (a learner's step consumes `workers` batches' worth)."""
    left: int = 0
    """Gradients of that batch still to come after this one (0: the worker's next job collects)."""
    td: tuple[np.ndarray, np.ndarray] | None = None
    """A replay minibatch's (slots, TD errors), for the learner's priorities (DQN's jobs)."""

    @property
    def count(self) -> int:
        """Samples the gradient averages over (0 without a gradient)."""
        if self.grad is None:
            return 0
        return len(self.traj) if self.batch is None else self.batch


class GradientWorker:
    """One gradient worker (an ordinary object locally, a Ray actor on Ray).

    Args:
        game: the game, or what `game_for_worker` sends for it.
        learner_class: a `pbmarl.protocols.GradientSource` class (`PPO`, `A2C` or a subclass).
        config: the learner's config (its `workers` is set to 1 here).
        player, opponents: the task being trained.
    """

    def __init__(self, game: Any, learner_class: type, config: Any, player: int, opponents: Sequence[Any]) -> None:
        if not isinstance(game, Game):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        self.learner = learner_class(game, config=replace(config, workers=1), seed=0)
        self.learner.start(player, list(opponents))
        self.params = [p for m in self.learner.server_modules() for p in m.parameters()]
        self.workers = int(config.workers)
        #: the collected batch (a `RolloutBatch`) and what is left of its plan: (minibatch index, ends an epoch)
        self.traj: Trajectories | None = None
        self.batch: Any = None
        self.plan: list[tuple[np.ndarray, bool]] = []
        self.planned = 0

    def weights(self) -> np.ndarray:
        return get_vector(self.params)

    def compute(self, weights: np.ndarray, version: int, seeds: Sequence[int]) -> GradientResult:
        """The gradient at `weights` of the next minibatch of the worker's plan (see the module doc).

        A job that starts a batch collects it with `weights` (one collection per seed, concatenated)
        and returns it as `traj`; the other jobs return an empty `traj`.
        """
        learner = self.learner
        set_vector(self.params, weights)
        learner.actor.version += 1  # new weights: pools cache policies by version
        if self.plan and self.traj is not None:
            traj = empty_like(self.traj)
        else:
            traj = self._start_batch(seeds)
        index, epoch_end = self.plan.pop(0)
        loss, stats = self._loss(self.batch.take(index))
        if epoch_end and learner.stop_early(stats):
            self.plan = []  # PPO's early stop (target_kl), on this worker's shard
        return GradientResult(self._gradient(loss), int(version), tuple(int(s) for s in seeds), traj, stats,
                              batch=len(index), plan=self.planned, left=len(self.plan))

    def _start_batch(self, seeds: Sequence[int]) -> Trajectories:
        """Collect a batch at the weights loaded (one collection per seed) and plan its minibatches."""
        learner = self.learner
        task, steps = learner.task, learner.config.steps_per_round
        parts = [learner.pool.collect(task.player, learner.actor, task.opponents, steps, seed=int(s)) for s in seeds]
        traj = self.traj = concat_trajectories(parts)
        self.batch = learner._prepare(traj)
        self.plan = self._plan(len(self.batch), np.random.default_rng(int(seeds[0])))
        self.planned = len(self.plan)
        return traj

    def resume_batch(self, weights: np.ndarray, seeds: Sequence[int], consumed: int) -> None:
        """Be again where this worker was `consumed` gradients into the batch that the job ``(weights, seeds)``
        collected: collect it again (a job's collection depends only on its weights and seeds), plan it, and drop
        the minibatches already taken. What a restored or loaded learner calls before its jobs in flight go out again."""
        set_vector(self.params, weights)
        self.learner.actor.version += 1
        self._start_batch(seeds)
        del self.plan[:int(consumed)]

    def _plan(self, size: int, rng: np.random.Generator) -> list[tuple[np.ndarray, bool]]:
        """The minibatches of a batch of `size` samples (the learner's `minibatch_plan`, for `workers` workers)."""
        return self.learner.minibatch_plan(size, self.workers, rng)

    def _loss(self, mb: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The learner's loss on minibatch `mb` at the current weights (its `gradient_loss`)."""
        return self.learner.gradient_loss(mb)

    def _gradient(self, loss: torch.Tensor) -> np.ndarray:
        """The flat gradient of `loss` over `params` (zeros where it does not reach)."""
        for p in self.params:
            p.grad = None
        loss.backward()
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])
        return grad.detach().numpy().copy()

    def ping(self) -> bool:
        return True

    def node_id(self) -> str:
        from pbmarl.hosting.ray import node_id

        return node_id()


class ReplayGradientWorker(GradientWorker):
    """A DQN gradient worker: collects into the learner's replay, takes gradients of its minibatches (see the module doc)."""

    def __init__(self, game: Any, learner_class: type, config: Any, player: int, opponents: Sequence[Any]) -> None:
        super().__init__(game, learner_class, config, player, opponents)
        self.target_params = list(self.learner.target_net.parameters())
        self.pending = 0  # gradients still due on the batch collected last

    def compute(self, weights: np.ndarray, version: int, seeds: Sequence[int], epsilon: float = 0.0,
                learn: bool = True, target: np.ndarray | None = None, *minibatch: np.ndarray) -> GradientResult:
        """The TD gradient of `minibatch` (drawn by the learner from its replay), after collecting when a batch is due.

        A job that starts a batch collects ``steps_per_round`` with epsilon-greedy `weights` (one
        collection per seed) and returns it as `traj`, for the learner's replay; the batch is
        followed by ``updates_per_round`` gradients (at least one), as the single-process learner
        takes that many updates a round. `minibatch` is a replay minibatch's arrays in the order the
        learner's `minibatch_td` reads them (DQN's `MINIBATCH`); the result carries its TD errors (`td`) for
        the replay's priorities.
        `target` (default: `weights`) is the target network. Without `learn` (or a
        minibatch) the job only collects.
        """
        learner = self.learner
        set_vector(self.params, weights)
        set_vector(self.target_params, weights if target is None else target)
        learner.behaviour.epsilon = float(epsilon)
        learner.behaviour.version += 1  # new weights: pools cache policies by version
        seeds = tuple(int(s) for s in seeds)
        learn = bool(learn) and len(minibatch) > 0
        if self.pending > 0 and learn and self.traj is not None:
            traj = empty_like(self.traj)
        else:
            traj = self._collect(seeds)
            self.pending = max(int(learner.config.updates_per_round), 1)
        stats = {"loss": math.nan, "q_mean": math.nan}
        if not learn:
            self.pending = 0
            return GradientResult(None, int(version), seeds, traj, stats)
        self.pending -= 1
        batch, loss, q, td = learner.minibatch_td(minibatch)
        grad = self._gradient(loss)
        stats.update(loss=float(loss.detach()), q_mean=float(q.detach().mean()))
        plan = max(int(learner.config.updates_per_round), 1)
        return GradientResult(grad, int(version), seeds, traj, stats, batch=len(batch.action), plan=plan,
                              left=self.pending, td=(np.asarray(batch.index), td.detach().cpu().numpy()))

    def _collect(self, seeds: Sequence[int]) -> Trajectories:
        """One batch with the epsilon-greedy policy loaded (one collection per seed)."""
        learner = self.learner
        task, steps = learner.task, learner.config.steps_per_round
        parts = [learner.pool.collect(task.player, learner.behaviour, task.opponents, steps, seed=int(s)) for s in seeds]
        self.traj = concat_trajectories(parts)
        return self.traj

    def resume_batch(self, weights: np.ndarray, seeds: Sequence[int], consumed: int) -> None:
        """Be again `consumed` gradients into the batch that the job ``(weights, seeds)`` collected: the gradients
        still due on it (its data is in the learner's replay already; collected again only for its shape)."""
        set_vector(self.params, weights)
        self.learner.behaviour.version += 1
        self._collect(seeds)
        self.pending = max(int(self.learner.config.updates_per_round), 1) - int(consumed)


def empty_like(traj: Trajectories) -> Trajectories:
    """`traj` with no transitions, episodes or steps (what a job that did not collect returns)."""
    empty: dict[str, Any] = {f.name: v[:0] for f in fields(traj) if isinstance(v := getattr(traj, f.name), np.ndarray)}
    return replace(traj, **empty, steps=0)


def weighted_means(rows: Sequence[tuple[Mapping[str, float], int]]) -> dict[str, float]:
    """Per key, the count-weighted mean over the rows ``(stats, count)`` that carry it (keys sorted)."""
    out = {}
    for k in sorted({k for stats, _ in rows for k in stats}):
        have = [(stats[k], n) for stats, n in rows if k in stats]
        out[k] = float(np.dot([v for v, _ in have], [n for _, n in have]) / sum(n for _, n in have))
    return out


def mean_stats(results: Sequence[GradientResult]) -> dict[str, float]:
    """Sample-weighted means of the statistics of the results with a gradient (NaN where there are none)."""
    keys = list(results[0].stats) if results else [
        "loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"]
    used = [r for r in results if r.count > 0]
    if not used:
        return {k: math.nan for k in keys}
    n = np.array([r.count for r in used], dtype=float)
    return {k: float(np.dot(n, [r.stats[k] for r in used]) / n.sum()) for k in keys}
