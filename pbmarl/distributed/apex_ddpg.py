"""Ape-X DDPG (Horgan et al. 2018, Ape-X DPG): noisy actors, one prioritised replay, a DDPG learner.

Actor ``i`` of ``N`` plays the last published actor network with Gaussian exploration of its
own scale ``sigma_i = eps_i`` from Ape-X's schedule (`apex_epsilons`: ``0.4 ** (1 + 7 i / (N-1))``,
in `pb.noise`'s normalised units; the spread of scales is pbmarl's choice for continuous
actions, mirroring the discrete schedule). Each actor job is whole episodes of at least
``steps_per_round / actors`` env steps; the learner appends them to the central prioritised
replay (a Ray actor with ``backend="ray"``, in-process locally: `pbmarl.distributed.replay`),
takes ``gradient_steps`` DDPG updates per ``train_freq`` consumed env steps and publishes the
actor's weights every `publish_interval` updates.

Example:
    >>> learner = pb.ApeXDDPG(pb.load_game("gym:Pendulum-v1"), actors=4)  # doctest: +SKIP
    >>> record = learner.step()  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from pbmarl.distributed.apex import apex_epsilons
from pbmarl.distributed.executors import make_executor
from pbmarl.distributed.options import ACTORS_NOT_WORKERS, BACKENDS
from pbmarl.distributed.replay import RemoteReplay
from pbmarl.distributed.server import get_vector, set_vector
from pbmarl.learners.base import POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.learners.control import ControlRecord
from pbmarl.learners.ddpg import DDPG, DDPGConfig
from pbmarl.policies.noise import Normal

__all__ = ["ApeXDDPG", "ApeXDDPGConfig"]


@dataclass(frozen=True)
class ApeXDDPGConfig(DDPGConfig):
    """Ape-X DDPG options: DDPG's (prioritised replay on) plus the actors'."""

    actors: int = 4
    """Noisy actors."""
    apex_epsilon: float = 0.4
    """Base of the actors' noise schedule."""
    apex_alpha: float = 7.0
    """Exponent spread of the actors' noise schedule."""
    publish_interval: int = 8
    """Learner updates between weight publications."""
    prioritized: bool = True
    """Central proportional prioritised replay."""
    backend: str = "local"
    """"local" (in-process actors) or "ray"."""

    checks: ClassVar[dict[str, Rule]] = {
        "actors": POSITIVE_INT, "apex_epsilon": UNIT, "apex_alpha": POSITIVE, "publish_interval": POSITIVE_INT,
        "backend": (lambda v: v in BACKENDS, f"one of {BACKENDS}"),
        "workers": ACTORS_NOT_WORKERS,
    }


