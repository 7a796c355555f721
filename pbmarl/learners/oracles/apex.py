"""Ape-X DQN (Horgan et al. 2018): many epsilon-greedy actors, one prioritised replay, one learner.

Actor ``i`` of ``N`` explores with its own fixed rate (the paper's schedule)

    eps_i = eps ** (1 + alpha * i / (N - 1))        (eps = 0.4, alpha = 7; eps_0 = eps when N = 1)

and plays the weights the learner last *published*. The learner adds every actor batch to
one proportional prioritised replay (new transitions enter at the highest priority),
takes `updates_per_round` double-DQN steps per round (`DQN._update`, priorities refreshed
from the TD errors) and publishes its weights every `publish_interval` updates. Actors
run locally (in-process, simulated arrival order) or as Ray actors (``backend="ray"``);
the replay is then a Ray actor too (`pbmarl.distributed.replay`; in-process on the local
backend, the same code), which the learner fills and samples without holding the data; it
fetches its minibatches in groups of `replay_prefetch` (one round trip each, the next group
drawn while the learner trains on the one before, as the paper's learner prefetches), and its
priority updates travel with those requests.

Between steps every actor is busy with its next batch; those jobs are kept
(`pbmarl.distributed.resume`), so an interrupted step or a loaded learner hands them out again
and goes on exactly as it would have. Ape-X plays discrete actions (a Box game is refused:
`pb.learners.ApeXDDPG` is its continuous counterpart).

Example:
    >>> learner = pb.ApeX("gym:CartPole-v1", actors=4)
    >>> [round(e, 4) for e in learner.actor_epsilons]   # 0.4, 0.4 ** (1 + 7/3), ...
    [0.4, 0.0472, 0.0056, 0.0007]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from pbmarl.config import POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.distributed.options import ACTORS_NOT_WORKERS, BACKENDS
from pbmarl.distributed.replay import RemoteReplay
from pbmarl.distributed.resume import JobLog
from pbmarl.distributed.server import get_vector, set_vector
from pbmarl.games.base import Game
from pbmarl.learners.common.nets import EpsilonGreedy
from pbmarl.learners.oracles.base import Task
from pbmarl.learners.oracles.dqn import DQN, DQNConfig
from pbmarl.learners.oracles.impala import ActorJobs, RolloutResult
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories
from pbmarl.rollout.worker import game_for_worker

__all__ = ["ApeX", "ApeXConfig", "apex_epsilons"]


def apex_epsilons(n: int, eps: float = 0.4, alpha: float = 7.0) -> list[float]:
    """The per-actor exploration rates ``eps ** (1 + alpha * i / (n - 1))`` (just ``[eps]`` for one actor).

    `eps` is a probability (in [0, 1]: ``eps=2`` would give rates up to 256) and `alpha` a finite number >= 0.
    """
    from pbmarl.config import check_int, check_real

    n = check_int("n", n, low=1)  # the number of actors
    eps = check_real("eps (an exploration probability)", eps, low=0, high=1)
    alpha = check_real("alpha", alpha, low=0)
    if n == 1:
        return [eps]
    return [float(eps ** (1.0 + alpha * i / (n - 1))) for i in range(n)]


@dataclass(frozen=True)
class ApeXConfig(DQNConfig):
    """Ape-X options: DQN's (prioritised replay on by default) plus the actors'."""

    actors: int = 4
    """Epsilon-greedy actors."""
    apex_epsilon: float = 0.4
    """Base rate ``eps`` of the actors' schedule."""
    apex_alpha: float = 7.0
    """Exponent spread ``alpha`` of the actors' schedule."""
    publish_interval: int = 8
    """Learner updates between weight publications to the actors."""
    prioritized: bool = True
    """Central proportional prioritised replay (Ape-X's)."""
    num_envs: int = 8
    """Environments each actor steps together."""
    backend: str = "local"
    """"local" (in-process actors) or "ray" (Ray actors)."""
    replay_prefetch: int = 8
    """Minibatches the learner fetches from the central replay per round trip (Ape-X's learner prefetches):
    the next group is requested when one is handed out, so it is drawn while the learner trains, at the
    priorities left by the updates up to the group before. On Ray it saves a round trip to the replay
    actor per update and the learner rarely waits for one; both backends draw the same groups."""
    updates_per_step: float | None = None
    """Learner updates per learner transition the round brought in (None: `updates_per_round` a round).
    Actors return whole episodes, so a round's data grows with episode length (CartPole: up to
    ``num_envs * 500`` steps an actor); a ratio keeps the updates per sample fixed as it does."""

    checks: ClassVar[dict[str, Rule]] = {
        "actors": POSITIVE_INT, "replay_prefetch": POSITIVE_INT, "apex_epsilon": UNIT, "apex_alpha": POSITIVE, "publish_interval": POSITIVE_INT,
        "backend": (lambda v: v in BACKENDS, f"one of {BACKENDS}"),
        "workers": ACTORS_NOT_WORKERS,
        "updates_per_step": (lambda v: v is None or POSITIVE[0](v), "None or a positive number"),
    }


