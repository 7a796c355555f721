"""Gradient workers: pull weights, collect whole episodes, return the gradient of the actor-critic loss.

A worker holds a private copy of the learner (same class and config, one worker), so
collection and advantage estimation are exactly the learner's own (`_collect` path,
`_prepare`). The loss is A2C's, ``-(A * log pi(a|s)) + vf_coef * value loss - ent_coef *
entropy`` averaged over the batch; for PPO it is the clipped surrogate at ratio 1, whose
gradient it equals (workers compute one gradient per batch: PPO's epochs and minibatches
are a single-process feature).

With ``norm_adv=False`` the gradient of one batch made of several seeds' data equals the
sample-weighted mean of the per-seed gradients, which is what BSP relies on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from pbmarl.distributed.server import get_vector, set_vector
from pbmarl.games.base import Game
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories

__all__ = ["GradientResult", "GradientWorker"]


@dataclass(frozen=True)
class GradientResult:
    """What a worker pushes: the gradient, the version it was computed at, the data behind it."""

    grad: np.ndarray
    version: int
    seeds: tuple[int, ...]
    traj: Trajectories
    stats: dict[str, float]

    @property
    def count(self) -> int:
        """Learner transitions the gradient averages over."""
        return len(self.traj)


class GradientWorker:
    """One gradient worker (an ordinary object locally, a Ray actor on Ray).

    Args:
        game: the game, or what `game_for_worker` sends for it.
        learner_class: `PPO`, `A2C` or a subclass.
        config: the learner's config (its `workers` is set to 1 here).
        player, opponents: the task being trained.
    """

    def __init__(self, game: Any, learner_class: type, config: Any, player: int, opponents: Sequence[Any]) -> None:
        if not isinstance(game, Game):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        self.learner = learner_class(game, config=replace(config, workers=1), seed=0)
        self.learner.start(player, list(opponents))
        self.params = list(self.learner.actor.net.parameters()) + list(self.learner.critic.parameters())

    def weights(self) -> np.ndarray:
        return get_vector(self.params)

    def compute(self, weights: np.ndarray, version: int, seeds: Sequence[int]) -> GradientResult:
        """The gradient at `weights` on the data collected with `seeds` (one collection each, concatenated)."""
        learner = self.learner
        set_vector(self.params, weights)
        learner.actor.version += 1  # new weights: pools cache policies by version
        task = learner.task
        steps = learner.config.steps_per_round
        parts = [learner.pool.collect(task.player, learner.actor, task.opponents, steps, seed=int(s)) for s in seeds]
        traj = concat_trajectories(parts)
        batch = learner._prepare(traj)
        cfg = learner.config
        logp, entropy, value = learner._evaluate(batch)
        pg_loss = -(learner._advantage(batch) * logp).mean()
        v_loss = 0.5 * (value - batch.returns).pow(2).mean()
        ent = entropy.mean()
        loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
        for p in self.params:
            p.grad = None
        loss.backward()
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])
        stats = {"loss": loss.item(), "policy_loss": pg_loss.item(), "value_loss": v_loss.item(),
                 "entropy": ent.item(), "approx_kl": 0.0, "clip_fraction": 0.0}
        return GradientResult(grad.detach().numpy().copy(), int(version), tuple(int(s) for s in seeds), traj, stats)

    def ping(self) -> bool:
        return True

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


def mean_stats(results: Sequence[GradientResult]) -> dict[str, float]:
    """Sample-weighted means of the workers' statistics (NaN where there are none)."""
    if not results:
        return {k: math.nan for k in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")}
    n = np.array([r.count for r in results], dtype=float)
    return {k: float(np.dot(n, [r.stats[k] for r in results]) / n.sum()) for k in results[0].stats}
