"""The `Learner` base of the RL oracles (`DQN`, `PPO`, `A2C` and the distributed ones): a `pbmarl.runs.Run`.

A learner trains one task at a time: "train `player` against these opponents". On its own,
``pb.PPO("gym:CartPole-v1", seed=0).run()`` opens its own task on the first `step()` (player 0
against the `opponents` part: uniformly random ones by default) and runs to the task's `budget`.
As a PSRO oracle, `best_response(player, opponents)` opens a task with `start`, steps it until
`done` and closes it with `finish`, which hands back a fresh `MLPPolicy` and its estimated value.

Every `step()` runs one round (collect, update) and returns a frozen `LearnerRecord`; it is
all-or-nothing: an exception anywhere in it (a Ctrl-C included) puts back the counters, the
records, the random generator, the networks, the optimiser, the replay buffer and the workers
(`snapshot` / `restore`), so the next step gives what it would have given.

An algorithm fills in: `_init_task` (networks, optimiser, buffer), `_round` (one collect and
update), `_export` (the policy), `_warm_state` (what a warm start copies), `_modules` (what a
save keeps), and, where it has them, `_buffer`, `_task_extra` / `_set_task_extra` (its other
task state) and `_close_workers`.

All randomness comes from one `np.random.Generator` seeded by `seed`: network initialisation
(through scoped torch seeds), replay sampling, minibatch order and the seeds handed to the pool.

Example:
    >>> import pbmarl as pb
    >>> learner = pb.PPO("gym:CartPole-v1", seed=0, budget=600, steps_per_round=200, num_envs=4)
    >>> records = learner.run(progress=False)           # to the budget
    >>> learner.done, list(learner.history.columns[:4])
    (True, ['env_steps', 'episodes', 'wall_time', 'return/0'])
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import numpy as np

from pbmarl.config import check_seed
from pbmarl.config import is_int as _is_int
from pbmarl.distributed.on_server import OnServer
from pbmarl.games.base import Game
from pbmarl.learners.common.config import LearnerConfig, LearnerRecord, StepRecord, refuse_device
from pbmarl.learners.common.recorded import Recorded
from pbmarl.learners.oracles.files import learner_from_state, learner_state
from pbmarl.learners.oracles.task import Life, Task
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.protocols import BestResponse
from pbmarl.rollout.results import EvalResult
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.runs import Run, SavedRun, State
from pbmarl.runs.transaction import all_or_nothing
from pbmarl.torchutil import copy_state

__all__ = ["Learner", "LearnerConfig", "LearnerRecord", "StepRecord", "Task"]


def _check(ok: bool, name: str, value: Any, accepted: str) -> None:
    """Raise ValueError naming `name`, `value` and what is accepted unless `ok` (nfsp and league_rules use it)."""
    if not ok:
        raise ValueError(f"{name} must be {accepted}, got {value!r}")


def learner_returns(traj: Trajectories) -> np.ndarray:
    """The learning seat's return in every collected episode ``[E]``."""
    return np.asarray(traj.episode_returns, dtype=float)[:, traj.player]


