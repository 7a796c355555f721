"""DQN best responses: double DQN, a target network, (prioritised) replay, legal-action masking.

One round of `DQN.step()`:

1. set epsilon from a linear schedule over the budget and collect
   ``steps_per_round`` learner transitions with the epsilon-greedy policy
   (illegal actions are never taken: the policy is masked to the legal ones);
2. add them to the replay buffer;
3. once ``learning_starts`` steps are in, take ``updates_per_round`` gradient
   steps on ``r + gamma * (1 - done) * Q_target(s', argmax_{a' legal} Q(s', a'))``
   (the bootstrap never looks at an illegal next action), syncing the target
   network every ``target_update_interval`` updates.

With ``workers > 1`` (`ParallelOptions`) the round runs on a parameter server instead
(Gorila, Nair et al. 2015, with its global replay; `pbmarl.distributed.modes`): every
worker collects ``steps_per_round`` transitions, which go into the learner's replay when
its result is consumed, followed by ``updates_per_round`` jobs, each the TD gradient of one
``batch_size`` minibatch the learner draws from its replay and sends with the job (its TD
errors come back for the priorities); the gradients are applied under ``sync`` ("bsp",
"asp" or "bap"). The target network follows the server's weights every
``target_update_interval`` applied updates. The replay is the learner's, so it is saved
and undone (Ctrl-C) as single-process DQN's is, and a loaded or interrupted task resumes
exactly (`pbmarl.distributed.resume`; BAP's waiting gradients aside).

The best response handed back is an `MLPPolicy` that plays ``softmax(Q / policy_temperature)``
over the legal actions: greedy in Q, mixing only near-ties.

Example:
    >>> learner = pb.DQN(game, seed=0, budget=200, lr=1e-3)     # 30_000 to learn
    >>> br, value = learner.best_response_with_value(0, [None, pb.RandomPolicy(game, player=1)])
    >>> learner.history.plot(x="env_steps", y="return/0")  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from pbmarl.config import FLAG, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.distributed.options import ParallelOptions
from pbmarl.distributed.workers import ReplayGradientWorker
from pbmarl.learners.common.buffers import FIELDS, Batch, PrioritizedReplayBuffer, ReplayBuffer
from pbmarl.learners.common.config import LearnerConfig, LearnerRecord
from pbmarl.learners.common.nets import (
    EpsilonGreedy,
    adam,
    build_mlp,
    obs_dim,
    seeded,
    tempered_policy,
    to_tensor,
)
from pbmarl.learners.oracles.base import Learner, Task
from pbmarl.policies.neural import MLPPolicy
from pbmarl.protocols import ReplayStore
from pbmarl.rl.value_learning import masked_max_q
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.torchutil import clip_grad_norm, copy_state

LOSSES = ("huber", "mse")
#: the arrays of a replay minibatch a Gorila job carries, in order (a `Batch`'s fields)
MINIBATCH = (*FIELDS, "weight", "index")


@dataclass(frozen=True)
class DQNConfig(LearnerConfig, ParallelOptions):
    """DQN options (plus the shared ones of `LearnerConfig`, and `ParallelOptions`: workers, sync, staleness)."""

    buffer_size: int = 50_000
    """Replay capacity in transitions (oldest overwritten first)."""
    batch_size: int = 128
    """Transitions per gradient step."""
    updates_per_round: int = 32
    """Gradient steps after each round's collection."""
    learning_starts: int = 1_000
    """Learner steps collected before the first gradient step."""
    target_update_interval: int = 100
    """Gradient steps between copies of the online network into the target network."""
    epsilon_start: float = 1.0
    """Exploration rate at the start of a best response."""
    epsilon_end: float = 0.05
    """Exploration rate once the schedule has run out."""
    exploration_fraction: float = 0.5
    """Fraction of the budget over which epsilon falls linearly from start to end."""
    double: bool = True
    """Double DQN: the online network picks the next action, the target network values it."""
    prioritized: bool = False
    """Proportional prioritised replay instead of uniform."""
    priority_alpha: float = 0.6
    """How strongly priorities shape sampling (0: uniform)."""
    priority_beta: float = 0.4
    """Importance-weight correction of prioritised sampling (1: full)."""
    loss: str = "mse"
    """TD loss: ``"mse"`` or ``"huber"`` (smooth L1, which learns large payoffs slowly: worse on Leduc)."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip per update."""
    policy_temperature: float = 1e-3
    """Temperature of the exported policy ``softmax(Q / T)``; small is greedy."""

    checks: ClassVar[dict[str, Rule]] = {
        "buffer_size": (lambda v: POSITIVE_INT[0](v) and v <= 10**8, "a positive int up to 10**8 transitions"),
        "batch_size": POSITIVE_INT, "updates_per_round": NON_NEGATIVE_INT,
        "learning_starts": NON_NEGATIVE_INT, "target_update_interval": POSITIVE_INT, "epsilon_start": UNIT,
        "epsilon_end": UNIT, "exploration_fraction": UNIT, "double": FLAG, "prioritized": FLAG,
        "priority_alpha": UNIT, "priority_beta": UNIT, "loss": (lambda v: v in LOSSES, f"one of {LOSSES}"),
        "max_grad_norm": POSITIVE, "policy_temperature": POSITIVE,
    }


