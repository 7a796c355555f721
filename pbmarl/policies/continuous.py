"""Policies on `Box` action spaces (torch): a tanh-squashed Gaussian and a deterministic actor.

Both map an observation to a point in ``[-1, 1]^d`` and rescale it affinely to the
Box bounds: ``a = loc + scale * y`` with ``loc = (high + low) / 2`` and
``scale = (high - low) / 2``. Bounds must be finite.

Observations must be finite too: `act` refuses a batch with NaN or inf in it (a ValueError
naming the rows) rather than return NaN actions, which no Box contains.

Example:
    >>> game = pb.load_game("gym:Pendulum-v1")
    >>> pi = pb.policies.GaussianPolicy(game, hidden=(64, 64), seed=0)
    >>> out = pi.act(obs, None, rng=0)           # out.action [B, 1] in [-2, 2], out.log_prob [B]  # doctest: +SKIP
    >>> mu = pb.policies.DeterministicPolicy(game, noise=pb.policies.noise.OrnsteinUhlenbeck(sigma=0.2))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from pbmarl.config import check_real, check_widths, is_real
from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.games.state import as_rng
from pbmarl.policies.base import ActionOutput, Policy
from pbmarl.policies.neural import build_mlp, full_precision_matmul, seeded_torch
from pbmarl.policies.noise import AdaptiveParameterNoise, Noise, action_distance, instance_indices, noise_from_state

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
SDE_EPS = 1e-6
"""Added to gSDE's variance (SB3's epsilon), so a state whose features are all zero keeps a density."""


def _box_of(game: Game, player: int, who: str) -> Any:
    from gymnasium import spaces

    space = game.action_space(player)
    if not isinstance(space, spaces.Box):
        raise ValueError(f"{who} needs a Box action space; {game.name!r} player {player} has {space} (use MLPPolicy)")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ValueError(f"{who} needs finite Box bounds to squash into; {game.name!r} player {player} has {space}")
    return space


def tanh_log_det(u: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``, summed over the last axis (stable for large |u|)."""
    return (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1)


class BoxPolicy(Policy):
    """Shared plumbing of the Box policies: the space, the rescaling, batch checks and saving."""

    @property
    def discrete(self) -> bool:
        return False

    def __init__(self, game: Game | str, hidden: Sequence[int], *, player: int, seed: int | None, out_mult: int) -> None:
        game = as_game(game)
        super().__init__(game)
        self.player = game.check_player(player)
        space = _box_of(game, self.player, type(self).__name__)
        self.action_space = space
        self.action_shape = tuple(space.shape)
        self.act_dim = int(np.prod(space.shape))
        low, high = space.low.astype(np.float64).reshape(-1), space.high.astype(np.float64).reshape(-1)
        self.loc, self.scale = (high + low) / 2.0, (high - low) / 2.0
        self.observation_shape = tuple(game.observation_space(self.player).shape)
        self.in_dim = int(np.prod(self.observation_shape))
        self.hidden = check_widths("hidden", hidden)
        with seeded_torch(seed):
            self.net = build_mlp(self.in_dim, self.hidden, out_mult * self.act_dim)

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} acts on a Box space and has no action probabilities; use act()")

    def _obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        x = np.asarray(obs, dtype=np.float32)
        if x.ndim < 1 or int(np.prod(x.shape[1:])) != self.in_dim:
            raise ValueError(
                f"{type(self).__name__} for {self.game_name!r} takes observations [batch, {self.in_dim}], got shape {x.shape}"
            )
        finite = np.isfinite(x.reshape(len(x), -1)).all(axis=1)
        if not finite.all():
            rows = np.flatnonzero(~finite)
            raise ValueError(f"{type(self).__name__} for {self.game_name!r} got observations with NaN or inf in rows "
                             f"{rows[:8].tolist()}{' ...' if len(rows) > 8 else ''}; its actions would be NaN, which no "
                             f"Box holds: observations must be finite")
        return torch.as_tensor(x.reshape(len(x), self.in_dim))

    def rescale(self, y: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]^d`` -> the Box: ``loc + scale * y``."""
        if y.dtype == torch.float32:
            loc, scale = self._box_float32
        else:
            loc, scale = torch.as_tensor(self.loc, dtype=y.dtype), torch.as_tensor(self.scale, dtype=y.dtype)
        return loc + scale * y

    @functools.cached_property
    def _box_float32(self) -> tuple[torch.Tensor, torch.Tensor]:
        """`loc` and `scale` as float32 tensors, made once (a learner rescales two or three batches per update)."""
        return torch.as_tensor(self.loc, dtype=torch.float32), torch.as_tensor(self.scale, dtype=torch.float32)

    @functools.cached_property
    def log_scale_sum(self) -> float:
        """``sum(log(scale))``: the rescaling's term in every log-density."""
        return float(np.log(self.scale).sum())

    def normalise(self, action: np.ndarray) -> np.ndarray:
        """The Box -> ``[-1, 1]^d`` (inverse of `rescale`), ``[B, d]``."""
        a = np.asarray(action, dtype=np.float64).reshape(-1, self.act_dim)
        return (a - self.loc) / self.scale

    def _output(self, action: torch.Tensor, log_prob: torch.Tensor) -> ActionOutput:
        a = action.detach().numpy().astype(np.float32).reshape((-1,) + self.action_shape)
        low, high = self.action_space.low, self.action_space.high
        return ActionOutput(np.clip(a, low, high), log_prob.detach().double().numpy())

    def arrays(self) -> dict[str, np.ndarray]:
        return {f"net/{k}": v.detach().cpu().numpy() for k, v in self.net.state_dict().items()}

    def _load_net(self, arrays: dict[str, np.ndarray]) -> None:
        state = {k[len("net/"):]: torch.as_tensor(np.array(v)) for k, v in arrays.items() if k.startswith("net/")}
        self.net.load_state_dict(state)

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "hidden": list(self.hidden), "player": self.player}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.game_name!r}, hidden={self.hidden}, action {self.action_space})"


