"""`MARL`: teams trained together (MALib's MARL scenario), a `pbmarl.runs.Run` like every other.

An `AgentMapping` sends every agent to a group; each group is played either by a
learner (`pb.MAPPO`, `pb.learners.IPPO`, `pb.QMIX`, `pb.learners.IQL`, `pb.MADDPG`, ...) or by a fixed
policy. One `step()`:

1. collects at least the largest ``steps_per_round`` of the learners in env steps,
   all groups in the same episodes (`RolloutPool.collect(policies=..., mapping=...)`);
2. hands each learning group its rows (`GroupLearner.train`);
3. returns a `MARLRecord`: cumulative env steps, episodes and seconds, the mean episode return
   per group (``return/<group>``, the sum over the group's agents), each learner's training
   statistics (``loss/<group>/<name>``) and the seconds of each phase (``time/collect``, ``time/train``).

A step is all-or-nothing: an exception anywhere (Ctrl-C included) leaves the learners,
history and random state as they were. ``save(folder)`` / ``pb.load_run(folder)`` write and
read one run folder (`pbmarl.runs.folder`), and a loaded run continues exactly as the unsaved one.

On a parameter server (the learners' ``workers > 1``, `pbmarl.algorithms.teams.rounds`) the
workers keep state of their own (their replays, the batch each is part-way through, their place in the job
seeds, jobs in flight), which neither a save nor an interrupted step keeps: a loaded run, or the step after a Ctrl-C,
starts fresh workers and from there on differs from a run that went straight through. Such a
step says so in its record: ``fresh_workers`` is True on every step that started workers.

Example:
    >>> import pbmarl as pb
    >>> game = pb.load_game("pettingzoo:simple_spread_v3", N=2, max_cycles=5)
    >>> marl = pb.MARL(game, {"shared": pb.MAPPO(seed=0, steps_per_round=20, epochs=1)}, seed=0, num_envs=2)
    >>> records = marl.run(2, progress=False)
    >>> list(marl.history.columns[:4])
    ['env_steps', 'episodes', 'wall_time', 'return/shared']
    >>> list(marl.evaluate(episodes=4).mean.index)
    ['shared']
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from pbmarl.algorithms.teams.records import MARLConfig, MARLRecord
from pbmarl.algorithms.teams.rounds import MARLRounds
from pbmarl.config import build_config, check_seed, is_int
from pbmarl.distributed.on_server import OnServer
from pbmarl.games.base import Game
from pbmarl.learners.multiagent.group import GroupLearner
from pbmarl.policies.base import Policy, new_policy_from_state
from pbmarl.policies.mixture import Mixture
from pbmarl.rollout.mapping import AgentMapping
from pbmarl.rollout.results import EvalResult
from pbmarl.runs import Run, SavedRun, State
from pbmarl.runs.transaction import all_or_nothing
from pbmarl.torchutil import copy_state, torch_threads

#: the group learners by their registry name (what a run folder and the command line name): module, class
GROUP_LEARNERS: dict[str, tuple[str, str]] = {
    "mappo": ("pbmarl.learners.multiagent.mappo", "MAPPO"), "rmappo": ("pbmarl.learners.multiagent.mappo", "RMAPPO"),
    "ippo": ("pbmarl.learners.multiagent.mappo", "IPPO"), "qmix": ("pbmarl.learners.multiagent.qmix", "QMIX"),
    "iql": ("pbmarl.learners.multiagent.qmix", "IQL"), "vdn": ("pbmarl.learners.multiagent.qmix", "VDNLearner"),
    "maddpg": ("pbmarl.learners.multiagent.maddpg", "MADDPG"), "independent": ("pbmarl.learners.multiagent.independent", "Independent"),
}


def group_learner_class(name: str) -> type[GroupLearner]:
    """The group learner registered as `name`; an unknown name raises ValueError with a did-you-mean."""
    import importlib

    from pbmarl.config import did_you_mean

    if name not in GROUP_LEARNERS:
        raise ValueError(f"unknown multi-agent learner {name!r}{did_you_mean(name, GROUP_LEARNERS)} "
                         f"Known: {', '.join(GROUP_LEARNERS)}")
    module, cls = GROUP_LEARNERS[name]
    found: type[GroupLearner] = getattr(importlib.import_module(module), cls)
    return found


def make_group_learner(name: str, *, seed: int = 0, **options: Any) -> GroupLearner:
    """``"mappo"`` -> ``pb.MAPPO(seed=seed, **options)`` and so on; an unknown name raises, listing the known."""
    return group_learner_class(name)(seed=seed, **options)


def steppable(game: Game) -> Game:
    """`game` as the multi-agent rollout layer steps it (a `MatrixGame` becomes a Parallel env of the same name)."""
    from pbmarl.envs.instances import parallel_capable
    from pbmarl.games.matrix import MatrixGame

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


class MARL(Run, OnServer):
    """Several groups of agents trained together; see the module doc.

    ``pb.MARL(game, learners, mapping=None, *, fixed=None, pool=None, seed=0, config=None, **options)``;
    the options are the fields of `MARLConfig` (``num_envs``, ``num_threads``).

    Args:
        game: a PettingZoo Parallel game (e.g. ``pettingzoo:simple_spread_v3``), a Gymnasium game, a `MatrixGame`,
            or the name of one.
        learners: ``{group: GroupLearner}``, the groups that learn (each learner trains one group of one run).
        mapping: an `AgentMapping` of `game` (default: every agent in one group, when `learners` names one group).
        fixed: ``{group: Policy or Mixture}`` for the groups that do not learn (opponents, teammates).
        pool: a `RolloutPool` of the game; ``backend="ray"`` pools work too, and cut each round into their own
            work units. The default, a local pool, collects a round as one unit: at least ``steps_per_round``
            env steps and less than one more wave of `num_envs` episodes.
        seed: seeds collection.
    """

    def __init__(self, game: Game | str, learners: Mapping[str, GroupLearner], mapping: AgentMapping | None = None,
                 *, fixed: Mapping[str, Policy | Mixture] | None = None, pool: Any = None, seed: int = 0,
                 config: MARLConfig | None = None, **options: Any) -> None:
        from pbmarl.rollout.pool import RolloutPool

        if isinstance(game, str):
            from pbmarl.games.registry import load_game

            game = load_game(game)
        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game or a game name (see pb.load_game), got {type(game).__name__}")
        self.config: MARLConfig = build_config(MARLConfig, config, options, owner="MARL")
        self.seed = check_seed(seed)
        if not isinstance(learners, Mapping) or not learners:
            raise ValueError(f"learners must be a non-empty dict {{group: learner}}, got {learners!r}")
        for g, learner in learners.items():
            if not isinstance(learner, GroupLearner):
                raise TypeError(f"group {g!r}'s learner must be a multi-agent learner (pb.MAPPO, pb.learners.IPPO, pb.QMIX, "
                                f"pb.learners.IQL, pb.MADDPG, or pb.learners.Independent(algo='sac') for a single-agent one), got "
                                f"{type(learner).__name__}: {learner!r}")
        if len({id(lr) for lr in learners.values()}) < len(learners):
            raise ValueError("one learner object is given for several groups; each group needs a learner of its own")
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
        if set(learners) & set(self.fixed) or named != set(self.mapping.groups):
            raise ValueError(f"every group of the mapping {list(self.mapping.groups)} needs exactly one learner or fixed "
                             f"policy; learners name {sorted(learners)}, fixed names {sorted(self.fixed)}")
        self.parallel = parallel_options(learners)
        if self.parallel is not None and pool is not None:
            raise ValueError(f"pool= cannot be combined with the learners' workers={self.parallel.workers}: each "
                             "parameter-server worker collects with its own pool (give num_envs= for its size)")
        self.learners = dict(learners)
        bound: list[GroupLearner] = []
        try:
            for g, learner in self.learners.items():
                learner.bind(self.mapping, g)
                bound.append(learner)
        except BaseException:
            for learner in bound:  # a failed set-up leaves the learners free for another run
                learner.release()
            raise
        self.rng = np.random.default_rng(self.seed)
        # one work unit per round: every unit starts all `num_envs` copies on whole episodes, so cutting a round
        # into several units would collect several waves too many
        self.pool = pool if pool is not None else RolloutPool(
            self.stepped, envs_per_worker=self.config.num_envs, seed=self.seed,
            unit_steps=max(lr.steps_per_round for lr in self.learners.values()))
        self.records: list[MARLRecord] = []
        self.env_steps = 0
        self.episodes = 0
        self.wall_time = 0.0
        self._rounds: Any = None

    # -- stepping --------------------------------------------------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        return (copy_state({g: lr.state_dict() for g, lr in self.learners.items()}),
                {g: (lr.rng.bit_generator.state, lr.env_steps) for g, lr in self.learners.items()},
                self.rng.bit_generator.state, list(self.records), self.env_steps, self.episodes, self.wall_time)

    def restore(self, state: Any) -> None:
        learner_states, rngs, rng, records, self.env_steps, self.episodes, self.wall_time = state
        for g, lr in self.learners.items():
            lr.load_state_dict(learner_states[g])
            lr.rng.bit_generator.state, lr.env_steps = rngs[g]
        self.rng.bit_generator.state = rng
        self.records = records

    def _collect(self) -> dict[str, Any]:
        """One round's rows per learning group: every group in the same episodes, at least the largest
        ``steps_per_round`` env steps."""
        policies: dict[str, Policy | Mixture] = {g: lr.behaviour() for g, lr in self.learners.items()}
        policies.update(self.fixed)
        steps = max(lr.steps_per_round for lr in self.learners.values())
        with torch_threads(self.config.num_threads):  # one thread: several times faster for these small nets
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
        env_steps = self.env_steps + int(any_rows.steps)
        with torch_threads(self.config.num_threads):
            losses = {g: lr.train(rows[g], env_steps) for g, lr in self.learners.items()}
        t2 = time.perf_counter()
        return self._record(np.asarray(any_rows.episode_returns, dtype=float), env_steps, losses,
                            {"collect": t1 - t0, "train": t2 - t1}, {})

    def _server_step(self) -> MARLRecord:
        """One round of the parameter server's jobs (`pbmarl.algorithms.teams.rounds`)."""
        t0 = time.perf_counter()
        fresh = self._rounds is None
        try:
            with torch_threads(self.config.num_threads):
                if self._rounds is None:
                    self._rounds = MARLRounds(self)
                ret, losses, staleness, env_steps = self._rounds.round()
        except BaseException:  # the step is undone (all_or_nothing): the workers' state goes with it
            self.close()
            raise
        for lr in self.learners.values():
            lr.env_steps = env_steps
        return self._record(ret, env_steps, losses, {"round": time.perf_counter() - t0},
                            {"max_staleness": staleness, "fresh_workers": fresh})

    def _record(self, ret: np.ndarray, env_steps: int, losses: dict[str, dict[str, float]],
                times: dict[str, float], extra: dict[str, Any]) -> MARLRecord:
        record = MARLRecord(
            iteration=len(self.records) + 1, env_steps=env_steps, episodes=self.episodes + len(ret),
            wall_time=self.wall_time + sum(times.values()), returns=self._group_returns(ret),
            losses=losses, times=times, extra=extra)
        self.records.append(record)
        self.env_steps, self.episodes, self.wall_time = record.env_steps, record.episodes, record.wall_time
        return record

    def _group_returns(self, returns: np.ndarray) -> dict[str, float]:
        if len(returns) == 0:
            return {g: float("nan") for g in self.mapping.groups}
        return {g: float(returns[:, list(self.mapping.seats_of(g))].sum(axis=1).mean()) for g in self.mapping.groups}

    def policies(self) -> dict[str, Policy | Mixture]:
        """Every group's current policy (learners' without exploration)."""
        out: dict[str, Policy | Mixture] = {g: lr.policy() for g, lr in self.learners.items()}
        out.update(self.fixed)
        return out

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False,
                 policies: Mapping[str, Policy | Mixture] | None = None) -> EvalResult:
        """Each group's episode return (summed over its agents) over `episodes` fresh episodes of `policies`
        (default: the current ones, without exploration); the run does not change.

        The trained policies are what each learner's ``policy()`` gives: MAPPO's and IPPO's stochastic
        actors sample their actions, QMIX's and IQL's pick the greedy one. ``deterministic=True`` makes
        every policy play its most likely legal action (Box policies: their noise-free action), the
        evaluation BenchMARL and the MAPPO authors' ``eval`` use. The result keeps the per-episode
        returns ``[E, groups]`` and lengths (``returns``, ``lengths``).
        """
        from pbmarl.rollout.parallel_engine import run_parallel
        from pbmarl.rollout.records import Seat

        if not is_int(episodes) or episodes < 1:
            raise ValueError(f"episodes must be a positive int, got {episodes!r}")
        if not isinstance(deterministic, bool):
            raise ValueError(f"deterministic must be True or False, got {deterministic!r}")
        t0 = time.perf_counter()
        chosen = dict(self.policies() if policies is None else policies)
        seats = {g: Seat.of(chosen[g]) for g in self.mapping.groups}
        rng = np.random.default_rng(check_seed(seed))
        with torch_threads(self.config.num_threads):
            out = run_parallel(self.stepped, self.mapping, seats, set(), rng, num_envs=self.config.num_envs,
                               episodes=int(episodes), deterministic=deterministic)
        ret = np.asarray(out.returns, dtype=float)
        groups = list(self.mapping.groups)
        per_group = np.stack([ret[:, list(self.mapping.seats_of(g))].sum(axis=1) for g in groups], axis=1)
        return EvalResult.from_returns(per_group, np.asarray(out.lengths), int(out.steps), time.perf_counter() - t0,
                                       keep=True, index=groups)

    def close(self) -> None:
        """Stop the parameter server's workers and server (``workers > 1``); the next step starts fresh ones."""
        OnServer.close(self)

    def __repr__(self) -> str:
        who = ", ".join(f"{g}: {type(lr).__name__}" for g, lr in self.learners.items())
        fixed = "".join(f", {g}: fixed" for g in self.fixed)
        return f"MARL({self.game.name!r}, {{{who}{fixed}}}, {len(self.records)} steps, {self.env_steps} env steps)"

    # -- files -----------------------------------------------------------------------------------
    def state(self) -> State:
        """Learners (networks, optimisers, replays, generators), fixed policies, counters, random state, records."""
        from pbmarl.games.registry import game_spec

        arrays: dict[str, np.ndarray] = {}
        fixed: dict[str, Any] = {}
        for i, (group, entry) in enumerate(self.fixed.items()):
            members, weights = ([entry], [1.0]) if isinstance(entry, Policy) else (list(entry.policies),
                                                                                    list(entry.weights))
            saved = []
            for j, policy in enumerate(members):
                names = []
                for k, (name, value) in enumerate(policy.arrays().items()):
                    arrays[f"fixed.{i}.{j}.{k}"] = np.asarray(value)
                    names.append([name, f"fixed.{i}.{j}.{k}"])
                saved.append({"meta": policy.meta(), "arrays": names})
            fixed[group] = {"members": saved, "weights": [float(w) for w in weights],
                            "mixture": isinstance(entry, Mixture)}
        learners = [{"group": g, **lr.spec(), "rng": lr.rng.bit_generator.state} for g, lr in self.learners.items()]
        data = {"mapping": self.mapping.spec(), "rng": self.rng.bit_generator.state, "env_steps": self.env_steps,
                "episodes": self.episodes, "wall_time": self.wall_time, "learners": learners, "fixed": fixed,
                "records": [r.to_json() for r in self.records]}
        modules: dict[str, Mapping[str, Any]] = {f"learner-{i}": lr.state_dict() for i, lr in enumerate(self.learners.values())}
        return State(data=data, arrays=arrays, modules=modules, config=self.config.to_dict(), seed=self.seed,
                     game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> MARL:
        """Rebuild a saved run; `overrides`: ``fixed=`` (policies to play the fixed groups instead of the saved
        ones), ``pool=``, ``device=`` (every group learner's device: a run saved with ``device="cuda"`` loads on a
        machine without CUDA with ``device="cpu"``), and `MARLConfig` options (``num_threads``, ``num_envs``)."""
        data = saved.data
        game = saved.game()
        fixed = overrides.pop("fixed", None)
        pool = overrides.pop("pool", None)
        device = overrides.pop("device", None)  # every group learner's device (a run saved on a GPU loads on a CPU)
        config = build_config(MARLConfig, None, {**saved.config, **overrides}, owner="MARL.load")
        mapping = AgentMapping.from_spec(steppable(game), data["mapping"])
        learners = {}
        for entry in data["learners"]:
            learner_cls = group_learner_class(entry["name"])
            options: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in entry["config"].items()}
            if device is not None:
                if "device" in options:
                    options["device"] = device
                elif isinstance(options.get("options"), dict):  # Independent: its wrapped learner's option
                    options["options"] = {**options["options"], "device": device}
            learners[entry["group"]] = learner_cls(seed=entry["seed"], config=learner_cls.config_class(**options))
        if fixed is None:
            fixed = _load_fixed(saved, mapping, data["fixed"])
        run = cls(game, learners, mapping, fixed=fixed, pool=pool, seed=saved.seed, config=config)
        for i, (entry, learner) in enumerate(zip(data["learners"], run.learners.values())):
            learner.load_state_dict(saved.module(f"learner-{i}"))
            learner.rng.bit_generator.state = entry["rng"]
        run.rng.bit_generator.state = data["rng"]
        run.env_steps, run.episodes, run.wall_time = int(data["env_steps"]), int(data["episodes"]), \
            float(data["wall_time"])
        run.records = [MARLRecord.from_json(r) for r in data["records"]]
        return run


def _load_fixed(saved: SavedRun, mapping: AgentMapping, entries: Mapping[str, Any]) -> dict[str, Policy | Mixture]:
    """The fixed groups' policies, each rebuilt for its own group's view (its observation width, not seat 0's)."""
    names = {key: (None, "fiub") for e in entries.values() for m in e["members"] for _, key in m["arrays"]}
    arrays = saved.arrays(names) if names else {}
    out: dict[str, Policy | Mixture] = {}
    for group, entry in entries.items():
        view = mapping.group_game(group)
        members = [new_policy_from_state(view, {name: arrays[key] for name, key in m["arrays"]}, m["meta"])
                   for m in entry["members"]]
        out[group] = Mixture(members, entry["weights"]) if entry["mixture"] else members[0]
    return out
