"""`MARL`: teams trained together (MALib's MARL scenario), stepped like every pbmarl driver.

An `AgentMapping` sends every agent to a group; each group is played either by a
learner (`pb.MAPPO`, `pb.IPPO`, `pb.QMIX`, `pb.IQL`, `pb.MADDPG`, ...) or by a fixed
policy. One `step()`:

1. collects at least the largest ``steps_per_round`` of the learners in env steps,
   all groups in the same episodes (`RolloutPool.collect(policies=..., mapping=...)`);
2. hands each learning group its rows (`GroupLearner.train`);
3. returns a `MARLRecord`: env steps, mean episode return per group (the sum over the
   group's agents), the learners' losses, seconds.

A step is all-or-nothing: an exception anywhere (Ctrl-C included) leaves the learners,
history and random state as they were. ``save(folder)`` / ``MARL.load(folder)`` write
and read a run folder (JSON, ``.npz`` and torch state dicts loaded with
``weights_only=True``), and a loaded run continues exactly as the unsaved one would.

Example:
    >>> game = pb.load_game("pettingzoo:simple_spread_v3", N=3, local_ratio=0.5, max_cycles=25)  # doctest: +SKIP
    >>> marl = pb.MARL(game, learners={"shared": pb.MAPPO(seed=0)}, mapping=pb.AgentMapping.shared(game))  # doctest: +SKIP
    >>> for record in marl.run(10): print(record)  # doctest: +SKIP
    >>> marl.history; marl.evaluate(episodes=100)  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.algorithms.transaction import all_or_nothing
from pbmarl.distributed.on_server import OnServer
from pbmarl.games.base import Game
from pbmarl.learners.group import GroupLearner
from pbmarl.learners.nets import torch_threads
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.rollout.mapping import AgentMapping


@dataclass(frozen=True)
class MARLRecord:
    """One `MARL.step()`.

    Attributes:
        iteration: 1, 2, ... (steps taken so far).
        env_steps: env steps of this step; ``total_env_steps`` since the start.
        episodes: episodes that ended in this step's collection.
        returns: mean episode return per group (summed over the group's agents).
        losses: per learning group, the learner's loss terms.
        seconds: wall seconds of ``collect`` and ``train``.
    """

    iteration: int
    env_steps: int
    total_env_steps: int
    episodes: int
    returns: dict[str, float]
    losses: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"iteration": self.iteration, "env_steps": self.env_steps,
                               "total_env_steps": self.total_env_steps, "episodes": self.episodes}
        row.update({f"return/{g}": v for g, v in self.returns.items()})
        row.update({f"{g}/{k}": v for g, d in self.losses.items() for k, v in d.items()})
        row.update({f"seconds/{k}": v for k, v in self.seconds.items()})
        return row

    def __str__(self) -> str:
        from pbmarl.fmt import fmt

        rets = ", ".join(f"{g} {fmt(v)}" for g, v in self.returns.items())
        return (f"MARL step {self.iteration}: {self.env_steps} env steps ({self.total_env_steps} total), "
                f"{self.episodes} episodes, return {rets}, {sum(self.seconds.values()):.2f}s")


def steppable(game: Game) -> Game:
    """`game` as the multi-agent rollout layer steps it (a `MatrixGame` becomes a Parallel env of the same name)."""
    from pbmarl.games.matrix import MatrixGame
    from pbmarl.rollout.env_instances import parallel_capable

    if isinstance(game, MatrixGame):
        from pbmarl.games.matrix_env import parallel_matrix_game

        return parallel_matrix_game(game)
    if not parallel_capable(game):
        raise ValueError(f"pb.MARL steps PettingZoo Parallel games, Gymnasium/mdp: games and matrix games; "
                         f"{game.name!r} is none of these (for turn-based games use PSRO with a learner per seat)")
    return game


def parallel_options(learners: Mapping[str, GroupLearner]) -> Any:
    """The learners' shared `ParallelOptions` when they ask for a parameter server (``workers > 1``), else None.

    Raises:
        ValueError: a learner asks for workers and another group's learner differs in workers, sync,
            staleness or backend, or cannot run on a parameter server.
    """
    wanted = {g: lr for g, lr in learners.items() if int(getattr(lr.config, "workers", 1)) > 1}
    if not wanted:
        return None
    names = ("workers", "sync", "staleness", "backend")
    for g, lr in learners.items():
        if lr.one_gradient is None or not hasattr(lr.config, "workers"):
            raise ValueError(f"group {g!r}'s {type(lr).__name__} has no parameter-server mode, and "
                             f"{sorted(wanted)} ask for workers; the multi-agent learners that have one are MAPPO, "
                             "IPPO, QMIX, VDN, IQL and MADDPG (all learning groups run on one server)")
    options = {g: tuple(getattr(lr.config, n) for n in names) for g, lr in learners.items()}
    if len(set(options.values())) > 1:
        raise ValueError("every learning group must ask for the same parameter server (one job collects all groups' "
                         f"episodes); {', '.join(names)} are " + "; ".join(f"{g}: {v}" for g, v in options.items()))
    return next(iter(wanted.values())).config


class MARL(OnServer):
    """Several groups of agents trained together; see the module doc.

    Args:
        game: a PettingZoo Parallel game (e.g. ``pettingzoo:simple_spread_v3``), a Gymnasium game, or a `MatrixGame`.
        learners: ``{group: GroupLearner}``, the groups that learn.
        mapping: an `AgentMapping` of `game` (default: every agent in one group, when `learners` names one group).
        fixed: ``{group: Policy or Mixture}`` for the groups that do not learn (opponents, teammates).
        seed: seeds collection.
        num_envs: environment instances stepped together.
        num_threads: torch threads while training (None: leave torch's setting).
        pool: a `RolloutPool` of the game; ``backend="ray"`` pools work too, and cut each round into their own
            work units. The default, a local pool, collects a round as one unit: at least ``steps_per_round``
            env steps and less than one more wave of `num_envs` episodes (3,200 steps of 25-step episodes on
            32 copies are exactly 4 waves).
    """

    def __init__(self, game: Game, learners: Mapping[str, GroupLearner], mapping: AgentMapping | None = None, *,
                 fixed: Mapping[str, Policy | Mixture] | None = None, seed: int = 0, num_envs: int = 32,
                 num_threads: int | None = 1, pool: Any = None) -> None:
        from pbmarl.rollout.pool import RolloutPool

        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game (see pb.load_game), got {type(game).__name__}")
        if not isinstance(learners, Mapping) or not learners:
            raise ValueError(f"learners must be a non-empty dict {{group: learner}}, got {learners!r}")
        for g, learner in learners.items():
            if not isinstance(learner, GroupLearner):
                raise TypeError(f"group {g!r}'s learner must be a multi-agent learner (pb.MAPPO, pb.IPPO, pb.QMIX, "
                                f"pb.IQL, pb.MADDPG, or pb.Independent('sac') for a single-agent one), got "
                                f"{type(learner).__name__}: {learner!r}")
        self.game = game
        self.stepped = steppable(game)
        if mapping is None:
            if len(learners) != 1 or fixed:
                raise ValueError(f"give mapping= for {len(learners) + len(fixed or {})} groups "
                                 "(pb.AgentMapping(game, {agent: group}))")
            mapping = AgentMapping.shared(game, group=next(iter(learners)))
        if not isinstance(mapping, AgentMapping):
            raise TypeError(f"mapping must be a pb.AgentMapping, got {type(mapping).__name__}")
        if mapping.game.name != game.name:
            raise ValueError(f"the mapping was made for {mapping.game.name!r}, not {game.name!r}")
        self.mapping = AgentMapping.from_spec(self.stepped, mapping.spec())
        self.fixed = dict(fixed or {})
        named = set(learners) | set(self.fixed)
        both = set(learners) & set(self.fixed)
        if both or named != set(self.mapping.groups):
            raise ValueError(f"every group of the mapping {list(self.mapping.groups)} needs exactly one learner or fixed "
                             f"policy; learners name {sorted(learners)}, fixed names {sorted(self.fixed)}")
        self.learners = dict(learners)
        for g, learner in self.learners.items():
            learner.bind(self.mapping, g)
        self.seed = int(seed)
        self.num_envs = int(num_envs)
        self.num_threads = num_threads
        self.rng = np.random.default_rng(seed)
        # one work unit per round: the pool's default cuts a call into ~8 units of >= 512 steps, and every unit
        # starts all `num_envs` copies on whole episodes, so 3,200 steps of 25-step episodes on 32 copies were
        # 7 units of 800 = 5,600 steps; as one unit they are 4 waves of 800 = 3,200
        self.pool = pool if pool is not None else RolloutPool(
            self.stepped, envs_per_worker=self.num_envs, seed=seed,
            unit_steps=max(lr.steps_per_round for lr in self.learners.values()))
        self.records: list[MARLRecord] = []
        self.total_env_steps = 0
        self.parallel = parallel_options(self.learners)
        if self.parallel is not None and pool is not None:
            raise ValueError(f"pool= cannot be combined with the learners' workers={self.parallel.workers}: each "
                             "parameter-server worker collects with its own pool (give num_envs= for its size)")
        self._rounds: Any = None

    # -- stepping --------------------------------------------------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        return (copy.deepcopy({g: lr.state_dict() for g, lr in self.learners.items()}),
                {g: (lr.rng.bit_generator.state, lr.env_steps) for g, lr in self.learners.items()},
                self.rng.bit_generator.state, list(self.records), self.total_env_steps)

    def restore(self, state: Any) -> None:
        learner_states, rngs, rng, records, total = state
        for g, lr in self.learners.items():
            lr.load_state_dict(learner_states[g])
            lr.rng.bit_generator.state, lr.env_steps = rngs[g]
        self.rng.bit_generator.state = rng
        self.records, self.total_env_steps = records, total

    def _collect(self) -> dict[str, Any]:
        """One round's rows per learning group: every group in the same episodes, at least the largest
        ``steps_per_round`` env steps."""
        policies: dict[str, Policy | Mixture] = {g: lr.behaviour() for g, lr in self.learners.items()}
        policies.update(self.fixed)
        steps = max(lr.steps_per_round for lr in self.learners.values())
        with torch_threads(self.num_threads):  # one thread: several times faster for these small nets on a busy machine
            rows: dict[str, Any] = self.pool.collect(policies=policies, mapping=self.mapping,
                                                     learning=set(self.learners), steps=steps, seed=self.rng,
                                                     progress=False)
        return rows

    @all_or_nothing
    def step(self) -> MARLRecord:
        """Collect one round for every group in the same episodes, train every learner; see the module doc."""
        if self.parallel is not None:
            return self._server_step()
        t0 = time.perf_counter()
        rows = self._collect()
        t1 = time.perf_counter()
        any_rows = next(iter(rows.values()))
        self.total_env_steps += int(any_rows.steps)
        with torch_threads(self.num_threads):
            losses = {g: lr.train(rows[g], self.total_env_steps) for g, lr in self.learners.items()}
        t2 = time.perf_counter()
        ret = np.asarray(any_rows.episode_returns, dtype=float)
        record = MARLRecord(
            iteration=len(self.records) + 1, env_steps=int(any_rows.steps), total_env_steps=self.total_env_steps,
            episodes=int(len(ret)), returns=self._group_returns(ret),
            losses=losses, seconds={"collect": t1 - t0, "train": t2 - t1},
        )
        self.records.append(record)
        return record

    def _server_step(self) -> MARLRecord:
        """One round of the parameter server's jobs (`pbmarl.distributed.marl_rounds`)."""
        from pbmarl.distributed.marl_rounds import MARLRounds

        t0 = time.perf_counter()
        start = self.total_env_steps
        try:
            with torch_threads(self.num_threads):
                if self._rounds is None:
                    self._rounds = MARLRounds(self)
                ret, losses = self._rounds.round()
        except BaseException:  # the step is undone (all_or_nothing): the workers' state goes with it
            self.close()
            raise
        for lr in self.learners.values():
            lr.env_steps = self.total_env_steps
        record = MARLRecord(
            iteration=len(self.records) + 1, env_steps=self.total_env_steps - start,
            total_env_steps=self.total_env_steps, episodes=int(len(ret)), returns=self._group_returns(ret),
            losses=losses, seconds={"round": time.perf_counter() - t0},
        )
        self.records.append(record)
        return record

    def _group_returns(self, returns: np.ndarray) -> dict[str, float]:
        if len(returns) == 0:
            return {g: float("nan") for g in self.mapping.groups}
        return {g: float(returns[:, list(self.mapping.seats_of(g))].sum(axis=1).mean()) for g in self.mapping.groups}

    def run(self, steps: int, *, progress: bool = False) -> Iterator[MARLRecord]:
        """Yield the records of `steps` more steps (with a tqdm bar over them if `progress`)."""
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"steps must be a non-negative int, got {steps!r}")
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=int(steps), desc=f"MARL {self.game.name}", unit="step", leave=False)
        try:
            for _ in range(int(steps)):
                record = self.step()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix({g: f"{v:.3g}" for g, v in record.returns.items()})
                yield record
        finally:
            if bar is not None:
                bar.close()

    @property
    def history(self) -> pd.DataFrame:
        """One row per step: env steps, returns per group, losses, seconds."""
        if not self.records:
            return pd.DataFrame(columns=["env_steps", "total_env_steps", "episodes"])
        return pd.DataFrame([r.as_row() for r in self.records]).set_index("iteration")

    def policies(self) -> dict[str, Policy | Mixture]:
        """Every group's current policy (learners' without exploration)."""
        out: dict[str, Policy | Mixture] = {g: lr.policy() for g, lr in self.learners.items()}
        out.update(self.fixed)
        return out

    def evaluate(self, episodes: int = 100, *, seed: int | None = None,
                 policies: Mapping[str, Policy | Mixture] | None = None, deterministic: bool = False) -> pd.Series:
        """Mean episode return per group over `episodes` episodes of the current policies (no exploration).

        The trained policies are what each learner's ``policy()`` gives: MAPPO's and IPPO's stochastic
        actors sample their actions, QMIX's and IQL's pick the greedy one. ``deterministic=True`` makes
        every policy play its most likely legal action (Box policies: their noise-free action), the
        evaluation BenchMARL and the MAPPO authors' ``eval`` use.

        Returns a Series ``return/{group}`` plus ``mean_step_reward`` (per agent per env step) and ``episode_length``.
        """
        from pbmarl.rollout.parallel_engine import run_parallel
        from pbmarl.rollout.records import Seat

        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise ValueError(f"episodes must be a positive int, got {episodes!r}")
        if not isinstance(deterministic, bool):
            raise ValueError(f"deterministic must be True or False, got {deterministic!r}")
        chosen = dict(self.policies() if policies is None else policies)
        seats = {g: Seat.of(chosen[g]) for g in self.mapping.groups}
        rng = np.random.default_rng(self.seed + 7919 if seed is None else seed)
        with torch_threads(self.num_threads):
            out = run_parallel(self.stepped, self.mapping, seats, set(), rng, num_envs=self.num_envs,
                               episodes=int(episodes), deterministic=deterministic)
        ret = np.asarray(out.returns, dtype=float)
        row: dict[str, float] = {f"return/{g}": v for g, v in self._group_returns(ret).items()}
        row["mean_step_reward"] = float(ret.sum() / max(out.lengths.sum(), 1) / ret.shape[1])
        row["episode_length"] = float(out.lengths.mean())
        return pd.Series(row)

    def __repr__(self) -> str:
        who = ", ".join(f"{g}: {type(lr).__name__}" for g, lr in self.learners.items())
        fixed = "".join(f", {g}: fixed" for g in self.fixed)
        return f"MARL({self.game.name!r}, {{{who}{fixed}}}, {len(self.records)} steps, {self.total_env_steps} env steps)"

    # -- files -----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the run (learners, random state, history, fixed policies) to folder `path`."""
        from pbmarl.algorithms.marl_io import save_marl

        return save_marl(self, Path(path))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MARL:
        """Read a run written by `save`; it continues exactly where the saved one stood."""
        from pbmarl.algorithms.marl_io import load_marl

        return load_marl(Path(path))
