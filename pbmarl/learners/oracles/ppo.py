"""PPO best responses: clipped surrogate, GAE, value head, entropy bonus, legal-action masking.

One round of `PPO.step()`:

1. collect ``steps_per_round`` learner transitions with the current policy (an
   `MLPPolicy`, masked to the legal actions, so illegal actions are never taken);
2. value the observations with the critic and compute GAE advantages and
   returns (`pbmarl.rl.multistep.gae`);
3. ``epochs`` passes over the data in ``minibatches`` shuffled minibatches,
   each one Adam step on ``-clipped surrogate + vf_coef * value loss - ent_coef * entropy``
   (the entropy is over the legal actions only), stopping early if the
   approximate KL to the behaviour policy passes ``target_kl``.

The actor is the policy handed back (a copy, sharpened by ``policy_temperature``).
`A2C` reuses everything here but the update.

Example:
    >>> learner = pb.PPO(game, seed=0, budget=200)          # budget 50_000 to learn; 200 shows the calls
    >>> br = learner.best_response(0, pop.mixture(sigma))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import FLAG, NON_NEGATIVE, POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.distributed.options import ParallelOptions
from pbmarl.distributed.workers import GradientWorker
from pbmarl.learners.common.config import LearnerConfig, LearnerRecord
from pbmarl.learners.common.nets import (
    TensorBatch,
    adam,
    build_mlp,
    masked_logits,
    obs_dim,
    seeded,
    tempered_policy,
    to_tensor,
)
from pbmarl.learners.oracles.base import Learner, Task
from pbmarl.policies.neural import MLPPolicy
from pbmarl.rl.multistep import gae
from pbmarl.rl.policy_gradients import clipped_surrogate_loss
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.torchutil import clip_grad_norm, copy_state

#: checks of the fields PPO and A2C share
ACTOR_CRITIC_CHECKS: dict[str, Rule] = {
    "gae_lambda": UNIT, "ent_coef": NON_NEGATIVE, "vf_coef": NON_NEGATIVE, "max_grad_norm": POSITIVE, "norm_adv": FLAG,
    "policy_temperature": POSITIVE, "anneal_lr": FLAG,
}


@dataclass(frozen=True)
class PPOConfig(LearnerConfig, ParallelOptions):
    """PPO options (plus the shared ones of `LearnerConfig`, and `ParallelOptions`: workers, sync, staleness)."""

    lr: float = 3e-3
    """Adam learning rate (actor and critic together)."""
    steps_per_round: int = 1024
    """Learner steps collected per round (one PPO batch)."""
    gae_lambda: float = 1.0
    """GAE lambda: 0 is one-step TD, 1 is Monte Carlo (best measured on these short poker games)."""
    clip_coef: float = 0.2
    """Clipping range of the probability ratio."""
    epochs: int = 4
    """Passes over each round's batch."""
    minibatches: int = 4
    """Minibatches per pass (ignored when `minibatch_size` is set)."""
    minibatch_size: int | None = None
    """Samples per minibatch instead of a fixed count: a round of T samples is cut into ``ceil(T / size)``
    minibatches, so updates grow with the round. Rounds are whole episodes, so they lengthen as episodes
    do (CartPole: 8 copies of 500 steps); this keeps the updates per sample of a fixed-size rollout
    (SB3's ``batch_size``) where a fixed count would take ever fewer steps. None: `minibatches`."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip per update."""
    anneal_lr: bool = True
    """Decay the learning rate linearly over the budget (to 5% of `lr`)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    target_kl: float | None = None
    """Stop a round's epochs once the approximate KL exceeds this (None: never)."""
    policy_temperature: float = 0.1
    """The policy handed back plays ``softmax(logits / T)``: 1 is the trained policy, below 1 sharpens it
    towards a best response (it drops the noise the entropy bonus leaves; measured on Leduc, about a
    quarter of the gap to the exact best-response value)."""

    checks: ClassVar[dict[str, Rule]] = {
        **ACTOR_CRITIC_CHECKS, "clip_coef": POSITIVE, "epochs": POSITIVE_INT, "minibatches": POSITIVE_INT,
        "minibatch_size": (lambda v: v is None or POSITIVE_INT[0](v), "None or a positive int"),
        "target_kl": (lambda v: v is None or POSITIVE[0](v), "None or a positive number"),
    }


@dataclass(frozen=True)
class PPORecord(LearnerRecord):
    """One PPO round: the shared statistics plus the loss terms (``loss/policy``, ``loss/value``) and diagnostics."""

    policy_loss: float
    value_loss: float
    entropy: float
    """Mean entropy of the policy over the legal actions (nats)."""
    approx_kl: float
    """Approximate KL(behaviour || updated) at the end of the round."""
    clip_fraction: float
    """Share of samples whose ratio was clipped."""
    max_staleness: int = 0
    """With ``workers > 1``: most versions a gradient applied this round lagged behind the server (0 otherwise)."""

    LOSSES: ClassVar[dict[str, str]] = {"policy_loss": "policy", "value_loss": "value"}


