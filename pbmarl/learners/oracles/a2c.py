"""A2C best responses: advantage actor-critic (synchronous policy gradient) with legal-action masking.

One round of `A2C.step()` collects ``steps_per_round`` learner transitions with
the current policy, computes GAE advantages (``gae_lambda = 1``: Monte-Carlo
returns minus the critic's baseline) and takes ONE Adam step on the whole batch:
``-(advantage * log pi(a|s)) + vf_coef * value loss - ent_coef * entropy``.

It is `PPO` without the ratio clipping, the epochs and the minibatches: networks,
collection, advantage estimation and export are shared with `pbmarl.learners.oracles.ppo`.

Example:
    >>> br = pb.A2C(game, seed=0, budget=200).best_response(0, pop.mixture(sigma))   # 50_000 to learn
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pbmarl.config import Rule
from pbmarl.distributed.options import ParallelOptions
from pbmarl.learners.common.config import LearnerConfig, LearnerRecord
from pbmarl.learners.oracles.base import Task
from pbmarl.learners.oracles.ppo import ACTOR_CRITIC_CHECKS, PPO, RolloutBatch


@dataclass(frozen=True)
class A2CConfig(LearnerConfig, ParallelOptions):
    """A2C options (plus the shared ones of `LearnerConfig`, and `ParallelOptions`: workers, sync, staleness)."""

    lr: float = 1e-3
    """Adam learning rate (actor and critic together)."""
    steps_per_round: int = 128
    """Learner steps per round; each round is one gradient step."""
    num_envs: int = 128
    """Game instances the default local pool steps together (a round has at least one episode per instance)."""
    gae_lambda: float = 1.0
    """GAE lambda: 1 is Monte-Carlo returns with the critic as baseline."""
    ent_coef: float = 0.1
    """Weight of the entropy bonus. High, because A2C's few noisy steps otherwise collapse the policy
    early (on Kuhn, with 0.01, 3 of 18 best responses missed the exact value by 0.18; with 0.1, none).
    The exported policy is sharpened by `policy_temperature` anyway."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip per update."""
    anneal_lr: bool = False
    """Decay the learning rate linearly over the budget (to 5% of `lr`)."""
    norm_adv: bool = True
    """Normalise advantages over the batch."""
    policy_temperature: float = 0.1
    """The policy handed back plays ``softmax(logits / T)``: 1 is the trained policy, below 1 sharpens it
    towards a best response (it drops the noise the entropy bonus leaves; measured on Leduc, about a
    quarter of the gap to the exact best-response value)."""

    checks: ClassVar[dict[str, Rule]] = ACTOR_CRITIC_CHECKS


@dataclass(frozen=True)
class A2CRecord(LearnerRecord):
    """One A2C round: the shared statistics plus the loss terms (``loss/policy``, ``loss/value``)."""

    policy_loss: float
    value_loss: float
    entropy: float
    """Mean entropy of the policy over the legal actions (nats)."""
    max_staleness: int = 0
    """With ``workers > 1``: most versions a gradient applied this round lagged behind the server (0 otherwise)."""

    LOSSES: ClassVar[dict[str, str]] = {"policy_loss": "policy", "value_loss": "value"}


class A2C(PPO):
    """A2C best responses for discrete, masked action spaces; see the module doc.

    Args:
        game: the game (or its name).
        config: an `A2CConfig`; keyword options override its fields.
        seed: seeds initialisation and collection.
        pool: a `RolloutPool` to collect with (default: a local one).
    """

    name = "a2c"
    config_class = A2CConfig
    record_class = A2CRecord

    def minibatch_plan(self, size: int, workers: int, rng: np.random.Generator) -> list[tuple[np.ndarray, bool]]:
        """One minibatch, the whole batch: A2C takes one gradient a batch."""
        return [(np.arange(size), True)]

    def _policy_loss(self, adv: torch.Tensor, logp: torch.Tensor, ratio: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The policy gradient at the weights that collected the batch (no clip)."""
        return -(adv * logp).mean(), 0.0

    def _update(self, batch: RolloutBatch, task: Task) -> dict[str, float]:
        cfg = self.config
        logp, entropy, value = self._evaluate(batch)
        pg_loss = -(self._advantage(batch) * logp).mean()
        v_loss = 0.5 * (value - batch.returns).pow(2).mean()
        ent = entropy.mean()
        loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
        self._gradient_step(loss)
        task.updates += 1
        return {"loss": loss.item(), "policy_loss": pg_loss.item(), "value_loss": v_loss.item(), "entropy": ent.item()}
