"""`MMD`: tabular magnetic mirror descent as a run, on the exact engine (Sokota et al., ICLR 2023).

Each step is one simultaneous MMD update of both players' realisation plans with dilated
entropy (`pbmarl.evaluation.mmd.DilatedMMD`), computed over the game tree's flat arrays, and
then the exact NashConv and exploitability of the **last iterate** (MMD's point: the last
iterate, not an average, converges, to the alpha-QRE). ``alpha`` and ``stepsize`` mean what
they mean in OpenSpiel's ``MMDDilatedEnt``, including its automatic ``stepsize=None``
(``alpha / max|M|^2``), so the two agree call for call (tests/test_mmd.py checks it to 1e-9).

The magnet is the dilated entropy itself by default (OpenSpiel's regulariser, whose minimiser
is the uniform policy), or a policy per player given as the `magnet` part; with
``magnet_every=k`` it moves to the current iterate every k steps (the paper's moving magnet,
which turns the QRE into a Nash equilibrium in the limit).

Example:
    >>> run = MMD("kuhn_poker", alpha=0.1)                 # iteration 0: the uniform policy
    >>> records = run.run(50, progress=False)
    >>> records[-1].gap < 1e-4                            # the regularised game's gap
    True
    >>> run.history[["exploitability", "gap"]].tail(1)    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np

from pbmarl.config import NON_NEGATIVE, Config, build_config, check_seed, is_int, is_real
from pbmarl.evaluation.mmd import DilatedMMD, auto_stepsize
from pbmarl.evaluation.realization import policy_tables
from pbmarl.evaluation.sequence_form import check_zero_sum_tree
from pbmarl.games.base import Game
from pbmarl.games.registry import game_spec, load_game
from pbmarl.policies.base import Policy
from pbmarl.policies.tabular import TabularPolicy
from pbmarl.rollout.results import EvalResult
from pbmarl.runs import Record, Run, RunFolderError, SavedRun, State, shared_row
from pbmarl.runs.transaction import all_or_nothing

_OPTIONAL_POSITIVE = (lambda v: v is None or (is_real(v) and v > 0), "None or a positive number")
_OPTIONAL_COUNT = (lambda v: v is None or (is_int(v) and v >= 1), "None or a positive int")


@dataclass(frozen=True)
class MMDConfig(Config):
    """Tabular MMD's options (a given magnet is the `magnet` argument)."""

    alpha: float = 0.05
    """The temperature: weight of the magnet term (OpenSpiel's ``alpha``). 0 is mirror descent."""
    stepsize: float | None = None
    """The step size eta; None: OpenSpiel's automatic ``alpha / max|M|^2`` (M the sequence-form payoffs)."""
    magnet_every: int | None = None
    """Move the magnet to the current iterate every this many steps (None: it never moves)."""
    stop_exploitability: float | None = None
    """`run()` stops once the last iterate's exploitability is at or below this."""
    max_iterations: int | None = None
    """`run()` never goes past this iteration."""

    checks: ClassVar[dict[str, Any]] = {
        "alpha": NON_NEGATIVE,
        "stepsize": _OPTIONAL_POSITIVE,
        "magnet_every": _OPTIONAL_COUNT,
        "stop_exploitability": (lambda v: v is None or (is_real(v) and v >= 0), "None or a non-negative number"),
        "max_iterations": (lambda v: v is None or (is_int(v) and v >= 0), "None or a non-negative int"),
    }


@dataclass(frozen=True)
class MMDRecord(Record):
    """One MMD step.

    Attributes:
        iteration: 0 for the starting (uniform) policy, then 1, 2, ...
        nash_conv, exploitability: of the last iterate in the game itself (exact; exploitability = NashConv / 2).
        gap: the saddle-point gap of the regularised game (OpenSpiel's ``get_gap``; NaN when alpha is 0).
        stepsize: the step size used.
        times: wall seconds per phase (update, measure); wall_time: cumulative.
    """

    iteration: int
    nash_conv: float
    exploitability: float
    gap: float
    stepsize: float
    times: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0

    def as_row(self) -> dict[str, Any]:
        return shared_row(iteration=self.iteration, env_steps=0, episodes=0, wall_time=self.wall_time,
                          exploitability=self.exploitability, nash_conv=self.nash_conv, times=self.times,
                          extra={"gap": self.gap, "stepsize": self.stepsize})

    @property
    def env_steps(self) -> int:
        return 0

    @property
    def episodes(self) -> int:
        return 0

    def __str__(self) -> str:
        return (f"iter {self.iteration:>4} | exploitability {self.exploitability:.6g} | gap {self.gap:.4g} | "
                f"{sum(self.times.values()):.4f}s")


