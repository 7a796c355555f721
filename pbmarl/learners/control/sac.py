"""SAC: soft actor-critic with twin critics and automatic entropy tuning, for Box or Discrete actions.

Box actions (Haarnoja et al. 2018, "SAC: algorithms and applications"), one update:

1. critics: minimise ``sum_i (Q_i(s, a) - y)^2`` with
   ``y = r + gamma * (1 - done) * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))``, ``a' ~ pi(.|s')``;
2. actor: minimise ``alpha * log pi(a|s) - min_i Q_i(s, a)``, ``a ~ pi(.|s)`` reparameterised
   through the tanh-squashed Gaussian (`pb.policies.GaussianPolicy`);
3. temperature: minimise ``-log(alpha) * (log pi(a|s) + H_target)`` with ``H_target = -dim(A)``;
4. targets: Polyak averaging with rate ``tau``.

Discrete actions (Christodoulou 2019): the critics output every action's Q and the
expectations over ``a'`` and ``a`` are exact sums under ``pi``; ``H_target =
0.89 log |A|`` (CleanRL's choice). The deterministic policy is the mean action
(Box) or the most likely action (Discrete).

Example:
    >>> learner = pb.SAC("gym:Pendulum-v1", seed=0, budget=400, steps_per_round=200, hidden=(16, 16),
    ...                  batch_size=16, learning_starts=100)
    >>> rec = learner.step()                   # 200 env steps
    >>> rec.iteration, rec.env_steps
    (1, 200)
    >>> records = learner.run()                # on to the budget
    >>> list(learner.history.columns[:6])
    ['env_steps', 'episodes', 'wall_time', 'return/0', 'loss/critic', 'loss/actor']
    >>> learner.evaluate(2, deterministic=True).episodes
    2
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from pbmarl.config import FLAG, POSITIVE, Rule
from pbmarl.config import is_int as _is_int
from pbmarl.config import is_real as _is_real
from pbmarl.learners.common.buffers import Batch
from pbmarl.learners.common.nets import adam, build_mlp, frozen, seeded, to_tensor
from pbmarl.learners.control.base import ControlConfig, ControlLearner, ControlRecord
from pbmarl.learners.control.critics import Critic, Critics, EnsembleMLP
from pbmarl.policies.continuous import GaussianPolicy
from pbmarl.policies.neural import MLPPolicy
from pbmarl.rl.polyak import Polyak


@dataclass(frozen=True)
class SACConfig(ControlConfig):
    """SAC options (plus the shared ones of `ControlConfig`); defaults follow Stable-Baselines3."""

    alpha: float = 1.0
    """Entropy temperature: its start value when `autotune`, else fixed."""
    autotune: bool = True
    """Tune the temperature towards `target_entropy` (automatic entropy tuning)."""
    target_entropy: float | None = None
    """Entropy the tuning aims for; None: ``-dim(A)`` for Box, ``0.89 log |A|`` for Discrete actions."""
    sde: bool = False
    """Box actions: explore with generalised state-dependent exploration (gSDE; Raffin, Kober and Stulp 2022,
    "Smooth exploration for robotic reinforcement learning"): the noise is a linear function of the actor's last
    hidden features, its weights ``~ N(0, exp(log_std)^2)`` redrawn every `sde_sample_freq` env steps and at
    every gradient step (as SB3 does). rl-zoo solves MountainCarContinuous with it."""
    sde_sample_freq: int = -1
    """gSDE: env steps between noise draws while acting; -1: once per rollout of `train_freq` steps (SB3's -1)."""
    log_std_init: float = -3.0
    """gSDE: initial log-std of every noise weight (SB3's default -3; rl-zoo's MountainCarContinuous -3.67)."""
    clip_mean: float = 2.0
    """gSDE: the actor's pre-squash mean is clipped to ``[-clip_mean, clip_mean]`` (SB3's 2.0 under gSDE)."""

    checks: ClassVar[dict[str, Rule]] = {
        "alpha": POSITIVE, "autotune": FLAG,
        "target_entropy": (lambda v: v is None or _is_real(v), "None or a finite number"),
        "sde": FLAG, "sde_sample_freq": (lambda v: _is_int(v) and (v == -1 or v >= 1),
                                         "-1 (once per rollout) or a positive int"),
        "log_std_init": (_is_real, "a finite number"), "clip_mean": POSITIVE,
    }


@dataclass(frozen=True)
class SACRecord(ControlRecord):
    """One SAC round: ``loss/critic`` (`loss`, the critics'), ``loss/actor``, then ``alpha`` and ``entropy``."""

    actor_loss: float
    """Mean actor loss over the round's updates: ``loss/actor``."""
    alpha: float
    """Mean entropy temperature."""
    entropy: float
    """Mean policy entropy estimate (``-log pi`` of sampled actions, or the exact sum for Discrete)."""

    loss_fields: ClassVar[dict[str, str]] = {"actor_loss": "actor"}


class SAC(ControlLearner):
    """Soft actor-critic for Box or Discrete actions; see the module doc.

    Args:
        game: a one-player game (or its name).
        config: a `SACConfig`; keyword options override its fields.
        seed: seeds networks, sampling, replay and episode resets.
    """

    name = "sac"
    config_class = SACConfig
    record_class: ClassVar[type[ControlRecord]] = SACRecord
    spaces = ("box", "discrete")
    config: SACConfig

    def _build(self) -> None:
        cfg = self.config
        if cfg.sde and self.space != "box":
            raise ValueError(f"SAC(sde=True) explores Box actions with state-dependent noise; {self.game.name!r} has "
                             f"Discrete actions: drop sde (discrete SAC samples its softmax)")
        if self.space == "box":
            self.gaussian = GaussianPolicy(self.game, cfg.hidden, seed=self._seeded(), sde=cfg.sde,
                                           log_std_init=cfg.log_std_init, clip_mean=cfg.clip_mean if cfg.sde else None)
            self.actor: nn.Module = self.gaussian.net
            self.critics: Critics | EnsembleMLP = Critics(
                [seeded(self._seeded(), lambda: Critic(self.obs_dim, self.act_dim, cfg.hidden)) for _ in range(2)])
            default_target = -float(self.act_dim)
        else:
            self.actor = seeded(self._seeded(), lambda: build_mlp(self.obs_dim, cfg.hidden, self.num_actions))
            self.critics = EnsembleMLP([seeded(self._seeded(), lambda: build_mlp(self.obs_dim, cfg.hidden, self.num_actions))
                                        for _ in range(2)])
            default_target = 0.89 * math.log(self.num_actions)
        self.target_entropy = default_target if cfg.target_entropy is None else float(cfg.target_entropy)
        self.critics_target = copy.deepcopy(self.critics)
        self._polyak = Polyak(self.critics_target, self.critics)
        self._critic_params = list(self.critics.parameters())
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.alpha)), requires_grad=cfg.autotune)
        self.actor_opt = adam(self.gaussian.parameters() if self.space == "box" else self.actor.parameters(), lr=cfg.lr)
        self.critic_opt = adam(self.critics.parameters(), lr=cfg.lr)
        self.alpha_opt = adam([self.log_alpha], lr=cfg.lr)

    # -- acting ----------------------------------------------------------------------------
    def _act(self, obs: torch.Tensor, *, deterministic: bool) -> np.ndarray | int:
        if self.space == "box":
            if self.config.sde and not deterministic:
                every = self.config.train_freq if self.config.sde_sample_freq == -1 else self.config.sde_sample_freq
                if self.env_steps % every == 0:  # (`sample` draws the first matrix itself)
                    self.gaussian.reset_noise(self.gen)
            return self.gaussian.sample(obs, generator=self.gen, deterministic=deterministic)[0][0].numpy()
        logits = self.actor(obs)[0]
        if deterministic:
            return int(logits.argmax())
        return int(torch.multinomial(torch.softmax(logits, -1), 1, generator=self.gen))

    # -- learning --------------------------------------------------------------------------
    def _update(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        obs, next_obs = to_tensor(batch.obs), to_tensor(batch.next_obs)
        reward, live = to_tensor(batch.reward), 1.0 - to_tensor(batch.done)
        alpha = self.log_alpha.exp().detach()
        box = self.space == "box"
        if box and cfg.sde:  # one noise matrix per gradient step, for the targets and the actor (as SB3)
            self.gaussian.reset_noise(self.gen)
        with torch.no_grad():
            if box:
                next_action, next_logp = self.gaussian.sample(next_obs, generator=self.gen)
                q_next = self.critics_target(next_obs, next_action).amin(0) - alpha * next_logp
            else:
                logp = torch.log_softmax(self.actor(next_obs), -1)
                q_min = self.critics_target(next_obs).amin(0)
                q_next = (logp.exp() * (q_min - alpha * logp)).sum(-1)
            y = reward + cfg.gamma * live * q_next
        if box:
            action = to_tensor(batch.action)
            qs = self.critics(obs, action)  # (2, B)
        else:
            index = to_tensor(batch.action, dtype=None)[None, :, None].expand(len(self.critics), -1, 1)
            qs = self.critics(obs).gather(2, index).squeeze(2)
        critic_loss = (qs - y).pow(2).mean(1).sum()
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()

        if box:
            action_pi, logp_pi = self.gaussian.sample(obs, generator=self.gen)
            with frozen(self._critic_params):
                q_pi = self.critics(obs, action_pi).amin(0)
            actor_loss = (alpha * logp_pi - q_pi).mean()
            neg_entropy = logp_pi.detach()
        else:
            logp = torch.log_softmax(self.actor(obs), -1)
            with torch.no_grad():
                q_all = self.critics(obs).amin(0)
            actor_loss = (logp.exp() * (alpha * logp - q_all)).sum(-1).mean()
            neg_entropy = (logp.exp() * logp).sum(-1).detach()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        if cfg.autotune:
            alpha_loss = -(self.log_alpha * (neg_entropy + self.target_entropy)).mean()
            self.alpha_opt.zero_grad()
            alpha_loss.backward()
            self.alpha_opt.step()
        self._after_update()
        return {"loss": float(critic_loss.detach()), "actor_loss": float(actor_loss.detach()), "alpha": float(alpha),
                "entropy": float(-neg_entropy.mean())}

    def _after_update(self) -> None:
        self._polyak(self.config.tau)

    # -- state -----------------------------------------------------------------------------
    def _modules(self) -> dict[str, Any]:
        sde = {"sde_log_std": _ParamBox(self.gaussian.log_std)} if self.config.sde and self.gaussian.log_std is not None else {}
        return {"actor": self.actor, "critics": self.critics, "critics_target": self.critics_target, **sde,
                "log_alpha": _ParamBox(self.log_alpha), "actor_opt": self.actor_opt,
                "critic_opt": self.critic_opt, "alpha_opt": self.alpha_opt}

    def _extra_names(self) -> tuple[str, ...]:
        return ("sde_noise_weights",) if self.config.sde else ()

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        weights = self.gaussian.noise_weights if self.config.sde else None
        return {} if weights is None else {"sde_noise_weights": weights.numpy().copy()}

    def _load_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        if self.config.sde:
            weights = arrays.get("sde_noise_weights")
            self.gaussian.noise_weights = None if weights is None else torch.as_tensor(np.array(weights))

    def _policy(self) -> GaussianPolicy | MLPPolicy:
        """A copy of the actor: a `GaussianPolicy` (Box) or an `MLPPolicy` over the logits (Discrete)."""
        if self.space == "box":
            policy: GaussianPolicy | MLPPolicy = copy.deepcopy(self.gaussian)
        else:
            policy = MLPPolicy(self.game, hidden=self.config.hidden, seed=None)
            policy.net.load_state_dict(self.actor.state_dict())
        policy.version = self.updates
        return policy


class _ParamBox:
    """``state_dict`` / ``load_state_dict`` for a lone parameter (the temperature), loaded in place."""

    def __init__(self, param: nn.Parameter) -> None:
        self.param = param

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"value": self.param.detach().clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            self.param.copy_(state["value"])