@dataclass(frozen=True)
class RolloutBatch(TensorBatch):
    """A round's data as tensors, with advantages and value targets."""

    obs: torch.Tensor
    legal_mask: torch.Tensor | None
    """None where every action was legal at every step of the round (Gymnasium's games): no masking then."""
    action: torch.Tensor
    old_logp: torch.Tensor
    advantage: torch.Tensor
    returns: torch.Tensor


class PPO(Learner):
    """PPO best responses for discrete, masked action spaces; see the module doc.

    Args:
        game: the game (or its name).
        config: a `PPOConfig`; keyword options override its fields.
        seed: seeds initialisation, minibatch order and collection.
        pool: a `RolloutPool` to collect with (default: a local one).
    """

    name = "ppo"
    config_class: ClassVar[type[LearnerConfig]] = PPOConfig
    record_class: ClassVar[type[LearnerRecord]] = PPORecord
    config: PPOConfig
    task_attributes: ClassVar[tuple[str, ...]] = ("actor", "critic", "optimizer", "_rounds", "_rounds_saved")

    def _init_task(self, player: int, warm: dict[str, dict[str, Any]] | None) -> None:
        cfg = self.config
        self.actor = MLPPolicy(self.game, hidden=cfg.hidden, seed=int(self.rng.integers(2**31)))
        self.critic = seeded(int(self.rng.integers(2**31)), lambda: build_mlp(obs_dim(self.game), cfg.hidden, 1))
        if warm is not None:
            self.actor.net.load_state_dict(warm["actor"])
            self.critic.load_state_dict(warm["critic"])
        self.actor.net.to(cfg.device)  # built on the CPU from the seed (the same weights on any device), then moved
        self.critic.to(cfg.device)
        params = list(self.actor.net.parameters()) + list(self.critic.parameters())
        self.optimizer = adam(params, lr=cfg.lr, eps=1e-5)
        self._rounds: Any = None  # workers > 1: the parameter server's rounds, made by the first round
        self._rounds_saved: dict[str, Any] | None = None  # what those rounds were, to rebuild them as they were

    def _round(self, task: Task) -> tuple[Trajectories, dict[str, float]]:
        if self.config.anneal_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = self.config.lr * max(1.0 - task.learner_steps / task.budget, 0.05)
        if getattr(self.config, "workers", 1) > 1:  # a parameter server and gradient workers (pbmarl.distributed)
            from pbmarl.distributed.resume import server_rounds

            self._rounds = server_rounds(self, self._rounds)
            traj, stats = self._rounds.round()
            return traj, {k: v for k, v in stats.items() if k in self.record_class.__dataclass_fields__}
        traj = self._collect(self.actor, self.config.steps_per_round)
        stats = self._update(self._prepare(traj), task)
        self.actor.version += 1  # workers cache policies by version
        return traj, stats

    # -- the parameter server's view (`pbmarl.protocols.GradientSource`) ----------------------------
    def server_modules(self) -> list[torch.nn.Module]:
        return [self.actor.net, self.critic]

    def worker_class(self) -> type:
        return GradientWorker

    def job_args(self, rounds: Any) -> tuple[Any, ...]:
        return ()

    def weights_changed(self) -> None:
        self.actor.version += 1  # pools cache policies by version

    def minibatch_plan(self, size: int, workers: int, rng: np.random.Generator) -> list[tuple[np.ndarray, bool]]:
        """A gradient worker's minibatches of its batch of `size` samples: ``(sample index, ends an epoch)``.

        The learner on the combined batch of ~``workers * size`` samples cuts it into `minibatches` parts
        (or parts of `minibatch_size`); each worker gives every one of them its own share, `epochs` times.
        """
        cfg = self.config
        count = cfg.minibatches if cfg.minibatch_size is None else -(-workers * size // cfg.minibatch_size)
        count = min(count, size)
        return [(index, j == count - 1) for _ in range(cfg.epochs)
                for j, index in enumerate(np.array_split(rng.permutation(size), count))]

    def gradient_loss(self, mb: RolloutBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """A gradient worker's loss on minibatch `mb` at the current weights (PPO's clipped surrogate), and its statistics."""
        cfg = self.config
        logp, entropy, value = self._evaluate(mb)
        adv = self._advantage(mb)
        log_ratio = logp - mb.old_logp
        ratio = log_ratio.exp()
        pg_loss, clip_fraction = self._policy_loss(adv, logp, ratio)
        v_loss = 0.5 * (value - mb.returns).pow(2).mean()
        ent = entropy.mean()
        loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
        with torch.no_grad():
            approx_kl = float(((ratio - 1) - log_ratio).mean())
        stats = {"loss": loss.item(), "policy_loss": pg_loss.item(), "value_loss": v_loss.item(),
                 "entropy": ent.item(), "approx_kl": approx_kl, "clip_fraction": clip_fraction}
        return loss, stats

    def _policy_loss(self, adv: torch.Tensor, logp: torch.Tensor, ratio: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The policy term of `gradient_loss` and its clip fraction: PPO's clipped surrogate."""
        clip = self.config.clip_coef
        clipped = ratio.clamp(1 - clip, 1 + clip)
        pg_loss = torch.max(-adv * ratio, -adv * clipped).mean()
        return pg_loss, float(((ratio - 1).abs() > clip).float().mean())

    def stop_early(self, stats: dict[str, float]) -> bool:
        """Whether a worker stops its epochs after an epoch whose last minibatch had `stats` (``target_kl``)."""
        target_kl = getattr(self.config, "target_kl", None)
        return target_kl is not None and stats["approx_kl"] > target_kl

    def _prepare(self, traj: Trajectories) -> RolloutBatch:
        """Tensors of the round, with GAE advantages from the critic's values."""
        T, device = len(traj), self.device  # the round's batch goes to the device once; minibatches index it there
        obs = to_tensor(traj.obs, device=device).reshape(T, -1)
        with torch.no_grad():
            value = self.critic(obs).squeeze(-1).double().cpu().numpy()
            next_value = self.critic(to_tensor(traj.next_obs, device=device).reshape(T, -1)).squeeze(-1).double().cpu().numpy()
        adv, ret = gae(traj.reward, traj.done, value, next_value, gamma=self.config.gamma, lam=self.config.gae_lambda)
        legal = traj.legal_mask.reshape(T, -1)
        return RolloutBatch(obs=obs, legal_mask=None if legal.all() else to_tensor(legal, None, device=device),
                            action=to_tensor(traj.action, None, device=device),
                            old_logp=to_tensor(np.log(traj.action_prob), device=device),
                            advantage=to_tensor(adv, device=device), returns=to_tensor(ret, device=device))

    def _evaluate(self, batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-prob of the taken actions, entropy over the legal actions, value) under the current nets.
        With ``ent_coef == 0`` the entropy is only reported, so it is computed outside the graph."""
        logits = self.actor.logits(batch.obs)
        if batch.legal_mask is not None:
            logits = masked_logits(logits, batch.legal_mask)
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(1, batch.action[:, None]).squeeze(1)
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.config.ent_coef != 0):
            p_logp = logp_all.exp() * logp_all
            if batch.legal_mask is not None:  # 0 * log 0 at illegal actions: -inf * 0 would be NaN
                p_logp = torch.where(batch.legal_mask, p_logp, torch.zeros_like(p_logp))
            entropy = -p_logp.sum(dim=-1)
        return logp, entropy, self.critic(batch.obs).squeeze(-1)

    def _advantage(self, mb: RolloutBatch) -> torch.Tensor:
        adv = mb.advantage
        if self.config.norm_adv and len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return adv

    def _gradient_step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss.backward()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        clip_grad_norm(params, self.config.max_grad_norm)
        self.optimizer.step()

    def _update(self, batch: RolloutBatch, task: Task) -> dict[str, float]:
        cfg = self.config
        T = len(batch)
        keys = ("loss", "policy_loss", "value_loss", "entropy", "clip_fraction")
        sums = torch.zeros(len(keys), device=self.device)  # summed in place: one op per minibatch instead of five .item() calls
        n, approx_kl = 0, math.nan
        parts = min(cfg.minibatches if cfg.minibatch_size is None else -(-T // cfg.minibatch_size), T)
        for _ in range(cfg.epochs):
            order = self.rng.permutation(T)
            for index in np.array_split(order, parts):
                mb = batch.take(index)
                logp, entropy, value = self._evaluate(mb)
                log_ratio = logp - mb.old_logp
                ratio = log_ratio.exp()
                adv = self._advantage(mb)
                pg_loss = clipped_surrogate_loss(adv, ratio, cfg.clip_coef)
                v_loss = 0.5 * (value - mb.returns).pow(2).mean()
                ent = entropy.mean()
                loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
                self._gradient_step(loss)
                task.updates += 1
                with torch.no_grad():
                    clipped = ((ratio - 1).abs() > cfg.clip_coef).float().mean()
                    sums += torch.stack((loss, pg_loss, v_loss, ent, clipped))
                n += 1
            with torch.no_grad():  # the epoch's last minibatch: what target_kl stops on, and the record reports
                approx_kl = float(((ratio - 1) - log_ratio).mean())
            if cfg.target_kl is not None and approx_kl > cfg.target_kl:
                break
        return {**dict(zip(keys, (sums / max(n, 1)).tolist())), "approx_kl": approx_kl}

    def _export(self, temperature: float | None = None) -> MLPPolicy:
        t = self.config.policy_temperature if temperature is None else temperature
        return tempered_policy(self.actor.net, self.game, self.config.hidden, temperature=t)

    def _warm_state(self) -> dict[str, dict[str, Any]]:
        return {"actor": copy_state(self.actor.net.state_dict()), "critic": copy_state(self.critic.state_dict())}

    def _modules(self) -> dict[str, Any]:
        return {"actor": self.actor.net, "critic": self.critic, "optimizer": self.optimizer}

    def _task_extra(self) -> dict[str, Any]:
        from pbmarl.distributed.resume import rounds_state

        return rounds_state(self)

    def _set_task_extra(self, extra: dict[str, Any]) -> None:
        from pbmarl.distributed.resume import set_rounds_state

        set_rounds_state(self, extra)
