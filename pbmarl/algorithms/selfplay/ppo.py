"""`PPOSelfPlay`: PPO trained against its current self, evaluated in the last iterate.

Rudolph, Lichtlé, Mohammadpour et al., "Reevaluating Policy Gradient Methods for Imperfect-Information
Games" (ICLR 2026, arXiv 2502.08938) found well-tuned PPO in self-play a match for NFSP, PSRO, ESCHER
and R-NaD. This is that baseline: one policy, no population, the loss PPO's clipped surrogate
(`pbmarl.rl.policy_gradients.clipped_surrogate_loss`) minus an entropy bonus, the rest
(collection, GAE, value loss, exact exploitability) in `pbmarl.algorithms.selfplay.base`.

``preset="iig_liars_dice"`` takes the paper's tuned setting for liar's dice
(``best_hyperparameters/min_final_expl_hparams/ppo/liars_dice`` of nathanlct/IIG-RL-Benchmark);
options given beside it replace its values.

Example:
    >>> run = PPOSelfPlay("kuhn_poker", seed=0, steps_per_round=256)
    >>> records = run.run(2, progress=False)
    >>> records[-1].exploitability is not None          # exact on Kuhn
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from pbmarl.algorithms.selfplay.base import SelfPlayBatch, SelfPlayConfig, SelfPlayRun
from pbmarl.config import NON_NEGATIVE, POSITIVE, Rule
from pbmarl.rl.policy_gradients import clipped_surrogate_loss

#: tuned settings from the IIG benchmark (Rudolph et al. 2026), by name
PRESETS: dict[str, dict[str, Any]] = {
    "iig_liars_dice": dict(lr=6.25e-5, clip_coef=0.025, ent_coef=0.1, num_envs=8, steps_per_round=8 * 256, epochs=8,
                           minibatches=1, vf_coef=0.0625, gae_lambda=0.95, gamma=0.99, max_grad_norm=0.5,
                           anneal_lr=True),
}


@dataclass(frozen=True)
class PPOSelfPlayConfig(SelfPlayConfig):
    """PPO self-play's options: the shared ones plus PPO's clip and entropy bonus."""

    clip_coef: float = 0.2
    """Clipping range of the probability ratio."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""

    checks: ClassVar[dict[str, Rule]] = {**SelfPlayConfig.checks, "clip_coef": POSITIVE, "ent_coef": NON_NEGATIVE}


class PPOSelfPlay(SelfPlayRun):
    """PPO in self-play; see the module doc and `pbmarl.algorithms.selfplay.base`.

    Args:
        game: the game (or its name): any turn-based game with legal-action masks.
        seed: seeds the networks, minibatch order and collection.
        config: a `PPOSelfPlayConfig`; keyword options (its fields) replace its values.
        preset: a name in `PRESETS` whose values the options start from.
    """

    config_class: ClassVar[type[SelfPlayConfig]] = PPOSelfPlayConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS
    config: PPOSelfPlayConfig

    def policy_loss(self, index: int, mb: SelfPlayBatch, adv: torch.Tensor, logp: torch.Tensor,
                    logp_all: torch.Tensor, entropy: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        surrogate = clipped_surrogate_loss(adv, (logp - mb.old_logp).exp(), cfg.clip_coef)
        return surrogate - cfg.ent_coef * entropy, {"surrogate": surrogate}