class MMD(Run):
    """Tabular magnetic mirror descent on the exact engine; see the module doc.

    Args:
        game: a two-player zero-sum `Game` (or its name) whose tree fits in memory.
        magnet: None (the dilated entropy, as OpenSpiel) or one `Policy` per player, positive on legal actions.
        seed: the run's seed (MMD draws nothing at random).
        config: an `MMDConfig`; keyword options (its fields) replace its values.
    """

    history_columns: ClassVar[tuple[str, ...]] = ("exploitability", "nash_conv", "gap", "stepsize")
    config: MMDConfig
    records: list[MMDRecord]
    _magnet: list[np.ndarray] | None

    def __init__(self, game: Game | str, magnet: Sequence[Policy] | None = None, *, seed: int = 0,
                 config: MMDConfig | None = None, **options: Any) -> None:
        self._configure(game, build_config(MMDConfig, config, options, owner="MMD"), check_seed(seed))
        if magnet is not None:
            if isinstance(magnet, Policy) or len(magnet) != 2:
                raise TypeError("MMD's magnet must be one Policy per player (a sequence of 2), or None")
            self._magnet = [policy_tables(pi, self.tree, p) for p, pi in enumerate(magnet)]
            self.solver.set_magnet(self._magnet)
        self.records.append(self._measure(0, {}))

    def _configure(self, game: Game | str, config: MMDConfig, seed: int) -> None:
        self.game = load_game(game) if isinstance(game, str) else game
        if not isinstance(self.game, Game):
            raise TypeError(f"MMD needs a pbmarl Game or a game name, got {type(game).__name__}: {game!r}")
        self.tree = self.game.tree()
        check_zero_sum_tree(self.game, self.tree, who="MMD")
        self.config, self.seed = config, seed
        self.solver = DilatedMMD(self.tree, alpha=config.alpha, stepsize=config.stepsize)
        self._magnet = None
        self.records = []
        self._wall = 0.0

    # -- the loop ------------------------------------------------------------------
    def snapshot(self) -> object:
        """Everything a `step` changes, for `restore` (see `pbmarl.runs.transaction`)."""
        return (list(self.solver.plans), self.solver.iterations, self._magnet, len(self.records), self._wall)

    def restore(self, state: object) -> None:
        """Put the run back as `snapshot()` found it."""
        plans, iterations, magnet, n_records, wall = cast(
            "tuple[list[np.ndarray], int, list[np.ndarray] | None, int, float]", state)
        self.solver.plans, self.solver.iterations, self._wall = list(plans), iterations, wall
        self._magnet = magnet
        self.solver.set_magnet(magnet)
        del self.records[n_records:]

    @all_or_nothing
    def step(self) -> MMDRecord:
        """One MMD update of both players; returns its record (all or nothing)."""
        start = time.perf_counter()
        self.solver.step()
        every = self.config.magnet_every
        if every is not None and self.solver.iterations % every == 0:
            tables = self.solver.tables()
            for p, (table, infos) in enumerate(zip(tables, self.tree.infosets)):
                if np.any(table[infos.legal] <= 0):
                    raise FloatingPointError(
                        f"MMD's iterate {self.solver.iterations} puts probability 0 on a legal action of player {p} "
                        f"(the update underflowed: stepsize={self.solver.stepsize:g} is too large for "
                        f"alpha={self.solver.alpha:g} on {self.game.name}), so the magnet cannot move to it. "
                        f"Use a smaller stepsize; stepsize=None picks alpha / max|payoff|^2 = "
                        f"{auto_stepsize(self.tree, self.solver.alpha):g}. The run is as it was before this step")
            self._magnet = tables
            self.solver.set_magnet(self._magnet)
        record = self._measure(self.solver.iterations, {"update": time.perf_counter() - start})
        self.records.append(record)
        return record

    def _measure(self, iteration: int, times: dict[str, float]) -> MMDRecord:
        start = time.perf_counter()
        nc = self.solver.nash_conv()
        gap = self.solver.gap() if self.solver.alpha > 0 else float("nan")
        times = {**times, "measure": time.perf_counter() - start}
        self._wall += sum(times.values())
        return MMDRecord(iteration=iteration, nash_conv=nc, exploitability=nc / 2, gap=gap,
                         stepsize=self.solver.stepsize, times=times, wall_time=self._wall)

    @property
    def done(self) -> bool:
        """At ``stop_exploitability`` or ``max_iterations``: where `run()` stops."""
        cfg = self._budgeted(self.config, "stop_exploitability")
        stop = cfg.stop_exploitability
        return ((stop is not None and self.records[-1].exploitability <= stop)
                or (cfg.max_iterations is not None and self.iteration >= cfg.max_iterations))

    def evaluate(self, episodes: int = 100, *, seed: int = 0, deterministic: bool = False) -> EvalResult:
        """Play `episodes` episodes of the last iterate (`policies`) with a local `RolloutPool`;
        ``deterministic=True`` plays each information state's most probable action."""
        from pbmarl.rollout import RolloutPool

        tables = self.solver.tables()
        if deterministic:
            tables = [np.eye(self.tree.num_actions)[np.where(i.legal, t, -1.0).argmax(axis=1)]
                      for t, i in zip(tables, self.tree.infosets)]
        with RolloutPool(self.game, backend="local", seed=seed) as pool:
            return pool.evaluate([self._policy(p, t) for p, t in enumerate(tables)], episodes, seed=seed)

    @property
    def policies(self) -> tuple[TabularPolicy, ...]:
        """The last iterate as one `TabularPolicy` per player."""
        return tuple(self._policy(p, t) for p, t in enumerate(self.solver.tables()))

    def _policy(self, player: int, table: np.ndarray) -> TabularPolicy:
        policy = TabularPolicy(self.game)
        policy.table[[policy.index[k] for k in self.tree.infosets[player].keys]] = table
        return policy

    def __repr__(self) -> str:
        tail = f", exploitability={self.records[-1].exploitability:.4g}" if self.records else ""
        return f"MMD({self.game.name!r}, alpha={self.config.alpha:g}, iteration={self.iteration}{tail})"

    # -- files ------------------------------------------------------------------------
    def state(self) -> State:
        """The last iterate's plans, the magnet (when one is given or has moved), counters and records."""
        arrays = {f"plan_{p}": x for p, x in enumerate(self.solver.plans)}
        if self._magnet is not None:
            arrays.update({f"magnet_{p}": t for p, t in enumerate(self._magnet)})
        data = {"iterations": self.solver.iterations, "wall_time": self._wall, "magnet": self._magnet is not None,
                "records": [dataclasses.asdict(r) for r in self.records]}
        return State(data=data, arrays=arrays, config=self.config.to_dict(), seed=self.seed, game=game_spec(self.game))

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides: Any) -> MMD:
        """Rebuild a run `state` wrote; `overrides` replace options (``max_iterations=``, ...)."""
        run = cls.__new__(cls)
        run._configure(saved.game(), build_config(MMDConfig, None, {**saved.config, **overrides}, owner="MMD"),
                       check_seed(saved.seed))
        data = saved.data
        try:
            spec: dict[str, tuple[tuple[int, ...], str]] = {
                f"plan_{p}": ((run.tree.num_sequences(p),), "f") for p in range(2)}
            if data["magnet"]:
                spec.update({f"magnet_{p}": ((i.size, run.tree.num_actions), "f")
                             for p, i in enumerate(run.tree.infosets)})
            arrays = saved.arrays(spec)
            run.solver.plans = [arrays[f"plan_{p}"] for p in range(2)]
            run.solver.iterations, run._wall = int(data["iterations"]), float(data["wall_time"])
            if data["magnet"]:
                run._magnet = [arrays[f"magnet_{p}"] for p in range(2)]
                run.solver.set_magnet(run._magnet)
            run.records = [MMDRecord(**{**r, "times": dict(r["times"])}) for r in data["records"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{str(saved.state_dir)!r}: malformed MMD state ({type(exc).__name__}: {exc})") \
                from None
        return run
