"""`DeepMMD`: magnetic mirror descent in its RL form, in self-play (Sokota et al., ICLR 2023, arXiv 2206.05825).

An actor-critic whose policy loss is MMD's (`pbmarl.rl.magnetic.magnetic_policy_loss`): the advantage
surrogate (clipped like PPO's when ``clip_coef`` is set) plus ``alpha KL(pi || magnet)`` plus
``(1/stepsize) KL(pi || pi_old)``, both KLs exact over each sampled state's legal actions. ``alpha`` and
``stepsize`` follow linear schedules over the budget (to ``alpha_final`` / ``stepsize_final``; None keeps
them constant). The magnet is the uniform policy, or, with ``magnet_every=k``, a copy of the actor taken
every k rounds (the moving magnet that drives the QRE towards a Nash equilibrium). Everything else --
collection in self-play, GAE, value loss, exact exploitability of the last iterate -- is
`pbmarl.algorithms.selfplay.base`'s.

The defaults are illustrative, not tuned. ``preset="iig_liars_dice"`` takes the IIG benchmark's tuned
setting for liar's dice (``best_hyperparameters/min_final_expl_hparams/mmd/liars_dice`` of
nathanlct/IIG-RL-Benchmark at 591d35d). Its MMD is PPO's clipped surrogate plus an entropy bonus
``ent_coef`` and ``kl_coef`` times a sampled estimate of KL(pi || pi_old), both constant (its commit
1d25c85 removed the decay). That is this loss with the uniform magnet fixed, ``alpha = ent_coef``
(alpha KL(pi || uniform) is minus alpha times the entropy plus a constant), ``stepsize = 1 / kl_coef``
and the same clip; the KLs here are exact over the legal actions where the paper samples one action.
Options given beside the preset replace its values.

Example:
    >>> run = DeepMMD("kuhn_poker", seed=0, steps_per_round=256, alpha=0.05)
    >>> records = run.run(2, progress=False)
    >>> sorted(k for k in records[-1].as_row() if k in ("alpha", "stepsize"))
    ['alpha', 'stepsize']
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from pbmarl.algorithms.selfplay.base import SelfPlayBatch, SelfPlayConfig, SelfPlayRun
from pbmarl.config import NON_NEGATIVE, Rule, is_int, is_real
from pbmarl.policies.neural import masked_logits
from pbmarl.rl.magnetic import magnetic_policy_loss
from pbmarl.rl.schedules import linear_schedule

_OPTIONAL_NON_NEGATIVE = (lambda v: v is None or (is_real(v) and v >= 0), "None or a non-negative number")
_OPTIONAL_POSITIVE = (lambda v: v is None or (is_real(v) and v > 0), "None or a positive number")


#: tuned settings from the IIG benchmark (Rudolph et al. 2026), by name: its mmd/liars_dice yaml (ent_coef 0.1,
#: kl_coef 0.025, clip 0.025, lr 6.25e-5, 8 envs x 256 steps, 8 epochs, 1 minibatch, vf_coef 0.0625, ...)
PRESETS: dict[str, dict[str, Any]] = {
    "iig_liars_dice": dict(alpha=0.1, stepsize=1 / 0.025, clip_coef=0.025, lr=6.25e-5, num_envs=8,
                           steps_per_round=8 * 256, epochs=8, minibatches=1, vf_coef=0.0625, gae_lambda=0.95,
                           gamma=0.99, max_grad_norm=0.5, anneal_lr=True),
}


@dataclass(frozen=True)
class DeepMMDConfig(SelfPlayConfig):
    """Deep MMD's options: the shared ones plus the magnet, its temperature and the step size."""

    alpha: float = 0.05
    """Weight of KL(pi || magnet) at the start."""
    alpha_final: float | None = None
    """Alpha at the end of the budget, reached linearly (None: constant)."""
    stepsize: float = 1.0
    """eta at the start; the KL to the previous policy is weighted 1/eta."""
    stepsize_final: float | None = None
    """eta at the end of the budget, reached linearly (None: constant)."""
    magnet_every: int | None = None
    """Copy the actor into the magnet every this many rounds (None: the uniform magnet, fixed)."""
    clip_coef: float | None = None
    """Clip the surrogate's ratio as PPO does (None: the plain ratio; the KL to pi_old is the proximal term)."""

    checks: ClassVar[dict[str, Rule]] = {
        **SelfPlayConfig.checks, "alpha": NON_NEGATIVE, "alpha_final": _OPTIONAL_NON_NEGATIVE,
        "stepsize": (lambda v: is_real(v) and v > 0, "a positive number"), "stepsize_final": _OPTIONAL_POSITIVE,
        "magnet_every": (lambda v: v is None or (is_int(v) and v >= 1), "None or a positive int"),
        "clip_coef": _OPTIONAL_POSITIVE,
    }