class ApeXActor:
    """Collects with a fixed epsilon and the weights it was last sent."""

    def __init__(self, game: Any, config: DQNConfig, player: int, opponents: Sequence[Any], epsilon: float) -> None:
        if not isinstance(game, Game):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        self.learner = DQN(game, config=config, seed=0)
        self.learner.start(player, list(opponents))
        self.epsilon = float(epsilon)
        self.behaviour = EpsilonGreedy(game, self.learner.q_net, hidden=config.hidden, epsilon=self.epsilon)

    def compute(self, weights: np.ndarray, version: int, seeds: Sequence[int]) -> RolloutResult:
        learner = self.learner
        set_vector(list(learner.q_net.parameters()), weights)
        self.behaviour.version += 1
        task = learner.task
        assert task is not None
        parts = [learner.pool.collect(task.player, self.behaviour, task.opponents, learner.config.steps_per_round,
                                      seed=int(s)) for s in seeds]
        return RolloutResult(concat_trajectories(parts), int(version), tuple(int(s) for s in seeds))

    def ping(self) -> bool:
        return True

    def node_id(self) -> str:
        from pbmarl.hosting.ray import node_id

        return node_id()


class ApeX(ActorJobs, DQN):
    """Ape-X DQN; see the module doc."""

    name = "apex"
    config_class = ApeXConfig
    config: ApeXConfig
    task_attributes = DQN.task_attributes + ("executor", "published", "log", "last", "_owed", "_jobs_saved")

    def _check_game(self) -> None:
        from gymnasium import spaces

        space = self.game.action_space(0)
        if not isinstance(space, spaces.Discrete):
            raise ValueError(f"ApeX is Ape-X DQN: it plays discrete actions, and {self.game.name!r} has "
                             f"{type(space).__name__} actions; use pb.learners.ApeXDDPG (Ape-X with a DDPG learner) there")

    @property
    def actor_epsilons(self) -> list[float]:
        """Each actor's exploration rate."""
        cfg = self.config
        return apex_epsilons(cfg.actors, cfg.apex_epsilon, cfg.apex_alpha)

    def _cpu_only(self) -> str | None:
        return "its actors run apart from the learner and take its weights as CPU arrays"

    def _init_task(self, player: int, warm: dict[str, dict[str, Any]] | None) -> None:
        super()._init_task(player, warm)
        cfg, task = self.config, self._require_task()
        spec, opponents, eps = game_for_worker(self.game), list(task.opponents), self.actor_epsilons
        actor_cfg = replace(DQNConfig(), hidden=cfg.hidden, num_envs=cfg.num_envs, steps_per_round=cfg.steps_per_round,
                            buffer_size=1)

        def args(i: int) -> tuple[Any, ...]:
            return (spec, actor_cfg, task.player, opponents, eps[i])

        self.executor = JobLog(cfg.backend, args, cfg.actors, ApeXActor)
        central = RemoteReplay(self.replay, backend=cfg.backend, prefetch=cfg.replay_prefetch)
        self.replay = central  # the central replay
        self.executor.ready()  # the actors and the replay start with the task, not inside its first round
        central.host.ready()
        self.published = (0, get_vector(list(self.q_net.parameters())))
        #: every consumed batch: (actor, weights version, seeds, learner transitions, env steps)
        self.log: list[tuple[int, int, tuple[int, ...], int, int]] = []
        #: the batches consumed by the last round, with their actor
        self.last: list[tuple[int, RolloutResult]] = []
        self._owed = 0.0  # updates_per_step: the fraction of an update carried to the next round
        self._jobs_saved: dict[str, Any] | None = None  # the actors' jobs, to hand out again (after a restore or load)

    def _send(self, i: int) -> None:
        version, weights = self.published
        self.executor.submit(i, weights, version, [int(self.rng.integers(2**63 - 1))])

    def _round(self, task: Task) -> tuple[Trajectories, dict[str, float]]:
        cfg = self.config
        self._hand_out(cfg.actors)
        self.last = []
        for _ in range(cfg.actors):
            i, result = self.executor.next()
            task.learner_steps += len(result.traj)
            task.env_steps += int(result.traj.steps)
            self.log.append((i, result.version, result.seeds, len(result.traj), int(result.traj.steps)))
            self.replay.add(result.traj)
            self.last.append((i, result))
            self._send(i)
        losses, qs = [], []
        if task.learner_steps >= cfg.learning_starts:
            updates = cfg.updates_per_round
            if cfg.updates_per_step is not None:
                self._owed += cfg.updates_per_step * sum(len(r.traj) for _, r in self.last)
                updates, self._owed = int(self._owed), self._owed - int(self._owed)
            if isinstance(self.replay, RemoteReplay):
                self.replay.expect(updates)  # fetched from the replay in groups of `replay_prefetch`
            for _ in range(updates):
                loss, q = self._update(task)
                losses.append(loss)
                qs.append(q)
                if task.updates % cfg.publish_interval == 0:
                    self.published = (self.published[0] + 1, get_vector(list(self.q_net.parameters())))
        return concat_trajectories([r.traj for _, r in self.last]), {
            "loss": float(np.mean(losses)) if losses else float("nan"),
            "q_mean": float(np.mean(qs)) if qs else float("nan"),
            "epsilon": float(np.mean(self.actor_epsilons)), "updates": task.updates, "buffer": len(self.replay),
        }

    def _task_extra(self) -> dict[str, Any]:
        return {"published_version": self.published[0], "published_weights": self.published[1], "owed": self._owed,
                "log": self._log_rows(), **self._jobs_extra()}

    def _set_task_extra(self, extra: dict[str, Any]) -> None:
        self.published = (int(extra["published_version"]), np.asarray(extra["published_weights"]))
        self._owed = float(extra["owed"])
        self.last = []
        self._set_jobs_extra(extra)

    def _end_task(self) -> None:
        replay = self.__dict__.get("replay")
        if isinstance(replay, RemoteReplay):
            replay.close()
        super()._end_task()