class GaussianPolicy(BoxPolicy):
    """A tanh-squashed diagonal Gaussian (SAC's actor), rescaled to the Box bounds.

    The MLP gives a mean ``m`` and a log-std ``s`` (clamped to [-20, 2]) per dimension;
    ``u ~ N(m, exp(s)^2)``, ``a = loc + scale * tanh(u)``, and by change of variables
    (Haarnoja et al. 2018, appendix C)::

        log pi(a|o) = sum_i [ log N(u_i; m_i, e^{s_i}) - log(1 - tanh(u_i)^2) - log scale_i ]

    `deterministic=True` gives ``loc + scale * tanh(m)`` and its log-density.

    Args:
        game: a game whose `player` has a bounded Box action space.
        hidden: widths of the hidden layers.
        player: whose spaces the policy is built for.
        seed: seeds the initial weights (None: torch's current state).
        state_dependent_std: True (SAC): the MLP outputs the log-std too; False (PPO):
            one learned log-std per dimension (`log_std`), starting at `log_std_init`.
        log_std_init: the initial log-std where it is state-independent (or of every gSDE weight).
        sde: generalised state-dependent exploration (gSDE; Raffin, Kober and Stulp 2022, "Smooth exploration
            for robotic reinforcement learning"): the pre-squash noise is ``z(o) @ W`` with ``z(o)`` the last
            hidden layer's features (gradient-free) and ``W ~ N(0, exp(log_std)^2)`` a matrix ``[h, d]``
            drawn by `reset_noise` and kept until the next draw, so the exploration is a smooth function of
            the observation. Its density is ``N(m, sum_j z_j^2 exp(log_std_j)^2)`` per action dimension.
            Needs ``state_dependent_std=False`` (implied) and at least one hidden layer.
        clip_mean: with `sde`, the pre-squash mean is clipped to ``[-clip_mean, clip_mean]`` (SB3's 2.0),
            keeping it where tanh still has gradient; None: no clip.
    """

    kind = "gaussian"

    def __init__(self, game: Game, hidden: Sequence[int] = (64, 64), *, player: int = 0, seed: int | None = 0,
                 state_dependent_std: bool = True, log_std_init: float = 0.0, sde: bool = False,
                 clip_mean: float | None = None) -> None:
        hidden = check_widths("hidden", hidden)
        self.sde = bool(sde)
        self.state_dependent_std = bool(state_dependent_std) and not self.sde
        if self.sde and not hidden:
            raise ValueError("GaussianPolicy(sde=True) draws its noise from the last hidden layer's features; "
                             "hidden=() has none: give at least one hidden layer")
        if clip_mean is not None and not (is_real(clip_mean) and clip_mean > 0):
            raise ValueError(f"clip_mean must be a positive number or None, got {clip_mean!r}")
        self.clip_mean = None if clip_mean is None else float(clip_mean)
        log_std_init = check_real("log_std_init", log_std_init)
        super().__init__(game, hidden, player=player, seed=seed, out_mult=2 if self.state_dependent_std else 1)
        self.log_std: nn.Parameter | None = None
        self.noise_weights: torch.Tensor | None = None
        """gSDE's standard-normal draw ``[h, d]`` (the noise matrix is ``exp(log_std) * noise_weights``)."""
        if self.sde:
            self.log_std = nn.Parameter(torch.full((self.hidden[-1], self.act_dim), float(log_std_init)))
        elif not self.state_dependent_std:
            self.log_std = nn.Parameter(torch.full((self.act_dim,), float(log_std_init)))

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """gSDE: draw a new noise matrix, used by every exploring `sample` until the next draw."""
        if not self.sde:
            raise ValueError("reset_noise() is for GaussianPolicy(sde=True); this policy draws fresh noise per sample")
        assert self.log_std is not None
        self.noise_weights = torch.randn(self.log_std.shape, generator=generator, dtype=self.log_std.dtype)

    def parameters(self) -> list[nn.Parameter]:
        """Everything an optimiser should train: the MLP's weights and, if separate, `log_std`."""
        return list(self.net.parameters()) + ([self.log_std] if self.log_std is not None else [])

    def distribution(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std ``[B, d]`` each of the pre-squash Gaussian, for a float tensor ``[B, in_dim]``."""
        if self.sde:
            mean, std, _ = self._sde_parts(x)
            return mean, std.log()
        out = self.net(x.reshape(len(x), -1))
        if self.log_std is None:
            mean, log_std = out.chunk(2, dim=-1)
        else:
            mean, log_std = out, self.log_std.expand_as(out)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, x: torch.Tensor, *, generator: torch.Generator | None = None,
               deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised action ``[B, d]`` (in the Box) and its log-density ``[B]``, with gradients."""
        if self.sde:
            mean, std, latent = self._sde_parts(x)
            log_std = std.log()
            if deterministic:
                eps = torch.zeros_like(mean)
            else:
                if self.noise_weights is None:
                    self.reset_noise(generator)
                assert self.log_std is not None and self.noise_weights is not None
                eps = full_precision_matmul(latent, self.log_std.exp() * self.noise_weights) / std
        else:
            mean, log_std = self.distribution(x)
            std = log_std.exp()
            eps = torch.zeros_like(mean) if deterministic else torch.randn(mean.shape, generator=generator,
                                                                           dtype=mean.dtype)
        u = mean + std * eps
        base = (-0.5 * eps**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_prob = base - tanh_log_det(u) - self.log_scale_sum
        return self.rescale(torch.tanh(u)), log_prob

    def _sde_parts(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """gSDE: the (clipped) mean ``[B, d]``, the std ``[B, d]`` and the gradient-free features ``[B, h]``."""
        assert self.log_std is not None
        *torso, head = self.net  # (slicing the Sequential would build a new one per call)
        latent = x.reshape(len(x), -1)
        for layer in torso:
            latent = layer(latent)
        mean = head(latent)
        if self.clip_mean is not None:
            mean = mean.clamp(-self.clip_mean, self.clip_mean)
        latent = latent.detach()
        std = (full_precision_matmul(latent.pow(2), (2.0 * self.log_std).exp()) + SDE_EPS).sqrt()
        return mean, std, latent

    def log_prob(self, obs: np.ndarray | torch.Tensor, action: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Log-density ``[B]`` of given Box actions (clipped just inside the bounds to invert tanh)."""
        x = obs if isinstance(obs, torch.Tensor) else self._obs_tensor(obs)
        a = torch.as_tensor(np.asarray(action, dtype=np.float64) if not isinstance(action, torch.Tensor) else action)
        y = ((a.reshape(len(x), -1).double() - torch.as_tensor(self.loc)) / torch.as_tensor(self.scale)).clamp(-1 + 1e-6, 1 - 1e-6)
        u = torch.atanh(y).to(x.dtype)
        mean, log_std = self.distribution(x)
        z = (u - mean) / log_std.exp()
        base = (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return base - tanh_log_det(u) - self.log_scale_sum

    def act(self, obs: np.ndarray, legal_mask: np.ndarray | None = None, rng: int | np.random.Generator | None = None,
            keys: Sequence[str] | None = None, *, deterministic: bool = False) -> ActionOutput:
        """Actions ``[B, *shape]`` in the Box and their log-densities ``[B]``; `legal_mask` is ignored.

        Observations with NaN or inf raise ValueError (naming the rows) instead of giving NaN actions."""
        x = self._obs_tensor(obs)
        gen = torch.Generator().manual_seed(int(as_rng(rng).integers(2**63 - 1)))
        with torch.no_grad():
            if self.sde and not deterministic:
                self.reset_noise(gen)  # a gSDE policy played on its own draws its noise matrix per call
            action, log_prob = self.sample(x, generator=gen, deterministic=deterministic)
        return self._output(action, log_prob)

    def arrays(self) -> dict[str, np.ndarray]:
        out = super().arrays()
        if self.log_std is not None:
            out["log_std"] = self.log_std.detach().numpy().copy()
        return out

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "state_dependent_std": self.state_dependent_std, "sde": self.sde,
                "clip_mean": self.clip_mean}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> GaussianPolicy:
        policy = cls(game, hidden=meta["hidden"], player=int(meta.get("player", 0)), seed=None,
                     state_dependent_std=bool(meta.get("state_dependent_std", True)), sde=bool(meta.get("sde", False)),
                     clip_mean=meta.get("clip_mean"))
        policy._load_net(arrays)
        if policy.log_std is not None:
            policy.log_std.data = torch.as_tensor(np.array(arrays["log_std"]), dtype=torch.float32)
        policy.version = int(meta.get("version", 0))
        return policy


class DeterministicPolicy(BoxPolicy):
    """A deterministic actor ``a = loc + scale * tanh(net(o))`` (DDPG / TD3) with exploration noise.

    Exploring (``deterministic=False``), the noise is added in normalised units and
    clipped: ``a = loc + scale * clip(tanh(net(o)) + eps, -1, 1)``. Stateful noises
    keep one state per environment instance: pass ``env_ids=`` [B] to `act`, and call
    ``policy.reset_noise(which)`` when those instances start new episodes. With an
    `AdaptiveParameterNoise` the policy explores with a perturbed copy of its network,
    re-drawn by `perturb` and scaled by `adapt_noise`.

    A deterministic policy has no density: ``log_prob`` is reported as zeros.

    Args:
        game: a game whose `player` has a bounded Box action space.
        hidden: widths of the hidden layers.
        noise: a `pbmarl.policies.noise` object (None: no exploration noise).
        player: whose spaces the policy is built for.
        seed: seeds the initial weights.
    """

    kind = "deterministic"

    def __init__(self, game: Game, hidden: Sequence[int] = (64, 64), *, noise: Noise | None = None, player: int = 0,
                 seed: int | None = 0) -> None:
        super().__init__(game, hidden, player=player, seed=seed, out_mult=1)
        if noise is not None and not isinstance(noise, Noise):
            raise TypeError(f"noise must be a pbmarl.policies.noise object (Normal, OrnsteinUhlenbeck, ...), "
                            f"got {noise!r}")
        self.noise = noise
        self._perturbed: nn.Module | None = None

    def forward(self, x: torch.Tensor, *, perturbed: bool = False) -> torch.Tensor:
        """The Box action ``[B, d]`` for a float tensor ``[B, in_dim]``, with gradients."""
        net = self._perturbed if perturbed and self._perturbed is not None else self.net
        return self.rescale(torch.tanh(net(x.reshape(len(x), -1))))

    def act(self, obs: np.ndarray, legal_mask: np.ndarray | None = None, rng: int | np.random.Generator | None = None,
            keys: Sequence[str] | None = None, *, deterministic: bool = False,
            env_ids: Sequence[int] | np.ndarray | None = None) -> ActionOutput:
        """Actions ``[B, *shape]`` in the Box (noisy unless `deterministic`); see the class doc."""
        x = self._obs_tensor(obs)
        if env_ids is not None:
            env_ids = instance_indices(env_ids, len(x), name="env_ids")
        explore = not deterministic and self.noise is not None
        use_perturbed = explore and isinstance(self.noise, AdaptiveParameterNoise)
        if use_perturbed and self._perturbed is None:
            self.perturb(rng)
        with torch.no_grad():
            y = torch.tanh((self._perturbed if use_perturbed else self.net)(x)).double()  # type: ignore[misc]
        if explore and not use_perturbed:
            assert self.noise is not None
            eps = self.noise.sample(as_rng(rng), (len(x), self.act_dim), env_ids)
            y = (y + torch.as_tensor(eps, dtype=y.dtype)).clamp(-1.0, 1.0)
        return self._output(self.rescale(y), torch.zeros(len(x), dtype=torch.float64))

    def reset_noise(self, which: Sequence[int] | np.ndarray | None = None) -> None:
        """Restart the noise of the environment instances `which` (indices or a bool mask; all if None)."""
        if self.noise is not None:
            self.noise.reset(which)

    # -- adaptive parameter-space noise (Plappert et al. 2018) -----------------------------
    def perturb(self, rng: int | np.random.Generator | None = None) -> None:
        """Draw a new perturbed copy of the network (AdaptiveParameterNoise only)."""
        if not isinstance(self.noise, AdaptiveParameterNoise):
            raise ValueError(f"perturb needs noise=AdaptiveParameterNoise(...), this policy has {self.noise!r}")
        clean = {k: v.detach().numpy() for k, v in self.net.state_dict().items()}
        noisy = self.noise.perturb(clean, as_rng(rng))
        net = build_mlp(self.in_dim, self.hidden, self.act_dim)
        net.load_state_dict({k: torch.as_tensor(v) for k, v in noisy.items()})
        self._perturbed = net

    def adapt_noise(self, obs: np.ndarray) -> float:
        """Measure the clean-vs-perturbed action distance on `obs` (normalised units) and adapt; returns it."""
        if not isinstance(self.noise, AdaptiveParameterNoise) or self._perturbed is None:
            raise ValueError("adapt_noise needs noise=AdaptiveParameterNoise(...) and a perturbed network (call perturb)")
        x = self._obs_tensor(obs)
        with torch.no_grad():
            clean, noisy = torch.tanh(self.net(x)).numpy(), torch.tanh(self._perturbed(x)).numpy()
        distance = action_distance(clean, noisy)
        self.noise.adapt(distance)
        return distance

    # -- saving ----------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        out = super().arrays()
        if self.noise is not None:
            out.update({f"noise/{k}": v for k, v in self.noise.arrays().items()})
        return out

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "noise": self.noise.meta() if self.noise is not None else None}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> DeterministicPolicy:
        noise = None
        if meta.get("noise"):
            noise = noise_from_state({k[len("noise/"):]: v for k, v in arrays.items() if k.startswith("noise/")}, meta["noise"])
        policy = cls(game, hidden=meta["hidden"], noise=noise, player=int(meta.get("player", 0)), seed=None)
        policy._load_net(arrays)
        policy.version = int(meta.get("version", 0))
        return policy
