"""Ape-X DDPG (Horgan et al. 2018, Ape-X DPG): noisy actors, one prioritised replay, a DDPG learner.

Actor ``i`` of ``N`` plays the last published actor network with Gaussian exploration of its
own scale ``sigma_i = eps_i`` from Ape-X's schedule (`apex_epsilons`: ``0.4 ** (1 + 7 i / (N-1))``,
in `pb.policies.noise`'s normalised units; the spread of scales is pbmarl's choice for continuous
actions, mirroring the discrete schedule). Each actor job is whole episodes of at least
``steps_per_round / actors`` env steps; the learner appends them to the central prioritised
replay (a Ray actor with ``backend="ray"``, in-process locally: `pbmarl.distributed.replay`),
takes ``gradient_steps`` DDPG updates per ``train_freq`` consumed env steps and publishes the
actor's weights every `publish_interval` updates.

Between rounds every actor has one job in flight. A save keeps those jobs (weights, version,
seeds), and so does a round's snapshot: a loaded run, or one whose round was undone by an
exception, sends them again. With one actor, or on Ray, that is exactly the run that was not
stopped; with several local actors the jobs come back in actor order, which may differ from
the simulated arrival order of the run that went on (the same jobs, the same data).

Example:
    >>> learner = pb.learners.ApeXDDPG("gym:Pendulum-v1", actors=4)  # doctest: +SKIP
    >>> record = learner.step()  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from pbmarl.config import POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.distributed.executors import make_executor
from pbmarl.distributed.options import ACTORS_NOT_WORKERS, BACKENDS
from pbmarl.distributed.replay import RemoteReplay
from pbmarl.distributed.server import get_vector, set_vector
from pbmarl.learners.control.base import ControlRecord
from pbmarl.learners.control.ddpg import DDPG, DDPGConfig
from pbmarl.learners.oracles.apex import apex_epsilons
from pbmarl.policies.noise import Normal
from pbmarl.runs.transaction import all_or_nothing

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.runs import SavedRun, State

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
        base = DDPGConfig(hidden=cfg.hidden, buffer_size=1, batch_size=1)
        sigmas, steps = self.actor_sigmas, max(1, cfg.steps_per_round // cfg.actors)
        self.executor = make_executor(cfg.backend, lambda i: (self.game, base, sigmas[i], steps), cfg.actors,
                                      DDPGActor)
        self.idle = list(range(cfg.actors))
        self.published = (0, get_vector(list(self.actor.net.parameters())))
        #: every consumed job: (actor, weights version, seeds, env steps, sigma)
        self.log: list[tuple[int, int, tuple[int, ...], int, float]] = []
        #: the job each busy actor is playing: (weights version, weights, seeds)
        self.pending: dict[int, tuple[int, np.ndarray, tuple[int, ...]]] = {}

    def _make_buffer(self) -> Any:
        """DDPG's prioritised replay, hosted as the central replay (a Ray actor with ``backend="ray"``)."""
        return RemoteReplay(super()._make_buffer(), backend=self.config.backend)

    def _send(self, i: int) -> None:
        job = (self.published[0], self.published[1], (int(self.rng.integers(2**63 - 1)),))
        self.pending[i] = job
        self.executor.submit(i, job[1], job[0], list(job[2]))

    def _resend(self) -> None:
        """Start fresh actors on the jobs that were in flight (after a load, or a round undone)."""
        self.executor.close()
        for i, (version, weights, seeds) in sorted(self.pending.items()):
            self.executor.submit(i, weights, version, list(seeds))

    @all_or_nothing
    def step(self) -> ControlRecord:
        """One round: one job per actor consumed into the replay, with the updates it pays for."""
        cfg, t0 = self.config, time.perf_counter()
        returns: list[float] = []
        losses: dict[str, list[float]] = {}
        for i in self.idle:
            self._send(i)
        self.idle = []
        for _ in range(cfg.actors):
            i, ep = self.executor.next()
            del self.pending[i]
            for row in zip(ep.obs, ep.action, ep.reward, ep.terminated, ep.next_obs):
                self.replay.append(*row)
                self.env_steps += 1
                if self.env_steps >= cfg.learning_starts and self.env_steps % cfg.train_freq == 0:
                    for _ in range(cfg.gradient_steps):
                        for k, v in self._train_step(self._sample()).items():
                            losses.setdefault(k, []).append(v)
                        self.updates += 1
                        if self.updates % cfg.publish_interval == 0:
                            self.published = (self.published[0] + 1, get_vector(list(self.actor.net.parameters())))
            self.episodes += len(ep.returns)
            returns.extend(ep.returns)
            self.log.append((i, ep.version, ep.seeds, len(ep.reward), ep.sigma))
            self._send(i)
        return self._record(t0, returns, losses)

    # -- all-or-nothing and files -------------------------------------------------------------------
    def _snapshot_extra(self) -> Any:
        return super()._snapshot_extra(), list(self.idle), self.published, dict(self.pending), len(self.log)

    def _restore_extra(self, extra: Any) -> None:
        noise, self.idle, self.published, self.pending, n = extra
        super()._restore_extra(noise)
        del self.log[n:]
        self._resend()

    def state(self) -> State:
        """DDPG's state, plus the published weights and the jobs in flight (`_resend` sends them again)."""
        state = super().state()
        state.data["apex"] = {"idle": self.idle, "published": self.published[0], "log": self.log,
                              "pending": {str(i): [v, list(seeds)] for i, (v, _, seeds) in self.pending.items()}}
        state.arrays["apex_published"] = self.published[1]
        state.arrays.update({f"apex_pending_{i}": w for i, (_, w, _) in self.pending.items()})
        return state

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> ApeXDDPG:
        from pbmarl.runs import RunFolderError

        run: ApeXDDPG = super().from_state(saved, **overrides)  # type: ignore[assignment]
        try:
            apex = saved.data["apex"]
            pending = {int(i): (int(v), tuple(int(x) for x in seeds)) for i, (v, seeds) in apex["pending"].items()}
            if not set(pending) <= set(range(run.config.actors)):
                raise ValueError(f"jobs of actors {sorted(pending)} for {run.config.actors} actors")
            size = len(run.published[1])
            arrays = saved.arrays({"apex_published": ((size,), "f"),
                                   **{f"apex_pending_{i}": ((size,), "f") for i in pending}})
            run.idle = [int(i) for i in apex["idle"]]
            run.published = (int(apex["published"]), arrays["apex_published"])
            run.pending = {i: (v, arrays[f"apex_pending_{i}"], seeds) for i, (v, seeds) in pending.items()}
            run.log = [(int(a), int(b), tuple(c), int(d), float(e)) for a, b, c, d, e in apex["log"]]
        except (KeyError, TypeError, ValueError) as exc:
            run.close()
            raise RunFolderError(f"{str(saved.state_dir)!r}: its Ape-X actors' state does not fit: {exc}") from None
        run._resend()
        return run

    def close(self) -> None:
        """Stop the actors (idempotent); stepping again starts fresh ones on the jobs that were in flight."""
        self.executor.close()
        super().close()