@dataclass(frozen=True)
class DQNRecord(LearnerRecord):
    """One DQN round: the shared statistics plus exploration and Q-values."""

    epsilon: float
    """Exploration rate used to collect this round."""
    q_mean: float
    """Mean Q of the taken actions over this round's minibatches."""
    updates: int
    """Gradient steps taken in the task so far."""
    buffer: int
    """Transitions in the replay buffer (with ``workers > 1`` too: the learner's, which the workers fill)."""
    max_staleness: int = 0
    """With ``workers > 1``: most versions a gradient applied this round lagged behind the server (0 otherwise)."""


class DQN(Learner):
    """Double DQN best responses for discrete, masked action spaces; see the module doc.

    Args:
        game: the game (or its name).
        config: a `DQNConfig`; keyword options override its fields.
        seed: seeds initialisation, replay sampling and collection.
        pool: a `RolloutPool` to collect with (default: a local one).
    """

    name = "dqn"
    config_class = DQNConfig
    record_class = DQNRecord
    config: DQNConfig
    task_attributes: ClassVar[tuple[str, ...]] = ("q_net", "target_net", "optimizer", "replay", "behaviour", "_rounds", "_rounds_saved", "_target")

    def _init_task(self, player: int, warm: dict[str, dict[str, Any]] | None) -> None:
        cfg = self.config
        in_dim, A = obs_dim(self.game), self.game.num_actions
        self.q_net = seeded(int(self.rng.integers(2**31)), lambda: build_mlp(in_dim, cfg.hidden, A))
        if warm is not None:
            self.q_net.load_state_dict(warm["q"])
        self.q_net.to(cfg.device)  # built on the CPU from the seed (the same weights on any device), then moved
        self.target_net = copy.deepcopy(self.q_net)
        self.optimizer = adam(self.q_net.parameters(), lr=cfg.lr)
        if cfg.prioritized:
            self.replay: ReplayStore = PrioritizedReplayBuffer(
                cfg.buffer_size, self.game.observation_shape, A, alpha=cfg.priority_alpha, beta=cfg.priority_beta)
        else:
            self.replay = ReplayBuffer(cfg.buffer_size, self.game.observation_shape, A)
        self.behaviour = EpsilonGreedy(self.game, self.q_net, hidden=cfg.hidden, epsilon=cfg.epsilon_start)
        self._rounds: Any = None  # workers > 1: the parameter server's rounds, made by the first round
        self._rounds_saved: dict[str, Any] | None = None  # what those rounds were, to rebuild them as they were
        self._target: tuple[int, Any] | None = None  # (server version, its weights) the target follows

    def epsilon(self, learner_steps: int, budget: int) -> float:
        """The exploration rate after `learner_steps` of a `budget`-step best response."""
        cfg = self.config
        span = cfg.exploration_fraction * budget
        frac = 1.0 if span <= 0 else min(learner_steps / span, 1.0)
        return cfg.epsilon_start + frac * (cfg.epsilon_end - cfg.epsilon_start)

    def _round(self, task: Task) -> tuple[Trajectories, dict[str, float]]:
        cfg = self.config
        eps = self.epsilon(task.learner_steps, task.budget)
        self.behaviour.epsilon = eps
        self.behaviour.version += 1  # workers cache policies by version
        if cfg.workers > 1:
            return self._server_round(task, eps)
        traj = self._collect(self.behaviour, cfg.steps_per_round)
        self.replay.add(traj)
        losses, qs = [], []
        if task.learner_steps >= cfg.learning_starts:
            for _ in range(cfg.updates_per_round):
                loss, q = self._update(task)
                losses.append(loss)
                qs.append(q)
        return traj, {
            "loss": float(np.mean(losses)) if losses else math.nan,
            "q_mean": float(np.mean(qs)) if qs else math.nan,
            "epsilon": eps, "updates": task.updates, "buffer": len(self.replay),
        }

    def _server_round(self, task: Task, eps: float) -> tuple[Trajectories, dict[str, float]]:
        """`workers` jobs on the parameter server; the target network follows the server."""
        from pbmarl.distributed.resume import server_rounds

        rounds = self._rounds = server_rounds(self, self._rounds)
        traj, stats = rounds.round()
        task.updates = rounds.version
        if self._target is not None:
            from pbmarl.distributed.server import set_vector

            set_vector(list(self.target_net.parameters()), rounds.server.host.get(self._target[1]))
        return traj, {"loss": stats["loss"], "q_mean": stats["q_mean"], "epsilon": eps, "updates": task.updates,
                      "buffer": len(self.replay), "max_staleness": stats["max_staleness"]}

    # -- the parameter server's view (`pbmarl.protocols.GradientSource`) ---------------------
    def server_modules(self) -> list[torch.nn.Module]:
        return [self.q_net]

    def worker_class(self) -> type:
        return ReplayGradientWorker

    def job_args(self, rounds: Any) -> tuple[Any, ...]:
        """(epsilon, whether the task learns yet, the target weights) of the next job."""
        cfg, task = self.config, self._require_task()
        version, weights = rounds.server.weights()
        if self._target is None or version // cfg.target_update_interval > self._target[0] // cfg.target_update_interval:
            self._target = (version, weights)
        learn = task.learner_steps >= cfg.learning_starts and len(self.replay) > 0
        batch = self.replay.sample(cfg.batch_size, self.rng) if learn else None
        minibatch = () if batch is None else tuple(getattr(batch, name) for name in MINIBATCH)
        return (self.epsilon(task.learner_steps, task.budget), learn, self._target[1], *minibatch)

    def result_received(self, result: Any) -> None:
        """A worker's result is consumed: its batch goes into the replay, its TD errors set the priorities it drew."""
        if len(result.traj):
            self.replay.add(result.traj)
        if result.td is not None:
            self.replay.update_priorities(*result.td)

    def weights_changed(self) -> None:
        self.behaviour.version += 1  # pools cache policies by version

    def minibatch_td(self, arrays: Sequence[np.ndarray]) -> tuple[Batch, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A Gorila job's minibatch (its arrays in the order of `MINIBATCH`) as a `Batch`, with `_td_loss` of it."""
        batch = Batch(**dict(zip(MINIBATCH, arrays)))
        return (batch, *self._td_loss(batch))

    def _td_loss(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(importance-weighted TD loss, Q of the taken actions, TD errors) of a replay minibatch."""
        cfg = self.config
        B, device = len(batch.action), self.device  # the minibatch goes to the device once
        obs = to_tensor(batch.obs, device=device).reshape(B, -1)
        next_obs = to_tensor(batch.next_obs, device=device).reshape(B, -1)
        action = to_tensor(batch.action, dtype=None, device=device)
        q = self.q_net(obs).gather(1, action[:, None]).squeeze(1)
        with torch.no_grad():
            next_mask = to_tensor(batch.next_legal_mask, dtype=None, device=device)
            q_next = self.target_net(next_obs)
            q_pick = self.q_net(next_obs) if cfg.double else q_next
            bootstrap = masked_max_q(q_pick, q_next, next_mask)
            live = 1.0 - to_tensor(batch.done, device=device)  # no bootstrap past the end of an episode
            target = to_tensor(batch.reward, device=device) + cfg.gamma * live * bootstrap
        td = q - target
        per_sample = F.smooth_l1_loss(q, target, reduction="none") if cfg.loss == "huber" else td.pow(2)
        return (to_tensor(batch.weight, device=device) * per_sample).mean(), q, td

    def _update(self, task: Task) -> tuple[float, float]:
        """One gradient step on a replay minibatch; returns (loss, mean Q of the taken actions)."""
        cfg = self.config
        batch = self.replay.sample(cfg.batch_size, self.rng)
        loss, q, td = self._td_loss(batch)
        self.optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(self.q_net.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.replay.update_priorities(batch.index, td.detach().cpu().numpy())
        task.updates += 1
        if task.updates % cfg.target_update_interval == 0:
            self.target_net.load_state_dict(self.q_net.state_dict())
        return float(loss.detach()), float(q.detach().mean())

    def _export(self, temperature: float | None = None) -> MLPPolicy:
        t = self.config.policy_temperature if temperature is None else temperature
        return tempered_policy(self.q_net, self.game, self.config.hidden, temperature=t)

    def _warm_state(self) -> dict[str, dict[str, Any]]:
        return {"q": copy_state(self.q_net.state_dict())}

    def _modules(self) -> dict[str, Any]:
        return {"q": self.q_net, "target": self.target_net, "optimizer": self.optimizer}

    def _buffer(self) -> ReplayStore:
        return self.replay

    def _task_extra(self) -> dict[str, Any]:
        from pbmarl.distributed.resume import rounds_state

        target = {} if self._target is None else {"target_version": self._target[0], "target_weights": self._target[1]}
        return {**target, **rounds_state(self)}

    def _set_task_extra(self, extra: dict[str, Any]) -> None:
        from pbmarl.distributed.resume import set_rounds_state

        self._target = (int(extra["target_version"]), np.asarray(extra["target_weights"])) \
            if "target_version" in extra else None
        set_rounds_state(self, extra)
