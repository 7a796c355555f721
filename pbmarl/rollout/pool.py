"""`RolloutPool`: evaluate profiles, fill payoff tables and collect training data by sampling.

Every call is split into work units (`pbmarl.rollout.units`), each seeded from
``(call seed, unit key)``: results depend on the seed only, not on the backend,
the number of workers or which worker ran what. Units run in this process
(``backend="local"``) or on Ray actors (``backend="ray"``, see
`pbmarl.rollout.ray_backend`), where a lost worker is replaced and only its units
are run again. Payoff tables change only when a `fill` call succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.hosting.shipping import PolicyTokens
from pbmarl.payoffs import PayoffTable
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.rollout.results import EvalResult, FillResult
from pbmarl.rollout.runner import ENGINES
from pbmarl.rollout.staging import Staging
from pbmarl.rollout.trajectories import Trajectories, concat_trajectories
from pbmarl.rollout.units import COLLECT, COLLECT_GROUPS, EVAL, FILL, SeatRef, UnitResult, WorkUnit, chunks

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.rollout.mapping import AgentMapping

BACKENDS = ("local", "ray")
#: work above these sizes shows a progress bar unless progress=False
PROGRESS_EPISODES = 200_000
PROGRESS_STEPS = 500_000


#: upper bounds on sizes, so that a typo or a tampered run folder is an error, not a hang or an out-of-memory
LIMITS = {"num_workers": 4096, "envs_per_worker": 1 << 20, "episodes": 10**10, "max_episodes": 10**10,
          "unit_episodes": 10**9, "unit_steps": 10**10}


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    if value > LIMITS.get(what, value):
        raise ValueError(f"{what} must be at most {LIMITS[what]:,}, got {value!r}")
    return int(value)


class RolloutPool:
    """Workers that play many games at once with batched inference.

    Args:
        game: the game to play.
        num_workers: worker processes (Ray actors); the local backend runs all work in this process.
        envs_per_worker: game instances each worker steps together.
        backend: ``"local"`` (in-process, default) or ``"ray"`` (starts `init_ray()` if needed).
        seed: seeds every call that is not given its own `seed`.
        engine: the runner's engine: ``"auto"`` (compiled tree where the game fits, else states),
            ``"tree"`` or ``"states"``.
        unit_episodes: episodes per work unit (the grain of scheduling and seeding); by
            default a call is cut into about 32 units of 64 to 4096 episodes.
        unit_steps: learner steps per work unit in `collect`; by default about 8 units
            of 512 to 16384 steps. Unit sizes never depend on `num_workers`, so
            results do not either.
        worker_cpus: CPUs each Ray actor reserves.
        stepper: what steps the copies of a Gymnasium or PettingZoo Parallel environment in
            ``collect(policies=...)``: ``"auto"`` (default) the fastest route the environment
            has -- pbmarl's numpy port (``Pendulum-v1``; mpe2's spread, adversary, tag, reference), Gymnasium's
            native vector env (``CartPole-v1``), Gymnasium's ``SyncVectorEnv``, or one
            environment object per copy -- as measured by ``benchmarks/env_throughput.py``;
            or one of ``"numpy"``, ``"vector_entry_point"``, ``"sync_vector"``,
            ``"instances"`` (the opt-out: the original environments only). See
            `pbmarl.envs.batch` and ``available_steppers(game)``.

    Example:
        >>> with RolloutPool(game, num_workers=2, backend="ray", seed=0) as pool:  # doctest: +SKIP
        ...     res = pool.evaluate([pi, pi], episodes=10_000)
        ...     pool.fill(table, episodes=1000)
    """

    def __init__(
        self,
        game: Game | str,
        num_workers: int = 1,
        envs_per_worker: int = 256,
        backend: str = "local",
        seed: int | None = 0,
        *,
        engine: str = "auto",
        unit_episodes: int | None = None,
        unit_steps: int | None = None,
        worker_cpus: float = 1.0,
        stepper: str = "auto",
    ) -> None:
        game = as_game(game)
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; use one of {BACKENDS}")
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; use one of {ENGINES}")
        self.game = game
        self.num_workers = _positive_int(num_workers, "num_workers")
        self.envs_per_worker = _positive_int(envs_per_worker, "envs_per_worker")
        self.unit_episodes = None if unit_episodes is None else _positive_int(unit_episodes, "unit_episodes")
        self.unit_steps = None if unit_steps is None else _positive_int(unit_steps, "unit_steps")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        if isinstance(worker_cpus, (bool, np.bool_)) or not isinstance(worker_cpus, (int, float, np.integer, np.floating)) \
                or not 0 < float(worker_cpus) <= 1024:
            raise ValueError(f"worker_cpus must be a number in (0, 1024] (CPUs each Ray actor reserves), got {worker_cpus!r}")
        from pbmarl.envs.batch import resolve_stepper

        if stepper != "auto":  # an unknown or unavailable route fails here, naming the available ones
            resolve_stepper(game, stepper)
        self.stepper = stepper
        self.backend_name = backend
        self._spec = {"kind": "rollout", "num_workers": self.num_workers, "envs_per_worker": self.envs_per_worker,
                      "backend": backend, "seed": None if seed is None else int(seed), "engine": engine,
                      "unit_episodes": self.unit_episodes, "unit_steps": self.unit_steps, "worker_cpus": worker_cpus,
                      "stepper": stepper}
        self._seeds = np.random.SeedSequence(seed)
        self._calls = 0
        self._token = PolicyTokens()
        self._backend: Any
        if backend == "local":
            from pbmarl.rollout.local_backend import LocalBackend

            self._backend = LocalBackend(game, num_workers=self.num_workers, envs_per_worker=self.envs_per_worker, engine=engine)
        else:
            from pbmarl.rollout.ray_backend import RayBackend

            self._backend = RayBackend(game, num_workers=self.num_workers, envs_per_worker=self.envs_per_worker,
                                       engine=engine, worker_cpus=worker_cpus)

    # -- public ------------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        """JSON-able options that rebuild an equivalent pool: ``RolloutPool(game, **spec minus 'kind')``."""
        return dict(self._spec)

    def evaluate(self, profile: Sequence[Policy | Mixture], episodes: int, *, seed: int | np.random.Generator | None = None,
                 keep_returns: bool = False, progress: bool | None = None) -> EvalResult:
        """Play `episodes` episodes of `profile` (one Policy or Mixture per seat).

        A Mixture seat draws its member once per episode. Returns mean and standard
        error per seat, and with ``keep_returns=True`` the per-episode returns and lengths.
        """
        started = time.perf_counter()
        episodes = _positive_int(episodes, "episodes")
        seats, policies = self._seats(profile)
        for pi in policies.values():
            if not pi.discrete:
                raise TypeError(f"evaluate plays policies by their action probabilities; {pi!r} acts on a continuous "
                                "space and has none: measure it with collect(policies={group: policy}, steps=...) "
                                "(Trajectories.episode_returns)")
        entropy, call = self._begin(seed, policies)
        units = [WorkUnit((EVAL, j), entropy, seats, episodes=n, call=call)
                 for j, n in enumerate(chunks(episodes, self._unit(episodes, 1)))]
        results = self._run(units, policies, progress, episodes, "evaluate")
        ordered = [results[u.key] for u in units]
        returns = np.concatenate([r.returns for r in ordered])
        lengths = np.concatenate([r.lengths for r in ordered])
        steps = sum(r.steps for r in ordered)
        return EvalResult.from_returns(returns, lengths, steps, time.perf_counter() - started, keep=keep_returns)

    def fill(self, table: PayoffTable, episodes: int = 1000, *, until_stderr: float | None = None,
             max_episodes: int | None = None, seed: int | np.random.Generator | None = None,
             progress: bool | None = None) -> FillResult:
        """Sample every missing cell of `table` (bound to a Population of this game) `episodes` times.

        With `until_stderr`, keep sampling every sampled (non-exact) cell until its
        standard error, the largest over players, is below `until_stderr` or the cell
        holds `max_episodes` episodes (default ``100 * episodes``). The table changes
        only when the whole call succeeds; an interrupted call leaves it as it was.
        """
        started = time.perf_counter()
        pop = self._check_table(table)
        episodes = _positive_int(episodes, "episodes")
        if until_stderr is not None and not (np.isfinite(until_stderr) and until_stderr > 0):
            raise ValueError(f"until_stderr must be a positive number or None, got {until_stderr!r}")
        cap = _positive_int(max_episodes, "max_episodes") if max_episodes is not None else 100 * episodes
        if cap < episodes:
            raise ValueError(f"max_episodes ({cap}) must be at least episodes ({episodes})")
        missing = table.missing_cells()
        cell_policies = {cell: [pop[p][i] for p, i in enumerate(cell)] for cell in np.ndindex(*table.sizes)}
        every = [pi for members in cell_policies.values() for pi in members]
        for pi in every:
            self._check_member(pi, "population member")
        entropy, call = self._begin(seed, every)
        stage = Staging(table)
        exact = table.exact
        candidates = [cell for cell in cell_policies if not exact[cell]]
        plan = {cell: episodes for cell in missing}
        if until_stderr is not None:
            plan.update(self._more(stage, [c for c in candidates if c not in plan], until_stderr, cap, episodes))
        rounds, total_episodes, total_steps = 0, 0, 0
        while plan:
            units = []
            for cell, count in sorted(plan.items()):
                size = self._unit(count, len(plan))
                seats = tuple(SeatRef((self._token(pi),), (1.0,)) for pi in cell_policies[cell])
                for j, n in enumerate(chunks(count, size)):
                    units.append(WorkUnit((FILL, rounds) + cell + (j,), entropy, seats, episodes=n, call=call))
            unit_cell = {u.key: u.key[2:-1] for u in units}

            def stage_result(r: UnitResult, cells: dict[tuple[int, ...], tuple[int, ...]] = unit_cell) -> None:
                stage.add(cells[r.key], r.key, r.returns)

            done = self._run(units, {self._token(pi): pi for pi in every}, progress, sum(plan.values()), "fill",
                             stage_to=stage_result)
            total_episodes += sum(len(r.returns) for r in done.values())
            total_steps += sum(r.steps for r in done.values())
            rounds += 1
            plan = {} if until_stderr is None else self._more(stage, candidates, until_stderr, cap, episodes)
        sampled = stage.cells
        worst = max((stage.max_stderr(c) for c in sampled), default=float("nan"))
        stage.commit()
        return FillResult(tuple(sampled), total_episodes, total_steps, rounds, time.perf_counter() - started, worst)

    @overload
    def collect(self, player: int, policy: Policy, opponents: Sequence[Policy | Mixture | None], steps: int, *,
                seed: int | np.random.Generator | None = None, progress: bool | None = None) -> Trajectories: ...

    @overload
    def collect(self, *, policies: Mapping[str, Policy | Mixture], steps: int, mapping: AgentMapping | None = None,
                learning: Collection[str] | None = None, seed: int | np.random.Generator | None = None,
                progress: bool | None = None, whole_episodes: bool = True) -> dict[str, Trajectories]: ...

    def collect(self, player: int | None = None, policy: Policy | None = None,
                opponents: Sequence[Policy | Mixture | None] | None = None, steps: int | None = None, *,
                policies: Mapping[str, Policy | Mixture] | None = None, mapping: AgentMapping | None = None,
                learning: Collection[str] | None = None, seed: int | np.random.Generator | None = None,
                progress: bool | None = None, whole_episodes: bool = True) -> Trajectories | dict[str, Trajectories]:
        """Training data from whole episodes: one learning seat, or every learning group of a mapping.

        ``collect(player, policy, opponents, steps)``: at least `steps` transitions of
        `policy` in seat `player`. `opponents` has one entry per seat (entry `player` is
        ignored and may be None); a Mixture opponent draws its member once per episode.

        ``collect(policies={group: policy_or_mixture}, mapping=..., learning={groups}, steps=...)``
        (PettingZoo Parallel and Gymnasium games): at least `steps` env steps, with
        `mapping` (default `AgentMapping.independent`) sending each agent to its group's
        policy; returns ``{group: Trajectories}`` for the `learning` groups (default:
        all), one row per agent per step (see `Trajectories`). Bad input raises before
        anything is played.

        How many steps: the call is cut into work units (`unit_steps` each, the last
        one the rest). With ``whole_episodes=True`` (default) a unit starts episodes on
        its copies until its steps are reached and lets the running ones finish, so
        a call returns *at least* `steps` env steps and at most about ``(copies - 1) x``
        the longest episode more per unit (`Trajectories.steps` says how many). With
        ``whole_episodes=False`` it returns *exactly* `steps`: no episode starts that
        could not take a step, and episodes still running at a unit's budget are cut
        there -- their last rows are flagged ``truncated`` (bootstrap from `next_obs`)
        and `episode_returns` / `episode_lengths` hold what they had played. The
        single-seat form always plays whole episodes (at least `steps` transitions).
        """
        if policies is not None:
            if player is not None or policy is not None or opponents is not None:
                raise TypeError("give either (player, policy, opponents, steps) or policies=..., mapping=..., not both")
            return self._collect_groups(policies, mapping, learning, steps, seed=seed, progress=progress,
                                        whole_episodes=whole_episodes)
        if player is None or policy is None or opponents is None or steps is None:
            raise TypeError("collect needs (player, policy, opponents, steps), or policies=..., steps=... for groups")
        player = self.game.check_player(player)
        steps = _positive_int(steps, "steps")
        self._check_member(policy, "the learner's policy")
        if len(opponents) != self.game.num_players:
            raise ValueError(f"opponents needs one entry per seat ({self.game.num_players}) for {self.game.name!r}, "
                             f"got {len(opponents)}")
        profile = [policy if p == player else opponents[p] for p in range(self.game.num_players)]
        seats, tokens = self._seats(profile)  # every check of the profile, on either route
        if self._seats_as_groups():
            return self._collect_seat_as_group(player, profile, steps, seed=seed, progress=progress)
        entropy, call = self._begin(seed, tokens)
        units = [WorkUnit((COLLECT, j), entropy, seats, learner=player, min_learner_steps=n, call=call)
                 for j, n in enumerate(chunks(steps, self.unit_steps or _clamp(steps / 8, 512, 16_384)))]
        results = self._run(units, tokens, progress, steps, "collect",
                            unit_size=lambda r: 0 if r.trajectories is None else len(r.trajectories))
        return concat_trajectories([t for t in (results[u.key].trajectories for u in units) if t is not None])

    def _seats_as_groups(self) -> bool:
        """Whether the one-seat form of `collect` runs as a multi-agent collect: on PettingZoo Parallel games,
        where the group route steps every copy at once through the pool's stepper (a numpy port where pbmarl
        has one) instead of one AEC turn at a time. The data is the same kind either way: whole episodes of the
        seat, one row per step, ``done`` at every episode end. Also on Gymnasium games that act on a Box (or
        MultiDiscrete): only the group route plays policies by `act` (the turn-based one samples action
        probabilities, which those policies do not have), refusing actions outside the space by value."""
        from pbmarl.games.gym import GymGame
        from pbmarl.games.pettingzoo import PettingZooGame

        if isinstance(self.game, GymGame):
            return self.game.num_actions == 0
        return isinstance(self.game, PettingZooGame) and self.game.api == "parallel"

    def _collect_seat_as_group(self, player: int, profile: Sequence[Policy | Mixture | None], steps: int, *,
                               seed: int | np.random.Generator | None, progress: bool | None) -> Trajectories:
        from pbmarl.rollout.mapping import AgentMapping

        mapping = AgentMapping.independent(self.game)  # one group per seat
        # `_seats` has refused a profile with None in it
        policies = {g: cast("Policy | Mixture", profile[mapping.seats_of(g)[0]]) for g in mapping.groups}
        (learner,) = [g for g in mapping.groups if mapping.seats_of(g) == (player,)]
        out = self._collect_groups(policies, mapping, {learner}, steps, seed=seed, progress=progress)
        return out[learner]

    def _collect_groups(self, policies: Mapping[str, Policy | Mixture], mapping: AgentMapping | None,
                        learning: Collection[str] | None, steps: int | None, *,
                        seed: int | np.random.Generator | None, progress: bool | None,
                        whole_episodes: bool = True) -> dict[str, Trajectories]:
        from pbmarl.rollout.groups import group_plan

        if steps is None:
            raise TypeError("collect(policies=...) needs steps=")
        steps = _positive_int(steps, "steps")
        plan = group_plan(self.game, policies, mapping, learning)  # every check before anything runs
        if not isinstance(whole_episodes, (bool, np.bool_)):
            raise TypeError(f"whole_episodes must be True or False, got {whole_episodes!r}")
        tokens = {self._token(pi): pi for pi in plan.members()}
        ref = plan.ref(self._token, stepper=self.stepper, whole_episodes=bool(whole_episodes))
        entropy, call = self._begin(seed, tokens)
        units = [WorkUnit((COLLECT_GROUPS, j), entropy, (), min_learner_steps=n, call=call, groups=ref)
                 for j, n in enumerate(chunks(steps, self.unit_steps or _clamp(steps / 8, 512, 16_384)))]
        results = self._run(units, tokens, progress, steps, "collect", unit_size=lambda r: r.steps)
        parts = [results[u.key].groups or {} for u in units]
        return {group: concat_trajectories([p[group] for p in parts]) for group in ref.learning}

    def close(self) -> None:
        """Stop the workers (Ray actors are killed). The pool cannot be used afterwards."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> RolloutPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def node_ids(self) -> list[str]:
        """Ray node id of each worker (``backend="ray"`` only)."""
        if self.backend_name != "ray":
            raise ValueError("node_ids() needs backend='ray'")
        return self._live_backend().node_ids()

    def __repr__(self) -> str:
        state = "closed" if self._backend is None else f"{self.num_workers} worker(s)"
        return f"RolloutPool({self.game.name!r}, backend={self.backend_name!r}, {state}, {self.envs_per_worker} envs each)"

    # -- internals ------------------------------------------------------------------
    def _live_backend(self) -> Any:
        if self._backend is None:
            raise RuntimeError("this RolloutPool is closed")
        return self._backend

    def _unit(self, episodes: int, items: int) -> int:
        """Episodes per unit for `items` jobs of `episodes` each (about 32 units in all)."""
        if self.unit_episodes is not None:
            return self.unit_episodes
        return _clamp(episodes / max(1, -(-32 // items)), 64, 4096)

    def _check_member(self, policy: Any, what: str) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"{what} must be a pbmarl Policy, got {type(policy).__name__}: {policy!r}")
        if policy.game_name != self.game.name or policy.num_actions != self.game.num_actions:
            raise ValueError(f"{what} {policy!r} was made for game {policy.game_name!r}, not {self.game.name!r}")

    def _seats(self, profile: Sequence[Any]) -> tuple[tuple[SeatRef, ...], dict[str, Policy]]:
        if isinstance(profile, (Policy, Mixture)) or not isinstance(profile, Sequence):
            raise TypeError(f"a profile is a list with one Policy or Mixture per seat, got {profile!r}")
        P = self.game.num_players
        if len(profile) != P:
            raise ValueError(f"a profile for {self.game.name!r} needs {P} entries (one per seat), got {len(profile)}")
        seats, policies = [], {}
        for p, entry in enumerate(profile):
            if isinstance(entry, Policy):
                members, weights = [entry], [1.0]
            elif isinstance(entry, Mixture):
                members, weights = list(entry.policies), [float(w) for w in entry.weights]
            else:
                raise TypeError(f"seat {p} must be played by a Policy or a Mixture, got {type(entry).__name__}: {entry!r}")
            for pi in members:
                self._check_member(pi, f"seat {p}'s policy")
                policies[self._token(pi)] = pi
            seats.append(SeatRef(tuple(self._token(pi) for pi in members), tuple(weights)))
        return tuple(seats), policies

    def _check_table(self, table: PayoffTable) -> Any:
        if not isinstance(table, PayoffTable):
            raise TypeError(f"fill needs a PayoffTable, got {type(table).__name__}")
        pop = table.population
        if pop is None:
            raise ValueError("fill needs a PayoffTable bound to a Population (PayoffTable(pop)), to find the policies")
        if pop.game.name != self.game.name:
            raise ValueError(f"the table's population plays {pop.game.name!r}, but this pool plays {self.game.name!r}")
        return pop

    def _begin(self, seed: int | np.random.Generator | None, policies: Any) -> tuple[int, int]:
        backend = self._live_backend()
        if seed is None:
            entropy = int(self._seeds.spawn(1)[0].generate_state(1, np.uint64)[0])
        elif isinstance(seed, np.random.Generator):
            entropy = int(seed.integers(2**63))
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
            entropy = int(seed)
        else:
            raise ValueError(f"seed must be a non-negative int, a numpy Generator or None, got {seed!r}")
        backend.prune(self._token.live())
        self._calls += 1
        return entropy, self._calls

    def _run(self, units: list[WorkUnit], policies: dict[str, Policy], progress: bool | None, total: int, what: str,
             *, stage_to: Callable[[UnitResult], None] | None = None,
             unit_size: Callable[[UnitResult], int] | None = None) -> dict[tuple[int, ...], UnitResult]:
        """Run units on the backend; every unit's result exactly once, keyed by unit key."""
        large = total >= (PROGRESS_STEPS if what == "collect" else PROGRESS_EPISODES)
        bar = _progress_bar(total, what, self.game.name) if (large if progress is None else progress) else None
        results: dict[tuple[int, ...], UnitResult] = {}

        def on_result(result: UnitResult) -> None:
            if result.key in results:
                raise RuntimeError(f"unit {result.key} finished twice; refusing to count it again")
            results[result.key] = result
            if stage_to is not None:
                stage_to(result)
            if bar is not None:
                bar.update(unit_size(result) if unit_size is not None else len(result.returns))

        try:
            self._live_backend().run(units, policies, on_result)
        finally:
            if bar is not None:
                bar.close()
        missing = [u.key for u in units if u.key not in results]
        if missing:
            raise RuntimeError(f"{len(missing)} work units never finished: {missing[:5]}")
        return results

    @staticmethod
    def _more(stage: Staging, cells: list[tuple[int, ...]], target: float, cap: int, episodes: int) -> dict[tuple[int, ...], int]:
        """Episodes to add per cell so its standard error should fall below `target`."""
        plan = {}
        for cell in cells:
            n, _, _ = stage.stats(cell)
            se = stage.max_stderr(cell)
            if n >= cap or (np.isfinite(se) and se < target):
                continue
            want = episodes if not np.isfinite(se) else int(np.ceil(n * (se / target) ** 2 * 1.1)) - n
            plan[cell] = int(min(max(want, min(episodes, 100)), cap - n))
        return plan


def _clamp(value: float, low: int, high: int) -> int:
    return int(min(max(int(np.ceil(value)), low), high))


def _progress_bar(total: int, what: str, game: str) -> Any:
    from tqdm.auto import tqdm

    unit = "steps" if what == "collect" else "episodes"
    return tqdm(total=total, desc=f"{what} {game}", unit=f" {unit}", leave=False)
