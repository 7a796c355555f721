"""The control learners (DDPG, TD3, HDDPG, SAC, Rainbow) on a parameter server.

``pb.SAC(game, workers=N, sync="bsp" | "asp" | "bap")``. One job of worker ``w``:

1. load the learner's published *state*: every network, target networks included, as one
   flat vector (`get_state`), with ``updates`` set to the state's version (TD3's delayed
   actor and Rainbow's target interval follow it) and ``env_steps`` to the task's count
   (random actions before ``learning_starts``, Rainbow's epsilon and PER's beta follow it);
2. play ``train_freq`` env steps on its own environment into its own replay
   (episodes run on across jobs), with generators seeded by the job's seed;
3. once ``learning_starts`` env steps are in, run the algorithm's own `_update` on one
   minibatch of its replay with *recording* optimisers: each ``opt.step()`` keeps the
   (clipped) gradients of that optimiser's parameters instead of stepping. One job is one
   gradient (``gradient_steps`` is a single-process option).

A `step()` of the learner runs rounds of `workers` jobs (`Rounds`: BSP, ASP or BAP)
until ``steps_per_round`` env steps are in.

The server (`ControlServerProcess`, a Ray actor on ``backend="ray"``) holds a copy of the
learner. It averages each optimiser's gradients over the results that carry them
(weighted by batch size), steps that optimiser, then runs the algorithm's
`_after_update` (the target networks' move) and counts the update. So an update under
BSP with one worker is the single-process update computed at the same weights, except
that SAC's actor and temperature losses see the critic before (not after) that update's
critic step. The learner pulls the state and the optimisers back after every round, so
`save`, `evaluate` and `policy` see the trained networks; the workers' replays and
environments stay in the workers (a checkpoint holds the networks, optimisers and counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from pbmarl.distributed.executors import make_executor
from pbmarl.distributed.modes import Rounds
from pbmarl.distributed.server import RemoteServer
from pbmarl.distributed.workers import weighted_means
from pbmarl.hosting.hosted import Hosted
from pbmarl.rollout.worker import game_for_worker
from pbmarl.torchutil import copy_state

__all__ = ["ControlResult", "ControlRounds", "server_round", "ControlServer", "ControlServerProcess", "ControlWorker",
           "StateProcess", "StateServer", "get_state", "named_optimizers", "record_steps", "set_state", "step_on_mean"]


def _stateful(learner: Any) -> list[tuple[str, Any]]:
    """The learner's saved entries that are not optimisers, in `_modules` order."""
    return [(k, m) for k, m in learner._modules().items() if not isinstance(m, torch.optim.Optimizer)]


def named_optimizers(learner: Any) -> list[tuple[str, torch.optim.Optimizer]]:
    """The learner's optimisers by their saved names, in `_modules` order."""
    return [(k, m) for k, m in learner._modules().items() if isinstance(m, torch.optim.Optimizer)]


def _tensors(learner: Any) -> list[tuple[Any, str, torch.Tensor]]:
    """``(entry, key, tensor)`` of every state tensor, the modules' own (written in place)."""
    out: list[tuple[Any, str, torch.Tensor]] = []
    for _, m in _stateful(learner):
        state = m.state_dict(keep_vars=True) if isinstance(m, torch.nn.Module) else m.state_dict()
        out.extend((m, k, t) for k, t in state.items())
    return out


def get_state(learner: Any) -> np.ndarray:
    """Every tensor of the learner's networks (targets included) as one flat float32 vector."""
    parts = [t.detach().reshape(-1).to(torch.float32) for _, _, t in _tensors(learner)]
    return torch.cat(parts).numpy().copy() if parts else np.zeros(0, np.float32)


def set_state(learner: Any, vector: np.ndarray) -> None:
    """Load what `get_state` returned into the learner's networks (in place); its length must match."""
    entries = _tensors(learner)
    total = sum(t.numel() for _, _, t in entries)
    if np.shape(vector) != (total,):
        raise ValueError(f"state vector must have shape ({total},), got {np.shape(vector)}")
    flat = torch.from_numpy(np.array(vector, dtype=np.float32))
    offset = 0
    with torch.no_grad():
        for entry, key, t in entries:
            k = t.numel()
            value = flat[offset:offset + k].view(t.shape).to(t.dtype)
            if isinstance(entry, torch.nn.Module):
                t.copy_(value)
            else:  # a lone parameter's box: its own load
                entry.load_state_dict({key: value})
            offset += k


