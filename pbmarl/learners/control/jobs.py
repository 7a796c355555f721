"""A control learner's jobs on the parameter server: what a worker does, and what the learner keeps of it.

The replay is the learner's (as Gorila's global replay, `pbmarl.learners.oracles.dqn`). One job of
worker ``w`` (`ControlWorker.compute`):

1. load the learner's published *state* (`pbmarl.learners.control.vectors.get_state`), with ``updates``
   set to its version and ``env_steps`` to the task's count;
2. play ``train_freq`` env steps on the worker's own environment (episodes run on across jobs), with
   generators seeded by the job's seed, and return the transitions (`ControlResult.rows`, Rainbow's
   n-step discounts included); the learner appends them to its replay when it consumes the result;
3. with a minibatch the learner drew from its replay and sent with the job (`job_minibatch`; none
   before ``learning_starts``), run the algorithm's own `_update` with *recording* optimisers and
   return their gradients, with the TD errors for the replay's priorities (`ControlResult.td`).

A worker's only state between jobs is its episode in progress: the environment, the observation,
Rainbow's n-step window and the exploration noise (OU, gSDE). The environment cannot be saved in
general, so the learner keeps each worker's episode as a journal (`Episode`): the seed it was reset
with and the actions taken since, with the exploration state after the last job. A rebuilt worker
(after a Ctrl-C, or in a loaded run) resets with that seed and replays the actions
(`ControlWorker.resume_episode`), which puts the environment back exactly wherever it is
deterministic given its reset seed and actions (Gymnasium's and pbmarl's own games are). So no
episode is cut at a step or job boundary: an uninterrupted run and a resumed one take the same
numbers, and the episodes are those a run that was never stopped plays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from pbmarl.learners.common.buffers import Batch
from pbmarl.learners.control.vectors import record_steps, set_state

__all__ = ["BATCH", "ControlResult", "ControlWorker", "Episode", "add_result", "episodes_from_state",
           "episodes_state", "job_minibatch", "next_episode"]

#: the arrays of a replay minibatch a job carries, in order (a `Batch`'s fields; then the replay's columns)
BATCH = tuple(f.name for f in dataclasses.fields(Batch))
#: the transition arrays a job returns, in order (then the replay's columns, by name)
ROWS = ("obs", "action", "reward", "done", "next_obs")


@dataclass(frozen=True)
class ControlResult:
    """A control worker's job: per-optimiser gradients (None: it only collected), its transitions and episode."""

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
    rows: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """The transitions the job stored (`ROWS`, then the replay's columns), for the learner's replay."""
    td: tuple[np.ndarray, np.ndarray] | None = None
    """The minibatch's (slots, TD errors), for the learner's priorities (None: no priorities were set)."""
    reset_seed: int | None = None
    """The seed the episode in progress at the job's end was reset with, if it began in this job."""
    actions: np.ndarray | None = None
    """That episode's actions taken in this job (None: no episode in progress at the end)."""
    extra: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """The worker's exploration state at the end (`ControlLearner._extra_arrays`)."""

    @property
    def count(self) -> int:
        return 0 if self.grad is None else self.batch


@dataclass(frozen=True)
class Episode:
    """A worker's episode in progress, as the learner keeps it: its reset seed (None: between episodes),
    the actions taken since, and the worker's exploration state after its last job."""

    seed: int | None
    actions: np.ndarray
    extra: dict[str, np.ndarray]


def next_episode(before: Episode | None, result: ControlResult) -> Episode:
    """A worker's `Episode` once `result` is consumed (`before`: after its previous job)."""
    if result.actions is None:  # no episode in progress at the job's end
        return Episode(None, np.zeros(0), dict(result.extra))
    if result.reset_seed is not None:
        return Episode(int(result.reset_seed), result.actions, dict(result.extra))
    if before is None or before.seed is None:
        raise RuntimeError("a job continued an episode its worker never began")
    return Episode(before.seed, np.concatenate([before.actions, result.actions]), dict(result.extra))


def job_minibatch(learner: Any) -> tuple[np.ndarray, ...]:
    """The minibatch a job takes its gradient of: drawn from the learner's replay once ``learning_starts``
    env steps are in (`BATCH`, then the replay's columns at those slots), or none."""
    if learner.env_steps < learner.config.learning_starts or len(learner.replay) == 0:
        return ()
    batch = learner._sample()
    return (*(getattr(batch, name) for name in BATCH), *(c[batch.index] for c in learner.replay.columns.values()))


def add_result(learner: Any, result: ControlResult) -> None:
    """A consumed job's transitions go into the learner's replay (with their columns), its TD errors set the
    priorities of the rows it drew."""
    replay, rows = learner.replay, result.rows
    columns = [(replay.columns[name], rows[name]) for name in replay.columns]
    for i in range(len(rows.get("reward", ()))):
        slot = replay.append(*(rows[name][i] for name in ROWS))
        for column, values in columns:
            column[slot] = values[i]
    if result.td is not None:
        replay.update_priorities(*result.td)