class Learner(Run, Recorded, OnServer, abc.ABC):
    """Base of the RL oracle learners; see the module doc.

    Args:
        game: the game (or its name for `pb.load_game`).
        seed: seeds every random choice of the learner.
        config: a config dataclass of the algorithm; keyword options override its fields.
        pool: the `RolloutPool` to collect with; default a local one made on first use.
        opponents: who the learner's own task (opened by a `step()` without `start`) plays against:
            one Policy, Mixture or None per seat (entry 0 is the learner's and is ignored);
            default a uniformly random policy in every other seat.
        **options: fields of the config, e.g. ``lr=1e-3, budget=20_000``.

    Attributes:
        last_value: estimated value of the last best response against its opponents.
        last_env_steps: environment steps (all seats, evaluation included) it took.
    """

    name: ClassVar[str] = "learner"
    config_class: ClassVar[type[LearnerConfig]] = LearnerConfig
    record_class: ClassVar[type[LearnerRecord]] = LearnerRecord
    #: attributes `_init_task` makes, dropped by `_end_task` (whatever phase the task got to)
    task_attributes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, game: Game | str, *, seed: int = 0, config: LearnerConfig | None = None, pool: Any = None,
                 opponents: Sequence[Policy | Mixture | None] | None = None, **options: Any) -> None:
        if isinstance(game, str):
            from pbmarl.games.registry import load_game

            game = load_game(game)
        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        self.game = game
        from pbmarl.config import build_config

        self.config = build_config(self.config_class, config, options, owner=type(self).__name__)
        refuse_device(self.config.device, type(self).__name__, self._cpu_only())
        self._check_game()
        self.seed = check_seed(seed)
        self.rng = np.random.default_rng(self.seed)
        self._pool = pool
        if opponents is None:
            from pbmarl.policies.simple import RandomPolicy

            opponents = [None] + [RandomPolicy(game, player=p) for p in range(1, game.num_players)]
        self.opponents = self._check_opponents(0, opponents)
        self.records: list[LearnerRecord] = []
        self.life = Life()
        self.last_value: float = math.nan
        self.last_env_steps: int = 0
        self.tasks_done = 0
        self.task: Task | None = None
        #: per player, the state dicts of its previous best response (for warm starts)
        self._warm: dict[int, dict[str, dict[str, Any]]] = {}

    def _check_game(self) -> None:
        """Refuse a game the algorithm cannot play, saying why (discrete actions for every learner here)."""
        from gymnasium import spaces

        space = self.game.action_space(0) if hasattr(self.game, "action_space") else None
        if space is not None and not isinstance(space, spaces.Discrete):
            raise ValueError(f"{type(self).__name__} plays discrete actions; {self.game.name!r} has "
                             f"{type(space).__name__} actions. Use pb.SAC, pb.TD3 or pb.DDPG (or pb.learners.ApeXDDPG) there")

    @property
    def device(self) -> str:
        """Where the task's networks live and its updates run (the config's ``device``)."""
        return str(self.config.device)

    def _cpu_only(self) -> str | None:
        """Why this learner, so configured, runs on the CPU only (None: ``device=`` is honoured)."""
        if getattr(self.config, "workers", 1) > 1:
            return "with workers > 1 the parameter server and its workers exchange weights and gradients as CPU arrays"
        return None

    # -- the algorithm's hooks ---------------------------------------------
    @abc.abstractmethod
    def _init_task(self, player: int, warm: dict[str, dict[str, Any]] | None) -> None:
        """Build networks, optimiser and buffers for a new task (from `warm` state dicts if given)."""

    @abc.abstractmethod
    def _round(self, task: Task) -> tuple[Trajectories, dict[str, float]]:
        """Collect (with `_collect`) and update once; return the data and the round's statistics."""

    @abc.abstractmethod
    def _export(self, temperature: float | None = None) -> Policy:
        """A fresh policy (a copy, detached from training) of the current task (`temperature`: its own)."""

    @abc.abstractmethod
    def _warm_state(self) -> dict[str, dict[str, Any]]:
        """State dicts a later warm start of the same player begins from."""

    @abc.abstractmethod
    def _modules(self) -> dict[str, Any]:
        """Everything with ``state_dict``/``load_state_dict`` that the task changes (saved and restored)."""

    def _buffer(self) -> Any:
        """The task's replay buffer, if the algorithm keeps one (saved and restored with the task)."""
        return None

    def _task_extra(self) -> dict[str, Any]:
        """The task's other state (ints, floats, lists, arrays) that a step changes; `_set_task_extra` puts it back."""
        return {}

    def _set_task_extra(self, extra: dict[str, Any]) -> None:
        """Put back what `_task_extra` returned."""

    def weights_changed(self) -> None:
        """The task's weights changed outside an update (restored): refresh policies cached by version."""

    def _close_workers(self) -> None:
        """Stop the task's workers and actors, if any; the next round starts fresh ones where these left off."""
        if self.__dict__.get("_rounds") is not None:  # workers > 1: a parameter server and its workers
            from pbmarl.distributed.resume import rounds_state, set_rounds_state

            set_rounds_state(self, rounds_state(self))
        OnServer.close(self)

    def _end_task(self) -> None:
        """Drop the task's workers, networks and buffers, whatever phase of `_init_task` was reached."""
        self._close_workers()
        for name in self.task_attributes:
            self.__dict__.pop(name, None)

    # -- the pool --------------------------------------------------------------
    @property
    def pool(self) -> Any:
        """The `RolloutPool` this learner collects with (a local one unless given)."""
        if self._pool is None:
            from pbmarl.rollout import RolloutPool

            self._pool = RolloutPool(self.game, num_workers=1, envs_per_worker=self.config.num_envs,
                                     backend="local", seed=self.seed)
        return self._pool

    def _collect(self, policy: Policy, steps: int) -> Trajectories:
        """At least `steps` learner transitions (whole episodes) against the task's opponents."""
        task = self._require_task()
        seed = int(self.rng.integers(2**63 - 1))
        traj = self.pool.collect(task.player, policy, task.opponents, steps, seed=seed)
        task.learner_steps += len(traj)
        task.env_steps += int(traj.steps)
        return traj

    # -- tasks -------------------------------------------------------------
    def start(self, player: int, opponents: Sequence[Policy | Mixture | None], *, budget: int | None = None,
              warm_start: bool | None = None) -> Task:
        """Open a best-response task for `player` against `opponents` (one entry per seat).

        Entry `player` of `opponents` is ignored (it may be None). `budget` overrides
        the config's learner-step budget; `warm_start` its warm-start flag (start from
        this player's previous best response, if there is one). A task still open is dropped.
        """
        player = self.game.check_player(player)
        opps = self._check_opponents(player, opponents)
        budget = self.config.budget if budget is None else budget
        if not _is_int(budget) or budget < 1:
            raise ValueError(f"budget must be a positive int (learner steps), got {budget!r}")
        warm = self.config.warm_start if warm_start is None else bool(warm_start)
        if self.task is not None:
            self._end_task()
        self.task = Task(index=self.tasks_done, player=player, opponents=opps, budget=int(budget))
        self._init_task(player, self._warm.get(player) if warm else None)
        return self.task

    def _check_opponents(self, player: int, opponents: Sequence[Any]) -> list[Mixture | None]:
        members = [m for e in opponents if isinstance(e, (Policy, Mixture))
                   for m in (e.policies if isinstance(e, Mixture) else [e])] if isinstance(opponents, Sequence) else []
        other = next((m.game_name for m in members if m.game_name != self.game.name), None)
        if other is not None:
            raise ValueError(f"{type(self).__name__} was built for {self.game.name!r} but asked to respond to "
                             f"opponents of {other!r}: a learner trains in its own game; build it on the run's "
                             f"game, e.g. pb.{type(self).__name__}({other!r}, ...)")
        if isinstance(opponents, (Policy, Mixture, str)) or len(opponents) != self.game.num_players:
            raise ValueError(f"opponents must hold one Policy or Mixture per seat ({self.game.num_players} for "
                             f"{self.game.name!r}; entry {player} is ignored), got {opponents!r}")
        out: list[Mixture | None] = []
        for seat, entry in enumerate(opponents):
            if seat == player:
                out.append(None)
            elif isinstance(entry, Mixture):
                out.append(entry)
            elif isinstance(entry, Policy):
                out.append(Mixture([entry]))
            else:
                raise TypeError(f"opponent for seat {seat} must be a Policy or a Mixture, got {type(entry).__name__}")
        return out

    def _require_task(self) -> Task:
        if self.task is None:
            raise RuntimeError(f"{type(self).__name__} has no task open; step() opens its own, "
                               "start(player, opponents) or best_response(player, opponents) a PSRO one")
        return self.task

    @property
    def done(self) -> bool:
        """Whether the open task has spent its budget or plateaued (False before the learner's own task opens)."""
        task = self.task
        return task is not None and (task.learner_steps >= task.budget or task.plateaued)

    @all_or_nothing
    def step(self) -> LearnerRecord:
        """One round of the open task (the first opens the learner's own); returns its record."""
        from pbmarl.torchutil import torch_threads

        t0 = time.perf_counter()
        if self.task is None:
            self.start(0, self.opponents)
        task = self._require_task()
        env_before = task.env_steps
        with torch_threads(self.config.num_threads):
            traj, stats = self._round(task)
        task.round += 1
        returns = learner_returns(traj)
        mean_return = float(returns.mean()) if len(returns) else math.nan
        self._track_plateau(task, mean_return)
        seconds = time.perf_counter() - t0
        life = self.life
        life.env_steps += task.env_steps - env_before
        life.episodes += int(traj.num_episodes)
        life.wall_time += seconds
        own = {k: v for k, v in stats.items() if k in self.record_class.__dataclass_fields__}
        record = self.record_class(
            iteration=len(self.records) + 1, env_steps=life.env_steps, episodes=life.episodes,
            wall_time=life.wall_time, episode_return=mean_return, time_round=seconds, task=task.index,
            player=task.player, round=task.round, learner_steps=task.learner_steps, **own,
        )
        self.records.append(record)
        return record

    def _track_plateau(self, task: Task, mean_return: float) -> None:
        cfg = self.config
        if math.isnan(mean_return):
            return
        task.recent = (task.recent + [mean_return])[-cfg.value_rounds:]
        s = cfg.plateau_smoothing
        task.smoothed = mean_return if math.isnan(task.smoothed) else s * task.smoothed + (1 - s) * mean_return
        if task.smoothed > task.best + cfg.plateau_tol:
            task.best, task.since_best = task.smoothed, 0
        else:
            task.since_best += 1
        started = task.learner_steps >= cfg.plateau_start * task.budget
        task.plateaued = bool(cfg.plateau_patience and started and task.since_best >= cfg.plateau_patience)

    def policy(self) -> Policy:
        """The open task's policy, as a fresh copy (training goes on unaffected)."""
        self._require_task()
        return self._export()

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` episodes of the open task's policy against its opponents (nothing in the learner changes).

        `deterministic` plays the policy's most likely action (a near-zero temperature) instead of
        the policy `policy()` hands back. Returns a `pb.EvalResult` with every seat's mean return.
        """
        task = self._require_task()
        policy = self._export(1e-6 if deterministic else None)
        profile = [policy if p == task.player else opp for p, opp in enumerate(task.opponents)]
        return self.pool.evaluate(profile, episodes, seed=check_seed(seed))

    def finish(self) -> tuple[Policy, float]:
        """Close the task: ``(policy, value)``; sets `last_value` and `last_env_steps`."""
        task = self._require_task()
        policy = self._export()
        value, eval_steps = self._value(task, policy)
        self._warm[task.player] = self._warm_state()
        self.last_value = value
        self.last_env_steps = task.env_steps + eval_steps
        self.tasks_done += 1
        self._end_task()
        self.task = None
        return policy, value

    def _value(self, task: Task, policy: Policy) -> tuple[float, int]:
        """Estimated return of `policy` against the task's opponents, and the env steps it cost."""
        episodes = self.config.eval_episodes
        if episodes == 0:
            return (float(np.mean(task.recent)) if task.recent else math.nan), 0
        profile = [policy if p == task.player else opp for p, opp in enumerate(task.opponents)]
        result = self.pool.evaluate(profile, episodes, seed=int(self.rng.integers(2**63 - 1)))
        return float(np.asarray(result.mean)[task.player]), int(getattr(result, "steps", 0) or 0)

    def best_response_with_value(self, player: int, opponents: Sequence[Policy | Mixture | None], *,
                                 budget: int | None = None, warm_start: bool | None = None) -> tuple[Policy, float]:
        """Train a new policy for `player` against `opponents`; return it and its estimated value.

        Trains until `budget` learner steps (default: the config's) or a plateau of
        the learning curve (``plateau_patience``). The value is a final evaluation
        with the pool (``eval_episodes`` > 0) or the mean return of the last rounds.
        """
        self.start(player, opponents, budget=budget, warm_start=warm_start)
        while not self.done:
            self.step()
        return self.finish()

    def respond(self, player: int, opponents: Sequence[Policy | Mixture | None]) -> BestResponse:
        """The `Oracle` seam: train with the config's budget; ``BestResponse(policy, value, env_steps)``."""
        policy, value = self.best_response_with_value(player, opponents)
        return BestResponse(policy, float(value), int(self.last_env_steps))

    def best_response(self, player: int, opponents: Sequence[Policy | Mixture | None], *,
                      budget: int | None = None, warm_start: bool | None = None) -> Policy:
        """A new policy (an `MLPPolicy`) for `player` trained against `opponents`.

        Example:
            >>> br = pb.DQN(game, seed=0).best_response(0, pop.mixture(sigma), budget=200)   # 20_000 to learn
        """
        return self.best_response_with_value(player, opponents, budget=budget, warm_start=warm_start)[0]

    # -- all-or-nothing ----------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a step, or a best response begun after this call, changes (see `all_or_nothing`)."""
        task = self.task
        inside = None
        if task is not None:
            buffer = self._buffer()
            inside = ({name: copy_state(m.state_dict()) for name, m in self._modules().items()},
                      None if buffer is None else {k: np.array(v) for k, v in buffer.state_arrays().items()},
                      copy_state(self._task_extra()))
        return (self.rng.bit_generator.state, len(self.records), dataclasses.replace(self.life), self.tasks_done,
                self.last_value, self.last_env_steps, dict(self._warm), task, None if task is None else task.copy(),
                inside)

    def restore(self, state: object) -> None:
        """Put the learner back as `snapshot()` found it: whatever phase was interrupted, the task as it was."""
        saved = cast("tuple[dict[str, Any], int, Life, int, float, int, dict[int, Any], Task | None, Task | None, Any]",
                     state)
        rng, n_records, life, tasks_done, last_value, last_env_steps, warm, task, fields, inside = saved
        if self.task is not None and (self.task is not task or not self._task_built()):
            self._end_task()
            self.task = None
        else:
            self._close_workers()  # rebuilt on the next round from the state put back below
        if task is not None:
            if self.task is None:
                self.task = task
                self._init_task(task.player, None)  # fresh modules to load into (rng restored below)
            self._load_task(*inside)
            for f in dataclasses.fields(Task):
                setattr(task, f.name, getattr(fields, f.name))
        self.task = task
        self.rng.bit_generator.state = rng
        del self.records[n_records:]
        self.life = dataclasses.replace(life)
        self.tasks_done, self.last_value, self.last_env_steps, self._warm = tasks_done, last_value, last_env_steps, dict(warm)

    def _task_built(self) -> bool:
        return all(name in self.__dict__ for name in self.task_attributes)

    def _load_task(self, modules: dict[str, Any], buffer: dict[str, np.ndarray] | None, extra: dict[str, Any]) -> None:
        for name, module in self._modules().items():
            module.load_state_dict(copy.deepcopy(modules[name]))
        if buffer is not None:
            self._buffer().load_state_arrays(buffer)
        self._set_task_extra(copy.deepcopy(extra))
        self.weights_changed()

    def close(self) -> None:
        """Stop the task's workers and actors, if any (idempotent; the next step starts fresh ones)."""
        self._close_workers()

    # -- files (the layout is `pbmarl.runs.folder`'s; what goes in, `pbmarl.learners.oracles.files`) ----
    def state(self) -> State:
        return learner_state(self)

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> Learner:
        return learner_from_state(cls, saved, **overrides)

    def __repr__(self) -> str:
        state = f"task {self.task.index} (player {self.task.player})" if self.task else f"{self.tasks_done} tasks done"
        return f"{type(self).__name__}({self.game.name!r}, seed={self.seed}, {state})"
