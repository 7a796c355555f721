"""`ControlLearner`: the base of the single-agent off-policy learners (Rainbow, DDPG, TD3, SAC, HDDPG).

Plain RL on a one-player game, a run like every other (`pbmarl.runs.Run`)::

    learner = pb.SAC("gym:Pendulum-v1", seed=0)
    rec = learner.step()            # one round: env steps, mean episode return, losses, seconds
    learner.run(20)                 # 20 more rounds (a progress bar in a notebook or terminal)
    learner.run()                   # on to the budget
    learner.history                 # one row per round: return/0, loss/critic, time/round, updates, ...
    learner.evaluate(10)            # a pb.EvalResult over 10 fresh episodes; training state untouched
    learner.save("runs/sac"); pb.load_run("runs/sac")   # resumes exactly

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

A round is all-or-nothing: an exception or a Ctrl-C anywhere inside it puts back the
networks, optimisers, counters, random generators and the replay rows it overwrote
(`snapshot` / `restore`; the buffer keeps only the rows a round overwrites, `ReplayBuffer.mark`).

An algorithm fills in `_build` (networks, optimisers), `_act` (one action),
`_update` (one gradient step, returning its losses), `_modules` (what `save` keeps)
and `_policy` (the policy handed back).

With ``workers > 1`` a round runs on a parameter server (``sync`` "bsp", "asp" or "bap";
`pbmarl.learners.control.rounds`): workers with their own environments collect into the
learner's replay and push per-optimiser gradients of minibatches it draws, the server applies
them and moves the targets. ``backend="ray"`` makes the workers and the server Ray actors;
`close()` stops them. A save, and a round undone, keep the replay, the jobs in flight and each
worker's episode (its reset seed and actions, replayed by a rebuilt worker), so it resumes exactly
too (`pbmarl.learners.control.jobs`; BAP's waiting gradients aside).

The same learner is also an oracle (`best_response` / `respond`): on a one-player game
it trains itself; built on a game of several seats it is an oracle only, and each
answer trains a fresh learner for the seat asked (`pbmarl.learners.control.seat_oracle`).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from pbmarl.config import build_config, check_seed, is_int
from pbmarl.distributed.on_server import OnServer
from pbmarl.games.base import Game
from pbmarl.learners.common.buffers import Batch, PrioritizedReplayBuffer, ReplayBuffer, check_memory
from pbmarl.learners.common.config import refuse_device
from pbmarl.learners.common.recorded import Recorded
from pbmarl.learners.control.config import ControlConfig, ControlRecord, PrioritizedOptions
from pbmarl.learners.control.step_env import EnvSource, StepEnv, evaluate_policy, single_agent_env, space_kind
from pbmarl.policies.neural import bfloat16_products
from pbmarl.protocols import BestResponse
from pbmarl.runs import Run
from pbmarl.runs.transaction import all_or_nothing
from pbmarl.torchutil import copy_state, torch_threads

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.rollout.results import EvalResult
    from pbmarl.runs import SavedRun, State

__all__ = ["ControlConfig", "ControlLearner", "ControlRecord", "PrioritizedOptions", "EnvSource", "StepEnv", "single_agent_env"]

_BASE = frozenset(f.name for f in dataclasses.fields(ControlRecord))


# -- the learner ----------------------------------------------------------------------
class ControlLearner(Run, Recorded, OnServer, abc.ABC):
    """Base of the step-by-step off-policy learners; see the module doc.

    Args:
        game: a one-player game or its name (``"gym:Pendulum-v1"``, ``"mdp:two_round_dmdp"``).
        seed: seeds networks, exploration, replay sampling and every episode's reset.
        config: the algorithm's config dataclass; keyword options override its fields.
    """

    name: ClassVar[str] = "control"
    config_class: ClassVar[type[ControlConfig]] = ControlConfig
    record_class: ClassVar[type[ControlRecord]] = ControlRecord
    history_columns: ClassVar[tuple[str, ...]] = ControlRecord.columns()
    #: the action spaces this algorithm supports: "box", "discrete" or both
    spaces: ClassVar[tuple[str, ...]] = ("box",)
    records: list[ControlRecord]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.history_columns = cls.record_class.columns()

    def __init__(self, game: Game | str, *, seed: int = 0, config: ControlConfig | None = None,
                 **options: Any) -> None:
        if isinstance(game, str):
            from pbmarl.games.registry import load_game

            game = load_game(game)
        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        self.game = game
        self.config: ControlConfig = build_config(self.config_class, config, options, owner=type(self).__name__)
        refuse_device(self.config.device, type(self).__name__, "its acting and its updates draw their noise from a CPU torch "
                      "generator, which keeps its runs reproducible")
        self.seed = check_seed(seed)
        self.rng = np.random.default_rng(self.seed)
        self.gen = torch.Generator().manual_seed(int(self.rng.integers(2**63 - 1)))
        self.records = []
        self.env_steps = 0
        self.updates = 0
        self.episodes = 0
        self.wall_time = 0.0
        #: a game of several seats: this learner is an oracle only (`best_response` trains a fresh one per seat)
        self.multi_seat = game.num_players > 1
        self.responses = 0
        self._rounds: Any = None  # the parameter server's rounds (workers > 1), built by the first step
        self._rounds_saved: dict[str, Any] | None = None  # what they were (after a load, a Ctrl-C, a close)
        if self.multi_seat:
            if self.config.workers > 1:
                raise ValueError(f"workers={self.config.workers}: a parameter server trains a one-player game; "
                                 f"{game.name!r} has {game.num_players} seats (use workers=1)")
            from pbmarl.learners.control.seat_oracle import seat_game

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
        kind, bounds, size = space_kind(space, self.spaces, who=f"{type(self).__name__}", where=f"{who}{self.game.name!r}")
        if self.multi_seat:
            return kind
        if kind == "box":
            self.act_low, self.act_high = bounds
            self.act_dim = size
        else:
            self.num_actions = size
        return kind

    def _make_buffer(self) -> ReplayBuffer:
        """Uniform replay, or prioritised where the config has `PrioritizedOptions` with ``prioritized``."""
        cfg = self.config
        shape: tuple[int, ...] = (self.act_dim,) if self.space == "box" else ()
        dtype: type = np.float32 if self.space == "box" else np.int64
        check_memory(cfg.buffer_size, self.obs_dim, int(np.prod(shape)), who=f"{type(self).__name__}'s replay on "
                     f"{self.game.name!r}")
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

    @all_or_nothing
    def step(self) -> ControlRecord:
        """One round: whole episodes until ``steps_per_round`` env steps (or the rest of the budget), updating
        as they come; the round that reaches the budget goes on to `stop_step` and ends there, mid-episode if
        need be (that episode's return is not in the record). A round asked for after the budget is spent
        runs ``steps_per_round`` steps. All-or-nothing (see the module doc)."""
        cfg = self.config
        t0 = time.perf_counter()
        if cfg.workers > 1:
            from pbmarl.learners.control.rounds import server_round

            return self._record(t0, *server_round(self))
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
        seconds = time.perf_counter() - t0
        record = self.record_class(
            iteration=len(self.records) + 1, env_steps=self.env_steps, episodes=self.episodes,
            wall_time=self.wall_time + seconds, mean_return=_mean(returns), loss=_mean(losses.get("loss")),
            seconds=seconds, updates=self.updates, **{
                f.name: _mean(losses.get(f.name)) for f in dataclasses.fields(self.record_class) if f.name not in _BASE},
        )
        self.wall_time += seconds
        self.records.append(record)
        return record

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

    # -- all-or-nothing ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """What a round may change: counters, generators, copies of the networks' and optimisers' state, the
        exploration state and a journal of the replay rows it will overwrite (`ReplayBuffer.mark`)."""
        self._one_seat("step()")
        return {"counters": (self.env_steps, self.updates, self.episodes, self.wall_time, len(self.records)),
                "rng": self.rng.bit_generator.state, "gen": self.gen.get_state(), "replay": self.replay.mark(),
                "modules": {k: _copy_state(m) for k, m in self._modules().items()}, "extra": self._snapshot_extra(),
                "flags": _flags(self._modules()), "rounds": self._rounds_state()}

    def restore(self, state: Any) -> None:
        """Put back what `snapshot` kept; a parameter server restarts from it with the next round."""
        self.env_steps, self.updates, self.episodes, self.wall_time, n = state["counters"]
        del self.records[n:]
        self.rng.bit_generator.state = state["rng"]
        self.gen.set_state(state["gen"])
        self.replay.rollback(state["replay"])
        for name, module in self._modules().items():
            module.load_state_dict(state["modules"][name])
        self._restore_extra(state["extra"])
        for param, grad in state["flags"][0]:  # a round stopped inside `frozen` or an eval-mode act
            param.requires_grad_(grad)
        for module, training in state["flags"][1]:
            module.training = training
        OnServer.close(self)
        self._rounds_saved = state["rounds"]  # the next round rebuilds the workers as they were

    def _snapshot_extra(self) -> Any:
        """What else a round changes beside networks, optimisers, replay, counters and generators
        (default: `_extra_arrays`, the exploration noise)."""
        return self._extra_arrays()

    def _restore_extra(self, extra: Any) -> None:
        self._load_extra_arrays(extra)

    # -- using the result ----------------------------------------------------------------
    def act(self, obs: np.ndarray, *, deterministic: bool = True) -> np.ndarray | int:
        """The learner's action for one observation (greedy / mean action when `deterministic`); exploring
        (``deterministic=False``) draws from the learner's own generators, as a training step does."""
        self._one_seat("act()")
        with torch.no_grad(), torch_threads(self.config.num_threads):
            return self._act(torch.as_tensor(np.asarray(obs, np.float32)).view(1, -1), deterministic=deterministic)

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Return over `episodes` fresh episodes of a copy of the policy (`policy`), indexed by player 0.

        Episode resets come from `seed`, exploring actions (``deterministic=False``) from a generator of its
        own, so evaluating never changes the run.
        """
        self._one_seat("evaluate() of its own (respond() evaluates each answer)")
        if not is_int(episodes) or episodes < 1:
            raise ValueError(f"episodes must be a positive int, got {episodes!r}")
        seed = check_seed(seed)
        return self._evaluate(int(episodes), np.random.default_rng(seed), deterministic=deterministic,
                              acting=np.random.default_rng([seed, 1]))

    def _evaluate(self, episodes: int, rng: np.random.Generator, *, deterministic: bool,
                  acting: np.random.Generator | None = None) -> EvalResult:
        with torch_threads(self.config.num_threads):
            return evaluate_policy(self.game, self._policy(), episodes, rng, deterministic=deterministic,
                                   acting=acting if acting is not None else np.random.default_rng(0))

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
        its fixed entry of `opponents` (`pbmarl.learners.control.seat_oracle`).
        """
        from pbmarl.learners.control.seat_oracle import control_best_response

        return control_best_response(self, player, opponents, budget)

    def respond(self, player: int, opponents: Sequence[Any] = (None,)) -> BestResponse:
        """The `Oracle` seam: `best_response` with the config's budget; ``BestResponse(policy, value, env_steps)``,
        the value over ``eval_episodes`` deterministic episodes seeded by the seed and the env steps."""
        from pbmarl.learners.control.seat_oracle import answer_in_seat

        if self.multi_seat:
            return answer_in_seat(self, player, opponents, None)
        before = self.env_steps
        policy = self.best_response(player, opponents)
        rng = np.random.default_rng([self.seed, self.env_steps, 7])
        value = self._evaluate(int(self.config.eval_episodes), rng, deterministic=True).mean[0]
        return BestResponse(policy, float(value), int(self.env_steps - before))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.game.name!r}, seed={self.seed}, env_steps={self.env_steps})"

    def _one_seat(self, what: str) -> None:
        if self.__dict__.get("multi_seat"):
            raise ValueError(f"{type(self).__name__} on {self.game.name!r} ({self.game.num_players} seats) is an "
                             f"oracle only, so it has no {what}: call best_response(player, opponents) or respond(), "
                             "or train independent agents with pb.learners.Independent and pb.MARL")

    # -- files -------------------------------------------------------------------------
    def _extra_arrays(self) -> dict[str, np.ndarray]:
        """Arrays beside the networks and the replay that a save keeps (exploration noise)."""
        return {}

    def _load_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what `_extra_arrays` returned."""

    def _extra_names(self) -> tuple[str, ...]:
        """The names `_extra_arrays` may return under this config (what a load accepts)."""
        return ()

    def state(self) -> State:
        """Networks and optimisers (``<name>.pt``), the replay, the exploration state and the parameter server's
        rounds (arrays), counters, generators and records (JSON): everything the next round reads."""
        from pbmarl.learners.control.files import control_state

        self._one_seat("save()")
        return control_state(self)

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> ControlLearner:
        """A fresh learner built from the saved config (with `overrides`: ``game=`` for a game that is not
        in the registry, or config fields such as ``budget``), then filled with the saved state; a folder
        that does not fit is refused with a `RunFolderError` and nothing is built."""
        from pbmarl.learners.control.files import control_from_state

        return control_from_state(cls, saved, overrides)

    def _rounds_state(self) -> dict[str, Any] | None:
        """What rebuilds the parameter server's rounds as they are (`pbmarl.learners.control.rounds.rounds_state`)."""
        if self.__dict__.get("_rounds") is None:
            return self.__dict__.get("_rounds_saved")
        from pbmarl.learners.control.rounds import rounds_state

        return rounds_state(self)

    def close(self) -> None:
        """Stop the parameter server's workers and server (``workers > 1``); the next round starts fresh ones
        where these left off."""
        self._rounds_saved = self._rounds_state()
        OnServer.close(self)


def _copy_state(entry: Any) -> dict[str, Any]:
    """A copy of a network's or an optimiser's ``state_dict`` that later steps do not change."""
    if isinstance(entry, torch.optim.Optimizer):

        return copy_state(entry.state_dict())
    return {k: v.detach().clone() for k, v in entry.state_dict().items()}


def _flags(modules: dict[str, Any]) -> tuple[list[tuple[torch.nn.Parameter, bool]], list[tuple[torch.nn.Module, bool]]]:
    """Every parameter's ``requires_grad`` and every module's ``training`` flag (what a round sets and puts back)."""
    nets = [m for m in modules.values() if isinstance(m, torch.nn.Module)]
    return ([(p, p.requires_grad) for m in nets for p in m.parameters()],
            [(sub, sub.training) for m in nets for sub in m.modules()])


def _mean(values: list[float] | None) -> float:
    return float(np.mean(values)) if values else math.nan