@dataclass(frozen=True)
class Episodes:
    """An actor's transitions (whole episodes) and their returns."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    next_obs: np.ndarray
    returns: tuple[float, ...]
    version: int
    seeds: tuple[int, ...]
    sigma: float


class DDPGActor:
    """Plays episodes with the weights it was sent and Gaussian noise of scale `sigma`."""

    def __init__(self, game: Any, config: DDPGConfig, sigma: float, steps: int) -> None:
        self.learner = DDPG(game, config=replace(config, noise="normal", noise_sigma=sigma))
        self.learner.actor.noise = Normal(sigma)
        self.sigma, self.steps = float(sigma), int(steps)

    def compute(self, weights: np.ndarray, version: int, seeds: Sequence[int]) -> Episodes:
        lrn = self.learner
        set_vector(list(lrn.actor.net.parameters()), weights)
        lrn.rng = np.random.default_rng(int(seeds[0]))
        rows: list[tuple[Any, ...]] = []
        returns = []
        while len(rows) < self.steps:
            obs, total = lrn.env.reset(int(lrn.rng.integers(2**31))), 0.0
            while True:
                action = lrn._explore(obs)
                next_obs, reward, terminated, truncated = lrn.env.step(action)
                rows.append((obs, action, reward, terminated, next_obs))
                total += reward
                obs = next_obs
                if terminated or truncated:
                    returns.append(total)
                    break
        cols = list(zip(*rows))
        return Episodes(np.asarray(cols[0], np.float32), np.asarray(cols[1], np.float32), np.asarray(cols[2], float),
                        np.asarray(cols[3], bool), np.asarray(cols[4], np.float32), tuple(returns), int(version),
                        tuple(int(s) for s in seeds), self.sigma)

    def ping(self) -> bool:
        return True


class ApeXDDPG(DDPG):
    """Ape-X DDPG on one machine or on Ray; see the module doc."""

    name = "apex_ddpg"
    config_class = ApeXDDPGConfig
    config: ApeXDDPGConfig

    @property
    def actor_sigmas(self) -> list[float]:
        """Each actor's noise scale."""
        return apex_epsilons(self.config.actors, self.config.apex_epsilon, self.config.apex_alpha)

    def _build(self) -> None:
        super()._build()
        cfg = self.config
        base = DDPGConfig(hidden=cfg.hidden, buffer_size=1)
        sigmas, steps = self.actor_sigmas, max(1, cfg.steps_per_round // cfg.actors)
        self.executor = make_executor(cfg.backend, lambda i: (self.game, base, sigmas[i], steps), cfg.actors,
                                      DDPGActor)
        self.idle = list(range(cfg.actors))
        self.published = (0, get_vector(list(self.actor.net.parameters())))
        #: every consumed job: (actor, weights version, seeds, env steps, sigma)
        self.log: list[tuple[int, int, tuple[int, ...], int, float]] = []

    def _make_buffer(self, **options: Any) -> Any:
        """DDPG's prioritised replay, hosted as the central replay (a Ray actor with ``backend="ray"``)."""
        return RemoteReplay(super()._make_buffer(**options), backend=self.config.backend)

    def _send(self, i: int) -> None:
        self.executor.submit(i, self.published[1], self.published[0], [int(self.rng.integers(2**63 - 1))])

    def step(self) -> ControlRecord:
        """One round: one job per actor consumed into the replay, with the updates it pays for."""
        cfg, t0 = self.config, time.perf_counter()
        returns: list[float] = []
        losses: dict[str, list[float]] = {}
        try:
            for i in self.idle:
                self._send(i)
            self.idle = []
            for _ in range(cfg.actors):
                i, ep = self.executor.next()
                for row in zip(ep.obs, ep.action, ep.reward, ep.terminated, ep.next_obs):
                    self.replay.append(*row)
                    self.env_steps += 1
                    if self.env_steps >= cfg.learning_starts and self.env_steps % cfg.train_freq == 0:
                        for _ in range(cfg.gradient_steps):
                            for k, v in self._train_step(self._sample()).items():
                                losses.setdefault(k, []).append(v)
                            self.updates += 1
                            if self.updates % cfg.publish_interval == 0:
                                self.published = (self.published[0] + 1,
                                                  get_vector(list(self.actor.net.parameters())))
                self.episodes += len(ep.returns)
                returns.extend(ep.returns)
                self.log.append((i, ep.version, ep.seeds, len(ep.reward), ep.sigma))
                self._send(i)
        except KeyboardInterrupt:  # stop the actors; stepping again starts fresh ones
            self.executor.close()
            self.idle = list(range(cfg.actors))
            raise
        mean = {k: float(np.mean(v)) for k, v in losses.items()}
        record = self.record_class(
            task=0, player=0, round=len(self.records) + 1, learner_steps=self.env_steps, env_steps=self.env_steps,
            episodes=len(returns), mean_return=float(np.mean(returns)), seconds=time.perf_counter() - t0,
            updates=self.updates, loss=mean.get("loss", float("nan")),
            **{k: mean.get(k, float("nan")) for k in ("actor_loss", "q_mean")})
        self.records.append(record)
        return record