class DeepMMD(SelfPlayRun):
    """Deep magnetic mirror descent in self-play; see the module doc.

    Args:
        game: the game (or its name): any turn-based OpenSpiel or PettingZoo game with legal-action masks.
        seed: seeds the networks, minibatch order and collection.
        config: a `DeepMMDConfig`; keyword options (its fields) replace its values.
        preset: a name in `PRESETS` whose values the options start from.
    """

    config_class: ClassVar[type[SelfPlayConfig]] = DeepMMDConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS
    config: DeepMMDConfig

    def _init_extra(self) -> None:
        # the moving magnet: a frozen copy of each actor's network (None: uniform)
        self.magnets: list[torch.nn.Module] | None = None
        if self.config.magnet_every is not None:
            self.magnets = [copy.deepcopy(a.net).requires_grad_(False) for a in self.actors]

    def _progress(self) -> float:
        return self._counts["env_steps"] / self.config.budget

    def schedule(self) -> tuple[float, float]:
        """This round's (alpha, stepsize)."""
        cfg, t = self.config, self._progress()
        alpha = cfg.alpha if cfg.alpha_final is None else linear_schedule(cfg.alpha, cfg.alpha_final, 1.0, t)
        eta = cfg.stepsize if cfg.stepsize_final is None else linear_schedule(cfg.stepsize, cfg.stepsize_final, 1.0, t)
        return alpha, eta

    def _round_extra(self) -> dict[str, Any]:
        alpha, eta = self.schedule()
        return {"alpha": alpha, "stepsize": eta}

    def policy_loss(self, index: int, mb: SelfPlayBatch, adv: torch.Tensor, logp: torch.Tensor,
                    logp_all: torch.Tensor, entropy: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        alpha, eta = self.schedule()
        if self.magnets is None:
            legal = mb.legal_mask.float()
            magnet_logp_all = torch.log(legal / legal.sum(dim=-1, keepdim=True)).clamp_min(-1e9)
        else:
            with torch.no_grad():
                magnet_logp_all = torch.log_softmax(masked_logits(self.magnets[index](mb.obs), mb.legal_mask), dim=-1)
        loss = magnetic_policy_loss(adv, logp, logp_all, mb.old_logp, mb.old_logp_all, magnet_logp_all,
                                    mb.legal_mask, alpha=alpha, stepsize=eta, clip=self.config.clip_coef)
        return loss, {}

    def _after_round(self) -> None:
        every = self.config.magnet_every
        if self.magnets is not None and every is not None and (self.iteration + 1) % every == 0:
            for magnet, actor in zip(self.magnets, self.actors):
                magnet.load_state_dict(actor.net.state_dict())

    def _modules_state(self) -> dict[str, Any]:
        out = super()._modules_state()
        for k, magnet in enumerate(self.magnets or []):
            out[f"magnet_{k}"] = magnet.state_dict()
        return out

    def _load_modules(self, modules: dict[str, Any]) -> None:
        super()._load_modules(modules)
        for k, magnet in enumerate(self.magnets or []):
            magnet.load_state_dict(modules[f"magnet_{k}"])
