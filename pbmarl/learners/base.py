"""The `Learner` base of the RL oracles: one best-response task at a time, stepped round by round.

A task is "train `player` against these opponents". `start` opens one, every
`step()` runs one round (collect with the `RolloutPool`, update) and returns a
frozen record, and `finish` closes it with a fresh `MLPPolicy` and its estimated
value. `best_response` does all three, stopping on the step budget or on a
plateau of the learning curve. `history` is every round's record as a DataFrame.

An algorithm (`DQN`, `PPO`, `A2C`) fills in five hooks: `_init_task` (networks,
optimiser, buffer), `_round` (one collect-and-update), `_export` (the policy),
`_warm_state` (what a warm start copies) and `_modules` (what `save` stores).

All randomness comes from one `np.random.Generator` seeded by `seed`: network
initialisation (through scoped torch seeds), replay sampling, minibatch order and
the seeds handed to the pool. Its state is saved, so `load` resumes exactly.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

from pbmarl.distributed.on_server import OnServer
from pbmarl.games.base import Game
from pbmarl.learners.config import FLAG as FLAG
from pbmarl.learners.config import NON_NEGATIVE as NON_NEGATIVE
from pbmarl.learners.config import NON_NEGATIVE_INT as NON_NEGATIVE_INT
from pbmarl.learners.config import POSITIVE as POSITIVE
from pbmarl.learners.config import POSITIVE_INT as POSITIVE_INT
from pbmarl.learners.config import UNIT as UNIT
from pbmarl.learners.config import LearnerConfig as LearnerConfig
from pbmarl.learners.config import Rule as Rule
from pbmarl.learners.config import StepRecord as StepRecord
from pbmarl.learners.config import _check as _check
from pbmarl.learners.config import _is_int as _is_int
from pbmarl.learners.config import _is_real as _is_real
from pbmarl.learners.recorded import Recorded
from pbmarl.learners.returns import learner_returns
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.protocols import BestResponse
from pbmarl.rollout.trajectories import Trajectories

# LearnerConfig, StepRecord and the rules live in `pbmarl.learners.config`; many modules import them from here
__all__ = ["Learner", "LearnerConfig", "StepRecord", "Task"]


@dataclass
class Task:
    """The best response being trained: who, against whom, and how far it has got."""

    index: int
    player: int
    opponents: list[Mixture | None]
    budget: int
    round: int = 0
    learner_steps: int = 0
    env_steps: int = 0
    updates: int = 0
    smoothed: float = math.nan
    best: float = -math.inf
    since_best: int = 0
    plateaued: bool = False
    recent: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("opponents")
        return data


class Learner(Recorded, OnServer, abc.ABC):
    """Base of the RL best-response learners; see the module doc.

    Args:
        game: the game (or its name for `pb.load_game`).
        config: a config dataclass of the algorithm; keyword options override its fields.
        seed: seeds every random choice of the learner.
        pool: the `RolloutPool` to collect with; default a local one made on first use.
        **options: fields of the config, e.g. ``lr=1e-3, budget=20_000``.

    Attributes:
        last_value: estimated value of the last best response against its opponents.
        last_env_steps: environment steps (all seats, evaluation included) it took.
    """

    name: ClassVar[str] = "learner"
    config_class: ClassVar[type[LearnerConfig]] = LearnerConfig
    record_class: ClassVar[type[StepRecord]] = StepRecord

    def __init__(self, game: Game | str, *, config: LearnerConfig | None = None, seed: int = 0,
                 pool: Any = None, **options: Any) -> None:
        if isinstance(game, str):
            from pbmarl.games.registry import load_game

            game = load_game(game)
        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.game = game
        from pbmarl.learners.registry import make_config

        self.config = make_config(self.config_class, config, options, owner=type(self).__name__)
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self._pool = pool
        self.records: list[StepRecord] = []
        self.last_value: float = math.nan
        self.last_env_steps: int = 0
        self.tasks_done = 0
        self.task: Task | None = None
        #: per player, the state dicts of its previous best response (for warm starts)
        self._warm: dict[int, dict[str, dict[str, Any]]] = {}

    # -- the algorithm's hooks ---------------------------------------------
    @abc.abstractmethod
    def _init_task(self, player: int, warm: dict[str, dict[str, Any]] | None) -> None:
        """Build networks, optimiser and buffers for a new task (from `warm` state dicts if given)."""

    @abc.abstractmethod
    def _round(self, task: Task) -> tuple[Trajectories, dict[str, float]]:
        """Collect (with `_collect`) and update once; return the data and the round's statistics."""

    @abc.abstractmethod
    def _export(self) -> Policy:
        """A fresh policy (a copy, detached from training) of the current task."""

    @abc.abstractmethod
    def _warm_state(self) -> dict[str, dict[str, Any]]:
        """State dicts a later warm start of the same player begins from."""

    @abc.abstractmethod
    def _modules(self) -> dict[str, Any]:
        """Everything with ``state_dict``/``load_state_dict`` that a mid-task `save` must keep."""

    def _buffer(self) -> Any:
        """The task's replay buffer, if the algorithm keeps one (saved with the task)."""
        return None

    def _end_task(self) -> None:
        """Drop the task's networks and buffers (they can be large)."""

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
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise ValueError(f"budget must be a positive int (learner steps), got {budget!r}")
        warm = self.config.warm_start if warm_start is None else bool(warm_start)
        self.task = Task(index=self.tasks_done, player=player, opponents=opps, budget=int(budget))
        self._init_task(player, self._warm.get(player) if warm else None)
        return self.task

    def _check_opponents(self, player: int, opponents: Sequence[Any]) -> list[Mixture | None]:
        if isinstance(opponents, (Policy, Mixture)) or len(opponents) != self.game.num_players:
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
            raise RuntimeError(f"{type(self).__name__} has no task; call start(player, opponents) "
                               "or best_response(player, opponents) first")
        return self.task

    @property
    def done(self) -> bool:
        """Whether the current task has spent its budget or plateaued."""
        task = self._require_task()
        return task.learner_steps >= task.budget or task.plateaued

    def step(self) -> StepRecord:
        """One round of the current task; returns (and keeps in `history`) its record."""
        from pbmarl.learners.nets import torch_threads

        task = self._require_task()
        t0 = time.perf_counter()
        with torch_threads(self.config.num_threads):
            traj, stats = self._round(task)
        task.round += 1
        returns = learner_returns(traj)
        mean_return = float(returns.mean()) if len(returns) else math.nan
        self._track_plateau(task, mean_return)
        record = self.record_class(
            task=task.index, player=task.player, round=task.round, learner_steps=task.learner_steps,
            env_steps=task.env_steps, episodes=int(traj.num_episodes), mean_return=mean_return,
            seconds=time.perf_counter() - t0, **stats,
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

    def run(self) -> Iterator[StepRecord]:
        """Yield the records of the current task's remaining rounds (until `done`)."""
        while not self.done:
            yield self.step()

    def policy(self) -> Policy:
        """The current task's policy, as a fresh copy (training goes on unaffected)."""
        self._require_task()
        return self._export()

    def finish(self) -> tuple[Policy, float]:
        """Close the task: ``(policy, value)``; sets `last_value` and `last_env_steps`."""
        task = self._require_task()
        policy = self._export()
        value, eval_steps = self._value(task, policy)
        self._warm[task.player] = self._warm_state()
        self.last_value = value
        self.last_env_steps = task.env_steps + eval_steps
        self.tasks_done += 1
        self.task = None
        self._end_task()
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
        for _ in self.run():
            pass
        return self.finish()

    def respond(self, player: int, opponents: Sequence[Policy | Mixture | None]) -> BestResponse:
        """The `Oracle` seam: train with the config's budget; ``BestResponse(policy, value, env_steps)``."""
        policy, value = self.best_response_with_value(player, opponents)
        return BestResponse(policy, float(value), int(self.last_env_steps))

    def snapshot(self) -> object:
        """What `restore` needs to undo a best response begun after this call (see `all_or_nothing`)."""
        return (self.rng.bit_generator.state, list(self.records), self.tasks_done, self.last_value,
                self.last_env_steps, self.task, dict(self._warm))

    def restore(self, state: object) -> None:
        """Undo the tasks, records and random draws made since `snapshot()` returned `state`."""
        rng, records, tasks_done, last_value, last_env_steps, task, warm = cast(
            "tuple[dict[str, Any], list[StepRecord], int, float, int, Task | None, dict[int, Any]]", state)
        if self.task is not None and self.task is not task:
            self._end_task()
        self.rng.bit_generator.state = rng
        self.records, self.tasks_done, self.task, self._warm = list(records), tasks_done, task, dict(warm)
        self.last_value, self.last_env_steps = last_value, last_env_steps

    def best_response(self, player: int, opponents: Sequence[Policy | Mixture | None], *,
                      budget: int | None = None, warm_start: bool | None = None) -> Policy:
        """A new policy (an `MLPPolicy`) for `player` trained against `opponents`.

        Example:
            >>> br = pb.DQN(game, seed=0).best_response(0, pop.mixture(sigma), budget=200)   # 20_000 to learn
        """
        return self.best_response_with_value(player, opponents, budget=budget, warm_start=warm_start)[0]

    # -- views -------------------------------------------------------------
    # (`history` and `spec` come from `Recorded`)
    def __repr__(self) -> str:
        state = f"task {self.task.index} (player {self.task.player})" if self.task else f"{self.tasks_done} tasks done"
        return f"{type(self).__name__}({self.game.name!r}, seed={self.seed}, {state})"

    # -- files -------------------------------------------------------------
    #: version of the folder layout `save` writes and `load` reads
    FORMAT: ClassVar[int] = 1

    def save(self, folder: str | Path) -> Path:
        """Write the learner's whole state into `folder` (each file atomically; `learner.json` last).

        Layout: ``learner.json`` (spec, rng state, counters, records, the open task), ``state.pt``
        (torch state dicts: warm starts, the task's networks and optimiser), ``buffer.npz`` (the
        task's replay buffer, if any), ``opponent-S-K.npz`` (the task's opponents, seat S, member K).
        """
        from pbmarl.io import write_atomic, write_json, write_npz

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state: dict[str, Any] = {"warm": {str(p): sd for p, sd in self._warm.items()}}
        task_json = None
        if self.task is not None:
            state["task"] = {name: module.state_dict() for name, module in self._modules().items()}
            buffer = self._buffer()
            if buffer is not None:
                write_npz(folder / "buffer.npz", buffer.state_arrays())
            seats: list[dict[str, Any] | None] = []
            for seat, mix in enumerate(self.task.opponents):
                if mix is None:
                    seats.append(None)
                    continue
                members = []
                for k, policy in enumerate(mix.policies):
                    file = f"opponent-{seat}-{k}.npz"
                    write_npz(folder / file, policy.arrays())
                    members.append({"file": file, "meta": policy.meta()})
                seats.append({"weights": mix.weights.tolist(), "members": members})
            task_json = {**self.task.to_json(), "opponents": seats, "buffer": buffer is not None}
        import torch

        write_atomic(folder / "state.pt", lambda fh: torch.save(state, fh))
        write_json(folder / "learner.json", {
            "format": self.FORMAT, "spec": self.spec(), "rng": self.rng.bit_generator.state,
            "tasks_done": self.tasks_done, "last_value": self.last_value, "last_env_steps": self.last_env_steps,
            "records": [dataclasses.asdict(r) for r in self.records], "task": task_json,
        })
        return folder

    def load(self, folder: str | Path) -> Learner:
        """Restore the state written by `save` into this learner (built from the same spec); returns self.

        Nothing executes code: JSON, ``.npz`` without pickles, ``torch.load(weights_only=True)``;
        a malformed folder raises ValueError naming the file, and leaves this learner as it was.
        """
        import torch

        from pbmarl.io import inside, read_npz

        folder = Path(folder)
        data = read_learner_json(folder)
        where = f"learner.json in {str(folder)!r}"
        try:
            spec = data["spec"]
            if spec["name"] != self.name:
                raise ValueError(f"{str(folder)!r} holds a {spec['name']!r} learner, not {self.name!r}")
            saved_hidden = tuple(spec["config"]["hidden"])
            records = [self.record_class(**r) for r in data["records"]]
            counters = int(data["tasks_done"]), float(data["last_value"]), int(data["last_env_steps"])
            saved, rng_state = data["task"], data["rng"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where} is malformed ({type(exc).__name__}: {exc})") from None
        if saved_hidden != self.config.hidden:
            raise ValueError(f"{str(folder)!r} holds networks with hidden={saved_hidden}, "
                             f"but this learner has hidden={self.config.hidden}")
        try:
            state = torch.load(inside(folder, "state.pt", entry="the learner's state.pt"), weights_only=True)
        except (RuntimeError, OSError, EOFError, Exception) as exc:  # torch's refusals of pickled code included
            if isinstance(exc, ValueError):
                raise
            raise ValueError(f"cannot load {str(folder / 'state.pt')!r}: {type(exc).__name__}: {exc}") from None
        before = self.snapshot()
        try:
            self._warm = {int(p): sd for p, sd in state["warm"].items()}
            self.records = records
            self.tasks_done, self.last_value, self.last_env_steps = counters
            self.task = None
            if saved is not None:
                opponents = [None if s is None else _load_mixture(self.game, folder, s, where)
                             for s in saved["opponents"]]
                fields = {k: v for k, v in saved.items() if k not in ("opponents", "buffer")}
                self.task = Task(**fields, opponents=opponents)
                self._init_task(self.task.player, None)  # fresh modules to load into (rng restored below)
                for name, module in self._modules().items():
                    module.load_state_dict(state["task"][name])
                if saved["buffer"]:
                    self._buffer().load_state_arrays(read_npz(inside(folder, "buffer.npz", entry="buffer.npz")))
            self.rng.bit_generator.state = rng_state
        except BaseException as exc:
            self.restore(before)
            if isinstance(exc, (KeyError, TypeError)):
                raise ValueError(f"{where} or state.pt is malformed ({type(exc).__name__}: {exc})") from None
            raise
        return self


def read_learner_json(folder: Path) -> dict[str, Any]:
    """A learner folder's ``learner.json``, with its format checked."""
    from pbmarl.io import read_json

    if not (folder / "learner.json").exists():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved learner (no learner.json)")
    data = read_json(folder / "learner.json")
    if not isinstance(data, dict) or data.get("format") != Learner.FORMAT:
        got = data.get("format") if isinstance(data, dict) else None
        raise ValueError(f"learner folder {str(folder)!r} has format {got!r}; this pbmarl reads {Learner.FORMAT}")
    return data


def _load_mixture(game: Game, folder: Path, seat: dict[str, Any], where: str) -> Mixture:
    from pbmarl.io import inside, read_npz
    from pbmarl.policies.base import new_policy_from_state

    policies = [new_policy_from_state(game, read_npz(inside(folder, m["file"], entry=f"{where} opponent 'file'")),
                                      m["meta"]) for m in seat["members"]]
    return Mixture(policies, np.asarray(seat["weights"], dtype=float))