def _flat_grad(opt: torch.optim.Optimizer) -> np.ndarray:
    params = [p for group in opt.param_groups for p in group["params"]]
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
                     ).detach().numpy().copy()


def record_steps(learner: Any, sink: dict[str, np.ndarray]) -> None:
    """Make every optimiser of `learner` record instead of step: ``opt.step()`` puts that optimiser's
    flat gradient into ``sink[name]`` and leaves the weights alone (the worker clears `sink` per job).

    A second step of one optimiser before the sink is cleared raises: a job is one gradient each.
    """
    for name, opt in named_optimizers(learner):
        opt.step = _recorder(name, opt, sink)  # type: ignore[method-assign]


def _recorder(name: str, opt: torch.optim.Optimizer, sink: dict[str, np.ndarray]) -> Any:
    def step(closure: Any = None) -> None:
        if name in sink:
            raise RuntimeError(f"optimiser {name!r} stepped twice in one parameter-server job; a job takes "
                               "one gradient of each optimiser (set the learner's one-gradient options)")
        sink[name] = _flat_grad(opt)

    return step


def step_on_mean(opt: torch.optim.Optimizer, rows: Sequence[tuple[np.ndarray, int]]) -> None:
    """Step `opt` once on the count-weighted mean of the flat gradients ``(gradient, count)`` of `rows`."""
    n = np.array([c for _, c in rows], dtype=float)
    mean = torch.as_tensor(np.tensordot(n / n.sum(), np.stack([g for g, _ in rows]), axes=1), dtype=torch.float32)
    offset = 0
    for p in (p for group in opt.param_groups for p in group["params"]):
        k = p.numel()
        p.grad = mean[offset:offset + k].view_as(p).clone()
        offset += k
    opt.step()


@dataclass(frozen=True)
class ControlResult:
    """A control worker's job: per-optimiser gradients (None: it only collected), and its data's counts."""

    grad: dict[str, np.ndarray] | None
    version: int
    seeds: tuple[int, ...]
    env_steps: int
    """Env steps the job played (counted into the learner when the result is consumed)."""
    returns: tuple[float, ...]
    """Returns of the episodes that ended during the job."""
    stats: dict[str, float]
    """The losses `_update` reported (empty without a gradient)."""
    batch: int
    """Samples the gradients average over."""

    @property
    def count(self) -> int:
        return 0 if self.grad is None else self.batch


class ControlWorker:
    """One control worker (an ordinary object locally, a Ray actor on Ray); see the module doc.

    Args:
        game: the game, or what `game_for_worker` sends for it.
        learner_class: `SAC`, `TD3`, ... (built with ``workers=1``).
        config: the learner's config.
        seed: seeds the worker's networks (overwritten by every job's state).
    """

    def __init__(self, game: Any, learner_class: type, config: Any, seed: int) -> None:
        from pbmarl.games.base import Game

        if not isinstance(game, Game):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        torch.set_num_threads(1)
        self.learner = learner_class(game, config=replace(config, workers=1), seed=int(seed))
        self.obs: np.ndarray | None = None
        self.episode_return = 0.0
        self.recorded: dict[str, np.ndarray] = {}
        record_steps(self.learner, self.recorded)

    def compute(self, state: np.ndarray, version: int, seeds: Sequence[int], env_steps: int) -> ControlResult:
        """Load `state` (at `version`), play ``train_freq`` env steps, then one recorded `_update`."""
        learner, cfg = self.learner, self.learner.config
        seeds = tuple(int(s) for s in seeds)
        set_state(learner, state)
        learner.updates, learner.env_steps = int(version), int(env_steps)
        learner.rng = np.random.default_rng(seeds[0])
        learner.gen.manual_seed(seeds[0] % 2**63)
        returns: list[float] = []
        with torch.no_grad():
            for _ in range(cfg.train_freq):
                if self.obs is None:
                    self.obs, self.episode_return = learner.env.reset(int(learner.rng.integers(2**31))), 0.0
                obs = self.obs
                if learner.env_steps < cfg.learning_starts:
                    action = learner._random_action()
                else:
                    action = learner._explore(obs)
                next_obs, reward, terminated, truncated = learner.env.step(action)
                learner._store(obs, action, reward, terminated, next_obs, terminated or truncated)
                self.episode_return += reward
                learner.env_steps += 1
                self.obs = next_obs
                if terminated or truncated:
                    returns.append(self.episode_return)
                    self.obs = None
        if learner.env_steps < cfg.learning_starts:
            return ControlResult(None, int(version), seeds, cfg.train_freq, tuple(returns), {}, 0)
        self.recorded.clear()
        batch = learner._sample()
        stats = learner._train_step(batch)
        return ControlResult(dict(self.recorded), int(version), seeds, cfg.train_freq, tuple(returns),
                             {k: float(v) for k, v in stats.items()}, len(batch.obs))

    def ping(self) -> bool:
        return True