class ControlWorker:
    """One control worker (an ordinary object locally, a Ray actor on Ray); see the module doc.

    Its learner's own replay only passes a job's transitions on (emptied at the start of each job).

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
        self.td: tuple[np.ndarray, np.ndarray] | None = None
        record_steps(self.learner, self.recorded)
        self.learner.replay.update_priorities = self._priorities  # the learner's replay keeps the priorities

    def _priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        self.td = (np.asarray(index).copy(), np.asarray(td_error, dtype=float).copy())

    def _clear_outbox(self) -> None:
        replay = self.learner.replay
        replay.pos = replay.size = 0

    def _outbox(self) -> dict[str, np.ndarray]:
        """The transitions stored since `_clear_outbox`, in order."""
        replay = self.learner.replay
        n = replay.size
        return {name: np.array(a[:n]) for name, a in
                [*((k, getattr(replay, k)) for k in ROWS), *replay.columns.items()]}

    def compute(self, state: np.ndarray, version: int, seeds: Sequence[int], env_steps: int,
                *minibatch: np.ndarray) -> ControlResult:
        """Load `state` (at `version`), play ``train_freq`` env steps, then one recorded `_update` of `minibatch`
        (`job_minibatch`'s arrays; none: the job only collects)."""
        learner, cfg = self.learner, self.learner.config
        seeds = tuple(int(s) for s in seeds)
        set_state(learner, state)
        learner.updates, learner.env_steps = int(version), int(env_steps)
        learner.rng = np.random.default_rng(seeds[0])
        learner.gen.manual_seed(seeds[0] % 2**63)
        self._clear_outbox()
        returns: list[float] = []
        reset_seed: int | None = None
        actions: list[Any] = []
        with torch.no_grad():
            for _ in range(cfg.train_freq):
                if self.obs is None:
                    reset_seed, actions = int(learner.rng.integers(2**31)), []
                    self.obs, self.episode_return = learner.env.reset(reset_seed), 0.0
                obs = self.obs
                if learner.env_steps < cfg.learning_starts:
                    action = learner._random_action()
                else:
                    action = learner._explore(obs)
                actions.append(action)
                next_obs, reward, terminated, truncated = learner.env.step(action)
                learner._store(obs, action, reward, terminated, next_obs, terminated or truncated)
                self.episode_return += reward
                learner.env_steps += 1
                self.obs = next_obs
                if terminated or truncated:
                    returns.append(self.episode_return)
                    self.obs = None
        rows = self._outbox()
        episode = None if self.obs is None else np.array(actions, dtype=learner.replay.action.dtype).reshape(
            len(actions), *learner.replay.action.shape[1:])
        done: dict[str, Any] = {"rows": rows, "reset_seed": reset_seed if episode is not None else None,
                                "actions": episode,
                                "extra": {k: np.array(v) for k, v in learner._extra_arrays().items()}}
        if not minibatch:
            return ControlResult(None, int(version), seeds, cfg.train_freq, tuple(returns), {}, 0, **done)
        batch = Batch(**dict(zip(BATCH, minibatch)))
        for column, values in zip(learner.replay.columns.values(), minibatch[len(BATCH):]):
            column[batch.index] = values  # Rainbow's discounts of the drawn slots
        self.recorded.clear()
        self.td = None
        stats = learner._train_step(batch)
        return ControlResult(dict(self.recorded), int(version), seeds, cfg.train_freq, tuple(returns),
                             {k: float(v) for k, v in stats.items()}, len(batch.obs), td=self.td, **done)

    def resume_episode(self, seed: int | None, actions: np.ndarray, extra: dict[str, np.ndarray]) -> None:
        """Be again where the learner's `Episode` journal says: reset with `seed`, replay `actions` (Rainbow's
        n-step window fills again), then load the exploration state `extra`."""
        learner = self.learner
        self.obs, self.episode_return = None, 0.0
        if seed is not None:
            obs = learner.env.reset(int(seed))
            for a in actions:
                action = int(a) if learner.space == "discrete" else np.asarray(a)
                next_obs, reward, terminated, truncated = learner.env.step(action)
                learner._store(obs, action, reward, terminated, next_obs, False)
                self.episode_return += reward
                obs = next_obs
            self.obs = obs
            self._clear_outbox()
        if extra:
            learner._load_extra_arrays(dict(extra))

    def ping(self) -> bool:
        return True


def episodes_state(episodes: dict[int, Episode]) -> dict[str, Any]:
    """The workers' `Episode` journals, flat for a save: ``{"episodes": [...], "episode<w>.actions": array, ...}``."""
    out: dict[str, Any] = {"episodes": []}
    for w, ep in sorted(episodes.items()):
        out["episodes"].append({"w": int(w), "seed": ep.seed, "extra": sorted(ep.extra)})
        out[f"episode{w}.actions"] = ep.actions
        out.update({f"episode{w}.extra.{k}": v for k, v in ep.extra.items()})
    return out


def episodes_from_state(state: dict[str, Any]) -> dict[int, Episode]:
    """What `episodes_state` wrote."""
    out = {}
    for ep in state.get("episodes", []):
        w = int(ep["w"])
        seed = None if ep["seed"] is None else int(ep["seed"])
        out[w] = Episode(seed, np.asarray(state[f"episode{w}.actions"]),
                         {str(k): np.asarray(state[f"episode{w}.extra.{k}"]) for k in ep["extra"]})
    return out
