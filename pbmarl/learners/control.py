"""`ControlLearner`: the base of the single-agent off-policy learners (Rainbow, DDPG, TD3, SAC, HDDPG).

Plain RL on a one-player game, stepped like every pbmarl object::

    learner = pb.SAC(pb.load_game("gym:Pendulum-v1"), seed=0)
    rec = learner.step()            # one round: env steps, mean episode return, losses, seconds
    for rec in learner.run(20):     # 20 more rounds (a progress bar in a notebook or terminal)
        ...
    learner.history                 # one row per round
    learner.evaluate(10)            # deterministic return over 10 fresh episodes
    learner.save("runs/sac"); pb.SAC(game, seed=0).load("runs/sac")   # resumes exactly

A round collects whole episodes (at least ``steps_per_round`` env steps), one env
step at a time, taking ``gradient_steps`` updates every ``train_freq`` steps once
``learning_starts`` steps are in, as Stable-Baselines3 and CleanRL do. Rounds end
between episodes, so a save after a round holds everything the next round needs:
networks, optimisers, the replay buffer and the random states. Each episode is
reset with a seed drawn from the learner's generator, so the same seed gives the
same run, and a resumed run equals an uninterrupted one. The one exception is the round
that reaches the budget: it stops at `stop_step` (the budget rounded up to a whole
``train_freq``, right after the last burst, where Stable-Baselines3's ``learn`` stops),
cutting its last episode, so every run ends on the same burst whatever its policy does.

An algorithm fills in `_build` (networks, optimisers), `_act` (one action),
`_update` (one gradient step, returning its losses), `_modules` (what `save` keeps)
and `_policy` (the policy handed back).

With ``workers > 1`` a round runs on a parameter server (``sync`` "bsp", "asp" or "bap";
`pbmarl.distributed.control_rounds`): workers with their own environments and replays push
per-optimiser gradients, the server applies them and moves the targets. ``backend="ray"``
makes the workers and the server Ray actors; `close()` stops them.

The same learner is also an oracle (`best_response` / `respond`): on a one-player game
it trains itself; built on a game of several seats it is an oracle only, and each
answer trains a fresh learner for the seat asked (`pbmarl.learners.seat_oracle`).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from pbmarl.distributed.on_server import OnServer
from pbmarl.games.base import Game
from pbmarl.learners.buffers import Batch, PrioritizedReplayBuffer, ReplayBuffer
from pbmarl.learners.control_config import ControlConfig, ControlRecord, PrioritizedOptions
from pbmarl.learners.nets import torch_threads
from pbmarl.learners.recorded import Recorded
from pbmarl.learners.step_env import EnvSource, StepEnv, episode_returns, single_agent_env
from pbmarl.policies.neural import bfloat16_products
from pbmarl.protocols import BestResponse

__all__ = ["ControlConfig", "ControlLearner", "ControlRecord", "PrioritizedOptions", "EnvSource", "StepEnv", "single_agent_env"]

_BASE = frozenset(f.name for f in dataclasses.fields(ControlRecord))


# -- the learner ----------------------------------------------------------------------
class ControlLearner(Recorded, OnServer, abc.ABC):
    """Base of the step-by-step off-policy learners; see the module doc.

    Args:
        game: a one-player game or its name (``"gym:Pendulum-v1"``, ``"mdp:two_round_dmdp"``).
        config: the algorithm's config dataclass; keyword options override its fields.
        seed: seeds networks, exploration, replay sampling and every episode's reset.
    """

    name: ClassVar[str] = "control"
    config_class: ClassVar[type[ControlConfig]] = ControlConfig
    record_class: ClassVar[type[ControlRecord]] = ControlRecord
    #: the action spaces this algorithm supports: "box", "discrete" or both
    spaces: ClassVar[tuple[str, ...]] = ("box",)

    def __init__(self, game: Game | str, *, config: ControlConfig | None = None, seed: int = 0,
                 **options: Any) -> None:
        from pbmarl.learners.registry import make_config

        if isinstance(game, str):
            from pbmarl.games.registry import load_game

            game = load_game(game)
        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.game = game
        self.config: ControlConfig = make_config(  # type: ignore[assignment]
            self.config_class, config, options, owner=type(self).__name__)
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.gen = torch.Generator().manual_seed(int(self.rng.integers(2**63 - 1)))
        self.records: list[ControlRecord] = []
        self.env_steps = 0
        self.updates = 0
        self.episodes = 0
        #: a game of several seats: this learner is an oracle only (`best_response` trains a fresh one per seat)
        self.multi_seat = game.num_players > 1
        self.responses = 0
        self._rounds: Any = None  # the parameter server's rounds (workers > 1), built by the first step
        if self.multi_seat:
            if self.config.workers > 1:
                raise ValueError(f"workers={self.config.workers}: a parameter server trains a one-player game; "
                                 f"{game.name!r} has {game.num_players} seats (use workers=1)")
            from pbmarl.learners.seat_oracle import seat_game

            seat_game(game, who=type(self).__name__)  # a game the multi-agent rollout path can step, or a clear error now
            for p in range(game.num_players):
                self._space_kind(game.action_space(p), who=f"player {p} of ")
            return
        self.env = single_agent_env(game, who=type(self).__name__)
        self.space = self._space_kind(self.env.action_space)
        self.obs_dim = int(np.prod(self.env.observation_shape))
        self._build()
        self.replay = self._make_buffer()

    def _space_kind(self, space: Any, *, who: str = "") -> str:
        from gymnasium import spaces

        kind = "box" if isinstance(space, spaces.Box) else "discrete" if isinstance(space, spaces.Discrete) else None
        if kind is None or kind not in self.spaces:
            accepted = " or ".join(f"{s.capitalize() if s == 'box' else 'Discrete'}" for s in self.spaces)
            alt = {"box": "SAC, DDPG, TD3 or HDDPG", "discrete": "Rainbow, SAC or DQN"}.get(kind or "", "")
            raise ValueError(f"{type(self).__name__} needs {accepted} actions; {who}{self.game.name!r} has {space}"
                             + (f" (try {alt})" if alt else ""))
        if kind == "box":
            low, high = np.asarray(space.low), np.asarray(space.high)
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
                raise ValueError(f"{type(self).__name__} needs a bounded Box action space, got {space}")
            if self.multi_seat:
                return kind
            self.act_low, self.act_high = low.astype(np.float32), high.astype(np.float32)
            self.act_dim = int(np.prod(space.shape))
        else:
            self.num_actions = int(space.n)
        return kind

    def _make_buffer(self) -> ReplayBuffer:
        """Uniform replay, or prioritised where the config has `PrioritizedOptions` with ``prioritized``."""
        cfg = self.config
        shape: tuple[int, ...] = (self.act_dim,) if self.space == "box" else ()
        dtype: type = np.float32 if self.space == "box" else np.int64
        if isinstance(cfg, PrioritizedOptions) and cfg.prioritized:
            return PrioritizedReplayBuffer(cfg.buffer_size, (self.obs_dim,), 1, alpha=cfg.priority_alpha,
                                           beta=cfg.priority_beta, action_shape=shape, action_dtype=dtype)
        return ReplayBuffer(self.config.buffer_size, (self.obs_dim,), 1, action_shape=shape, action_dtype=dtype)

    def _seeded(self) -> int:
        """A fresh seed for building one network (drawn from the learner's generator)."""
        return int(self.rng.integers(2**31))

    # -- the algorithm's hooks ---------------------------------------------------------
    @abc.abstractmethod
    def _build(self) -> None:
        """Networks and optimisers (seeded from `self.rng`)."""

    @abc.abstractmethod
    def _act(self, obs: torch.Tensor, *, deterministic: bool) -> np.ndarray | int:
        """The action for one observation ``[1, D]``: exploring, or the greedy/mean action."""

    def _explore(self, obs: np.ndarray) -> np.ndarray | int:
        """The exploring action for one observation ``[D]`` while collecting (`_act` without gradients)."""
        with torch.no_grad():
            return self._act(torch.as_tensor(obs).view(1, -1), deterministic=False)

    @abc.abstractmethod
    def _update(self, batch: Batch) -> dict[str, float]:
        """One gradient step on `batch`; the losses by name."""

    def _train_step(self, batch: Batch) -> dict[str, float]:
        """`_update` on `batch`, its hidden-to-hidden matmuls in bfloat16 where ``matmul_precision`` says so."""
        with self._precision():
            return self._update(batch)

    def _precision(self) -> contextlib.AbstractContextManager[Any]:
        """The matmul precision of updates: nothing for float32, bfloat16 autocast for bfloat16, oneDNN's
        bfloat16 math mode for medium (see `ControlConfig.matmul_precision`).

        The autocast cache is off: an update that steps one optimiser and then reads those weights
        again (the actor's loss through the critic) must see the new values, not a stale cast.
        """
        if self.config.matmul_precision == "float32":
            return contextlib.nullcontext()
        if self.config.matmul_precision == "medium":
            return bfloat16_products()
        return torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False)

    def _burst(self, n: int, losses: dict[str, list[float]]) -> None:
        """`n` gradient steps in a row, with no env step between them (every ``train_freq`` steps); each
        step's losses are appended to `losses`. `Rainbow` batches what the steps share."""
        for _ in range(n):
            for k, v in self._train_step(self._sample()).items():
                losses.setdefault(k, []).append(v)
            self.updates += 1

    def _after_update(self) -> None:
        """What follows update number ``updates + 1``'s optimiser steps (the target networks' move).

        `_update` calls it last; a parameter server calls it after applying the workers' gradients.
        """

    @abc.abstractmethod
    def _modules(self) -> dict[str, Any]:
        """Everything with ``state_dict`` / ``load_state_dict`` that `save` keeps."""

    def _random_action(self) -> np.ndarray | int:
        if self.space == "box":
            return self.rng.uniform(self.act_low, self.act_high).astype(np.float32)
        return int(self.rng.integers(self.num_actions))

    def _store(self, obs: np.ndarray, action: Any, reward: float, terminated: bool, next_obs: np.ndarray,
               episode_end: bool) -> None:
        """Put one transition into the replay buffer (Rainbow overrides this for n-step returns)."""
        self.replay.append(obs, action, reward, terminated, next_obs)

    def _sample(self) -> Batch:
        return self.replay.sample(self.config.batch_size, self.rng)

    # -- stepping ----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Whether the budget of environment steps is spent."""
        return self.env_steps >= self.config.budget

    def step(self) -> ControlRecord:
        """One round: whole episodes until ``steps_per_round`` env steps (or the rest of the budget), updating
        as they come; the round that reaches the budget goes on to `stop_step` and ends there, mid-episode if
        need be (that episode's return is not in the record). A round asked for after the budget is spent
        runs ``steps_per_round`` steps."""
        self._one_seat("step()")
        cfg = self.config
        if cfg.workers > 1:
            return self._server_step()
        t0 = time.perf_counter()
        returns: list[float] = []
        losses: dict[str, list[float]] = {}
        start = self.env_steps
        goal = cfg.steps_per_round if self.done else min(cfg.steps_per_round, cfg.budget - self.env_steps)
        stop = None if self.done else self.stop_step  # once past the budget, on to exactly stop_step
        with torch_threads(cfg.num_threads):
            while self.env_steps - start < goal or (stop is not None and cfg.budget <= self.env_steps < stop):
                total = self._episode(losses, stop)
                if total is None:  # cut at the budget
                    break
                returns.append(total)
        return self._record(t0, returns, losses)

    @property
    def stop_step(self) -> int:
        """The env step a run within its budget stops at: the budget rounded up to a whole ``train_freq``,
        just after the last burst (where Stable-Baselines3's ``learn`` stops), even mid-episode.

        Finishing the last episode instead would make the final policy depend on how good it is: a policy
        that keeps CartPole up runs on into one or two more bursts (each a chance to collapse), one that
        drops the pole early stops before the burst that might mend it. Over 24 seeds of the CartPole DQN
        benchmark that put the end snapshot at 500 in 7 runs against 11.8 expected from its bursts."""
        freq = self.config.train_freq
        return -(-self.config.budget // freq) * freq

    def _record(self, t0: float, returns: list[float], losses: dict[str, list[float]]) -> ControlRecord:
        """Append and return the record of the round that began at `t0`: its episodes' returns, its losses' means."""
        record = self.record_class(
            task=0, player=0, round=len(self.records) + 1, learner_steps=self.env_steps, env_steps=self.env_steps,
            episodes=len(returns), mean_return=_mean(returns), seconds=time.perf_counter() - t0,
            updates=self.updates, loss=_mean(losses.get("loss")), **{
                f.name: _mean(losses.get(f.name)) for f in dataclasses.fields(self.record_class) if f.name not in _BASE},
        )
        self.records.append(record)
        return record

    def _server_step(self) -> ControlRecord:
        """One round on the parameter server: rounds of `workers` jobs until ``steps_per_round`` env steps."""
        from pbmarl.distributed.control_rounds import ControlRounds

        cfg = self.config
        t0 = time.perf_counter()
        start = self.env_steps
        goal = cfg.steps_per_round if self.done else min(cfg.steps_per_round, cfg.budget - self.env_steps)
        returns: list[float] = []
        losses: dict[str, list[float]] = {}
        with torch_threads(cfg.num_threads):
            if self._rounds is None:
                self._rounds = ControlRounds(self)
            while self.env_steps - start < goal:
                done, stats = self._rounds.round(pull=False)
                returns.extend(done)
                for k, v in stats.items():
                    losses.setdefault(k, []).append(v)
            self._rounds.server.pull()  # networks, optimisers and `updates` back into this learner
        return self._record(t0, returns, losses)

    def _episode(self, losses: dict[str, list[float]], stop: int | None = None) -> float | None:
        """One episode's return; None if it was cut at env step `stop` (its transitions are kept, the
        last one as a truncation)."""
        cfg = self.config
        obs = self.env.reset(int(self.rng.integers(2**31)))
        total = 0.0
        while True:
            if self.env_steps < cfg.learning_starts:
                action = self._random_action()
            else:
                action = self._explore(obs)
            next_obs, reward, terminated, truncated = self.env.step(action)
            cut = stop is not None and self.env_steps + 1 >= stop and not (terminated or truncated)
            self._store(obs, action, reward, terminated, next_obs, terminated or truncated or cut)
            total += reward
            self.env_steps += 1
            if self.env_steps >= cfg.learning_starts and self.env_steps % cfg.train_freq == 0:
                self._burst(cfg.gradient_steps, losses)
            if terminated or truncated:
                self.episodes += 1
                return total
            if cut:
                return None
            obs = next_obs

    def run(self, rounds: int | None = None, *, progress: bool | None = None) -> Iterator[ControlRecord]:
        """Yield the records of `rounds` more rounds (default: until the budget is spent), with a progress bar.

        The bar (tqdm, in a notebook or a terminal) shows env steps and the last mean return;
        ``progress=False`` turns it off.
        """
        if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer))
                                   or rounds < 1):
            raise ValueError(f"rounds must be a positive int or None (until the budget), got {rounds!r}")
        bar = _bar(progress, total=rounds if rounds is not None else self.config.budget,
                   desc=type(self).__name__, initial=0 if rounds is not None else min(self.env_steps,
                                                                                     self.config.budget))
        n = 0
        try:
            while (rounds is None and not self.done) or (rounds is not None and n < rounds):
                before = self.env_steps
                rec = self.step()
                n += 1
                if bar is not None:
                    bar.update(1 if rounds is not None else min(rec.env_steps, self.config.budget)
                               - min(before, self.config.budget))
                    bar.set_postfix(steps=rec.env_steps, ret=f"{rec.mean_return:.4g}")
                yield rec
        finally:
            if bar is not None:
                bar.close()

    def train(self, *, progress: bool | None = False) -> pd.DataFrame:
        """Run until the budget is spent; returns `history`."""
        for _ in self.run(progress=progress):
            pass
        return self.history

    # -- using the result ----------------------------------------------------------------
    def act(self, obs: np.ndarray, *, deterministic: bool = True) -> np.ndarray | int:
        """The learner's action for one observation (greedy / mean action when `deterministic`)."""
        self._one_seat("act()")
        with torch.no_grad(), torch_threads(self.config.num_threads):
            return self._act(torch.as_tensor(np.asarray(obs, np.float32)).view(1, -1), deterministic=deterministic)

    def evaluate(self, episodes: int | None = None, *, deterministic: bool = True, seed: int | None = None
                 ) -> dict[str, float]:
        """Mean return (and its standard error) over fresh episodes; training state is untouched.

        Episode seeds come from `seed` (default: derived from the learner's seed and
        its env steps), never from the training generator, so evaluating does not
        change the rest of the run.
        """
        self._one_seat("evaluate() of its own (respond() evaluates each answer)")
        episodes = self.config.eval_episodes if episodes is None else episodes
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise ValueError(f"episodes must be a positive int, got {episodes!r}")
        rng = np.random.default_rng([self.seed, self.env_steps, 7] if seed is None else seed)
        saved_gen = self.gen.get_state()
        r = np.asarray(episode_returns(self.game, lambda obs: self.act(obs, deterministic=deterministic),
                                       int(episodes), rng))
        self.gen.set_state(saved_gen)
        return {"mean": float(r.mean()), "stderr": float(r.std(ddof=1) / np.sqrt(len(r))) if len(r) > 1 else 0.0,
                "episodes": float(len(r))}

    def policy(self) -> Any:
        """The trained policy, as a copy (training goes on unaffected)."""
        self._one_seat("policy() of its own (best_response returns each seat's)")
        return self._policy()

    @abc.abstractmethod
    def _policy(self) -> Any:
        """The algorithm's copy of its trained policy (`policy` checks first that there is one)."""

    def best_response(self, player: int, opponents: Sequence[Any] = (None,), *, budget: int | None = None) -> Any:
        """PSRO oracle: train for seat `player` against `opponents` and return the trained policy.

        On a one-player game this learner trains on (until its budget, or `budget` more env
        steps). On a game of several seats (PettingZoo Parallel, matrix games) each call trains
        a fresh learner of the same algorithm and config for that seat, every other seat playing
        its fixed entry of `opponents` (`pbmarl.learners.seat_oracle`).
        """
        from pbmarl.learners.seat_oracle import control_best_response

        return control_best_response(self, player, opponents, budget)

    def respond(self, player: int, opponents: Sequence[Any] = (None,)) -> BestResponse:
        """The `Oracle` seam: `best_response` with the config's budget; ``BestResponse(policy, value, env_steps)``."""
        from pbmarl.learners.seat_oracle import control_respond

        return control_respond(self, player, opponents)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.game.name!r}, seed={self.seed}, env_steps={self.env_steps})"

    def _one_seat(self, what: str) -> None:
        if self.__dict__.get("multi_seat"):
            raise ValueError(f"{type(self).__name__} on {self.game.name!r} ({self.game.num_players} seats) is an "
                             f"oracle only, so it has no {what}: call best_response(player, opponents) or respond(), "
                             "or train independent agents with pb.Independent and pb.MARL")

    # -- files -------------------------------------------------------------------------
    def _extra_arrays(self) -> dict[str, np.ndarray]:
        """Arrays beside the replay buffer that `save` keeps (Rainbow's n-step discounts)."""
        return {}

    def _load_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what `_extra_arrays` returned."""

    def save(self, folder: str | Path) -> Path:
        """Write the whole state into `folder` (each file atomically, ``learner.json`` last;
        `pbmarl.learners.control_files`)."""
        from pbmarl.learners.control_files import save_learner

        self._one_seat("save()")
        return save_learner(self, folder)

    def load(self, folder: str | Path) -> ControlLearner:
        """Restore what `save` wrote into this learner (built with the same spec); returns self."""
        from pbmarl.learners.control_files import load_learner

        load_learner(self, folder)
        self.close()  # a parameter server (workers > 1) restarts from the loaded state
        return self


def _bar(progress: bool | None, *, total: int, desc: str, initial: int) -> Any:
    if progress is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with the notebook extra
        return None
    return tqdm(total=total, desc=desc, initial=initial, disable=progress is None and not _interactive())


def _interactive() -> bool:
    import sys

    return bool(getattr(sys.stderr, "isatty", lambda: False)()) or "ipykernel" in sys.modules


def _mean(values: list[float] | None) -> float:
    return float(np.mean(values)) if values else math.nan