class StateProcess:
    """What a hosted copy that keeps a whole learner state (networks, targets, optimisers) publishes:
    versioned state vectors for the workers, and its state with the optimisers' for `StateServer.pull`.
    Subclasses set `owner` (what answers ``_modules()``) and call `_load`."""

    owner: Any
    version: int

    def _load(self, state: np.ndarray, optimizers: dict[str, dict[str, Any]], version: int) -> None:
        set_state(self.owner, state)
        for name, opt in named_optimizers(self.owner):
            opt.load_state_dict(optimizers[name])
        self.version = int(version)
        self._published = (self.version, get_state(self.owner))

    def weights(self) -> tuple[int, np.ndarray]:
        if self._published[0] != self.version:
            self._published = (self.version, get_state(self.owner))
        return self._published

    def _extra_state(self) -> tuple[Any, ...]:
        """What `state` returns after the optimisers (default: nothing)."""
        return ()

    def state(self) -> tuple[Any, ...]:
        """``(version, state vector, optimiser state_dicts by name, *_extra_state())``, copies."""

        return (self.version, get_state(self.owner).copy(),
                {k: copy_state(opt.state_dict()) for k, opt in named_optimizers(self.owner)}, *self._extra_state())

    def ping(self) -> bool:
        return True


class ControlServerProcess(StateProcess):
    """A copy of the learner that applies averaged per-optimiser gradients (the server actor's body).

    Args:
        game, learner_class, config: build the copy (``workers=1``).
        state: the learner's `get_state` vector; optimizers: its optimisers' ``state_dict`` by name.
        version: the updates the learner has taken.
    """

    def __init__(self, game: Any, learner_class: type, config: Any, state: np.ndarray,
                 optimizers: dict[str, dict[str, Any]], version: int) -> None:
        from pbmarl.games.base import Game

        if not isinstance(game, Game):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        torch.set_num_threads(1)
        self.learner = self.owner = learner_class(game, config=replace(config, workers=1), seed=0)
        self._load(state, optimizers, version)
        self.learner.updates = self.version

    def apply(self, grads: Sequence[dict[str, np.ndarray]], counts: Sequence[int], versions: Sequence[int],
              lr: float | None = None) -> np.ndarray:
        """One update: each optimiser steps on the count-weighted mean of the gradients that carry it."""
        for name, opt in named_optimizers(self.learner):
            rows = [(g[name], n) for g, n in zip(grads, counts) if name in g]
            if rows:  # none: e.g. TD3's actor between delayed updates
                step_on_mean(opt, rows)
        self.learner._after_update()
        self.learner.updates += 1
        self.version += 1
        return self.weights()[1]


class StateServer(RemoteServer):
    """The handle on a `StateProcess`: `RemoteServer`'s versions, publishing and checks, with
    per-optimiser gradients (each optimiser keeps its own learning rate) and the whole state pulled
    back into `owner`; what the process returns beyond it goes to `_pulled`.

    Args:
        owner: what answers ``_modules()`` (the learner, or a MARL run's `Team`).
        process: the `StateProcess` class, built with ``(*args, state, optimizers, *extra, version)``.
        version: the updates applied so far.
    """

    def __init__(self, owner: Any, process: type, args: tuple[Any, ...], version: int, *, backend: str,
                 extra: tuple[Any, ...] = ()) -> None:
        self.owner = owner
        self.version = int(version)
        #: staleness of every applied gradient, in order
        self.staleness: list[int] = []
        state = get_state(owner)
        self.host = Hosted(process, (*args, state, {k: o.state_dict() for k, o in named_optimizers(owner)}, *extra,
                                     self.version), backend=backend, name="parameter server")
        self._published: tuple[int, Any] = (self.version, self.host.put(state))

    def _lr(self) -> float | None:
        return None  # each optimiser keeps its own

    def pull(self) -> int:
        """Copy the server's networks and optimisers into `owner`; returns the version."""
        version, state, optimizers, *extra = self.host.call("state")
        if version != self.version:
            raise RuntimeError(f"parameter server is at version {version}, expected {self.version}")
        set_state(self.owner, state)
        for name, opt in named_optimizers(self.owner):
            opt.load_state_dict(optimizers[name])
        self._pulled(int(version), *extra)
        return int(version)

    def _pulled(self, version: int, *extra: Any) -> None:
        """After `pull` copied the state: what else follows it (counts, caches)."""


class ControlServer(StateServer):
    """The learner's handle on a `ControlServerProcess` (its `updates` follow the server's version)."""

    def __init__(self, learner: Any, spec: Any, *, backend: str) -> None:
        self.learner = learner
        super().__init__(learner, ControlServerProcess, (spec, type(learner), learner.config), int(learner.updates),
                         backend=backend)

    def _pulled(self, version: int, *extra: Any) -> None:
        self.learner.updates = version


class ControlRounds(Rounds):
    """A control learner's rounds on the parameter server (built by `ControlLearner.step`)."""

    def __init__(self, learner: Any) -> None:
        cfg = learner.config
        spec = game_for_worker(learner.game)
        base = int(learner.rng.integers(2**31))

        def args(w: int) -> tuple[Any, ...]:
            return (spec, type(learner), cfg, base + w)

        super().__init__(learner, ControlServer(learner, spec, backend=cfg.backend),
                         make_executor(cfg.backend, args, cfg.workers, ControlWorker),
                         mode=cfg.sync, staleness=cfg.staleness, workers=cfg.workers)

    def _count(self, result: ControlResult) -> tuple[int, int]:
        self.learner.env_steps += result.env_steps
        self.learner.episodes += len(result.returns)
        return result.env_steps, result.env_steps

    def _job_args(self) -> tuple[Any, ...]:
        return (self.learner.env_steps,)

    def _summary(self, got: list[ControlResult], staleness: list[int]) -> tuple[list[float], dict[str, float]]:
        """The returns of the episodes that ended this round, and the losses' batch-weighted means."""
        stats = weighted_means([(r.stats, r.count) for r in got if r.count > 0])
        stats["max_staleness"] = float(max(staleness, default=0))
        return [x for r in got for x in r.returns], stats


def server_round(learner: Any) -> tuple[list[float], dict[str, list[float]]]:
    """One `ControlLearner.step` on the parameter server: rounds of `workers` jobs until ``steps_per_round`` env
    steps (or the rest of the budget); the returns of the episodes that ended and the rounds' losses. The
    server (built by the first call) hands its networks, optimisers and ``updates`` back at the end."""
    from pbmarl.torchutil import torch_threads

    cfg = learner.config
    start = learner.env_steps
    goal = cfg.steps_per_round if learner.done else min(cfg.steps_per_round, cfg.budget - learner.env_steps)
    returns: list[float] = []
    losses: dict[str, list[float]] = {}
    with torch_threads(cfg.num_threads):
        if learner._rounds is None:
            learner._rounds = ControlRounds(learner)
        while learner.env_steps - start < goal:
            done, stats = learner._rounds.round(pull=False)
            returns.extend(done)
            for k, v in stats.items():
                losses.setdefault(k, []).append(v)
        learner._rounds.server.pull()
    return returns, losses
