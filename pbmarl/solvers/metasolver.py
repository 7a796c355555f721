"""`MetaSolver`: a solver name and its options, applied to a payoff table.

The class is thin: it reads and checks the table, calls the pure function registered
under its name, scores the answer by meta-game NashConv and wraps it in a `MetaStrategy`.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from pbmarl.solvers.alpharank import alpharank_profiles
from pbmarl.solvers.correlated import correlated_result
from pbmarl.solvers.dynamics import solve_mmd, solve_prd, solve_rm
from pbmarl.solvers.inputs import DistributionsLike, check_distributions, read_table
from pbmarl.solvers.metastrategy import MetaStrategy
from pbmarl.solvers.nash import nash_equilibrium
from pbmarl.solvers.nashconv import deviation_function, regrets_from_values
from pbmarl.solvers.rectified import rectified_nash
from pbmarl.solvers.result import SolverResult
from pbmarl.solvers.simple import solve_last, solve_uniform


def _uniform(U: np.ndarray) -> SolverResult:
    return SolverResult(solve_uniform(U), "uniform", {})


def _last(U: np.ndarray) -> SolverResult:
    return SolverResult(solve_last(U), "last", {})


def _nash(U: np.ndarray, *, tol: float = 1e-6, zero_sum_tol: float = 1e-9, iterations: int = 10_000,
          max_pivots: int | None = None, max_labels: int | None = 10, gambit: bool | str = "auto",
          init: Sequence[np.ndarray] | None = None) -> SolverResult:
    return nash_equilibrium(U, tol=tol, zero_sum_tol=zero_sum_tol, iterations=iterations, max_pivots=max_pivots,
                            max_labels=max_labels, gambit=gambit, init=init)


def _prd(U: np.ndarray, *, iterations: int = 10_000, dt: float = 0.3, gamma: float = 1e-6, average_last: float = 1.0,
         projection: str = "exact") -> SolverResult:
    sigma = solve_prd(U, iterations=iterations, dt=dt, gamma=gamma, average_last=average_last, projection=projection)
    return SolverResult(sigma, "prd", {"iterations": iterations})


def _rm(U: np.ndarray, *, iterations: int = 10_000, plus: bool = False) -> SolverResult:
    return SolverResult(solve_rm(U, iterations=iterations, plus=plus), "rm+" if plus else "rm", {"iterations": iterations})


def _mmd(U: np.ndarray, *, iterations: int = 2_000, alpha: float = 0.05, stepsize: float = 1.0,
         magnet_every: int = 100) -> SolverResult:
    sigma = solve_mmd(U, iterations=iterations, alpha=alpha, stepsize=stepsize, magnet_every=magnet_every)
    return SolverResult(sigma, "mmd", {"iterations": iterations})


def _alpharank(U: np.ndarray, *, alpha: float = 100.0, m: int = 50, max_profiles: int = 2_500) -> SolverResult:
    pi = alpharank_profiles(U, alpha=alpha, m=m, max_profiles=max_profiles)
    k = pi.ndim
    marginals = tuple(pi.sum(axis=tuple(j for j in range(k) if j != p)) for p in range(k))
    pi.setflags(write=False)
    return SolverResult(marginals, "alpharank", {"profile_distribution": pi})


def _rectified_nash(U: np.ndarray, *, tol: float = 1e-6, zero_sum_tol: float = 1e-9, iterations: int = 10_000,
                    max_pivots: int | None = None, max_labels: int | None = 10, support_tol: float = 1e-9,
                    tie_tol: float = 1e-9) -> SolverResult:
    result, rect = rectified_nash(U, tol=tol, zero_sum_tol=zero_sum_tol, iterations=iterations, max_pivots=max_pivots,
                                  max_labels=max_labels, support_tol=support_tol, tie_tol=tie_tol)
    return SolverResult(result.distributions, result.method, {**result.info, "rectified": rect})


def _mgcce(U: np.ndarray, *, epsilon: float = 0.0) -> SolverResult:
    return correlated_result(U, kind="cce", objective="gini", epsilon=epsilon)


def _mgce(U: np.ndarray, *, epsilon: float = 0.0) -> SolverResult:
    return correlated_result(U, kind="ce", objective="gini", epsilon=epsilon)


def _mwcce(U: np.ndarray, *, epsilon: float = 0.0) -> SolverResult:
    return correlated_result(U, kind="cce", objective="welfare", epsilon=epsilon)


def _mwce(U: np.ndarray, *, epsilon: float = 0.0) -> SolverResult:
    return correlated_result(U, kind="ce", objective="welfare", epsilon=epsilon)


#: solver name -> function of a checked payoff array and keyword options
SOLVERS: Mapping[str, Callable[..., SolverResult]] = MappingProxyType({
    "uniform": _uniform,
    "last": _last,
    "nash": _nash,
    "prd": _prd,
    "rm": _rm,
    "mmd": _mmd,
    "alpharank": _alpharank,
    "rectified_nash": _rectified_nash,
    # correlated (joint) solvers; "ce"/"cce" are the maximum-welfare LPs
    "ce": _mwce,
    "cce": _mwcce,
    "mgce": _mgce,
    "mgcce": _mgcce,
    "mwce": _mwce,
    "mwcce": _mwcce,
})


#: the most iterations (or pivots) an iterative meta-solver may be asked for: beyond it a call runs for hours
MAX_ITERATIONS = 10**7


def _check_option(solver: str, key: str, value: Any, default: Any) -> None:
    """What every solver needs of an option, checked when the solver is made: the type of its default,
    finite numbers, at most `MAX_ITERATIONS` iterations. Each solver checks its own ranges when called."""
    where = f"meta-solver {solver!r} option {key}"
    if isinstance(default, bool):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{where} must be True or False, got {value!r}")
    elif isinstance(default, int):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{where} must be an int, got {value!r}")
        if value > MAX_ITERATIONS:
            raise ValueError(f"{where} must be an int in [1, {MAX_ITERATIONS:,}], got {value!r}")
    elif isinstance(default, float):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not np.isfinite(value):
            raise ValueError(f"{where} must be a finite number, got {value!r}")


class MetaSolver:
    """A meta-solver by name: ``MetaSolver("nash")(table) -> MetaStrategy``.

    `table` is a `PayoffTable` (anything with ``.values`` and ``.ids``), an array of shape
    ``(n_1, ..., n_k, k)``, or one 2-D matrix of row payoffs for a zero-sum game. Tables
    with missing (NaN) cells are refused, naming the cells; nothing is changed.

    Names: ``"uniform"`` (fictitious play), ``"last"`` (self-play), ``"nash"``, ``"prd"``
    (projected replicator dynamics), ``"rm"`` (regret matching), ``"mmd"`` (magnetic mirror descent's
    last iterate, the magnet moved every 100 steps: `pbmarl.solvers.dynamics.solve_mmd`), ``"alpharank"``,
    ``"rectified_nash"``; correlated solvers (`pbmarl.solvers.correlated`): ``"mgcce"``,
    ``"mgce"`` (maximum Gini, unique), ``"mwcce"``, ``"mwce"`` (maximum welfare), ``"cce"`` and
    ``"ce"`` (the maximum-welfare ones); their `MetaStrategy` has ``.joint`` over profiles and
    per-player marginals. Options are the keyword arguments of the matching pure function;
    `MetaSolver.defaults(name)` lists them.

    Example:
        >>> sigma = MetaSolver("nash")([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
        >>> np.round(sigma[0], 6).tolist(), sigma.method
        ([0.333333, 0.333333, 0.333333], 'lp')
    """

    names: ClassVar[tuple[str, ...]] = tuple(SOLVERS)

    def __init__(self, name: str, **options: Any) -> None:
        if name not in SOLVERS:
            close = difflib.get_close_matches(str(name), self.names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown meta-solver {name!r}{hint} (valid names: {', '.join(self.names)})")
        accepted = self.defaults(name)
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise TypeError(
                f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for meta-solver "
                f"{name!r}; accepted: {', '.join(accepted) if accepted else 'none'}"
            )
        for key, value in options.items():
            _check_option(name, key, value, accepted[key])
        self.name = name
        self.options: Mapping[str, Any] = MappingProxyType(dict(options))

    @staticmethod
    def defaults(name: str) -> dict[str, Any]:
        """The options solver `name` accepts, with their default values."""
        if name not in SOLVERS:
            raise ValueError(f"unknown meta-solver {name!r} (valid names: {', '.join(SOLVERS)})")
        params = inspect.signature(SOLVERS[name]).parameters.values()
        return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}

    def __call__(self, table: Any) -> MetaStrategy:
        """Solve the meta-game `table` and return one distribution per player."""
        U, ids = read_table(table)
        result = SOLVERS[self.name](U, **self.options, **self._warm_start(U, ids))
        self._previous = (ids, result.distributions)
        info = dict(result.info)
        rectified = info.pop("rectified", None)
        joint = info.pop("joint", None)
        regrets = _regrets(U, result.distributions)
        return MetaStrategy(
            result.distributions,
            solver=self.name,
            ids=ids,
            nash_conv=float(regrets.sum()),
            regrets=tuple(regrets),
            method=result.method,
            info={**info, "options": dict(self.options)},
            rectified=rectified,
            joint=joint,
        )

    def prime(self, table: Any, sigma: DistributionsLike) -> None:
        """Take `sigma` as the previous answer on `table`, as if this solver had produced it.

        A resumed run calls this with its saved meta-strategy, so that re-solving the saved
        table warm-starts from the answer the run had (for "nash" on 3+ players, whose
        answer depends on the warm start when the meta-game has several equilibria).
        """
        U, ids = read_table(table)
        self._previous = (ids, tuple(np.asarray(s, dtype=float) for s in check_distributions(sigma, U.shape[:-1])))

    def _warm_start(self, U: np.ndarray, ids: Any) -> dict[str, Any]:
        """For "nash" on 3+ players: the previous answer, zero-padded, when this table extends the last one
        (PSRO adds members at the end); it only seeds the search, whose answer is checked."""
        previous = getattr(self, "_previous", None)
        if self.name != "nash" or U.shape[-1] < 3 or previous is None or "init" in self.options:
            return {}
        old_ids, old_sigma = previous
        if len(old_ids) != len(ids) or any(tuple(o) != tuple(n)[:len(o)] for o, n in zip(old_ids, ids)):
            return {}
        return {"init": [np.concatenate([s, np.zeros(len(n) - len(s))]) for s, n in zip(old_sigma, ids)]}

    def nash_conv(self, table: Any, sigma: DistributionsLike) -> float:
        """Meta-game NashConv of `sigma` in `table` (same reading and checks as a call)."""
        U, _ = read_table(table)
        return float(_regrets(U, check_distributions(sigma, U.shape[:-1])).sum())

    def __repr__(self) -> str:
        options = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"MetaSolver({self.name!r}{options})"


def _regrets(U: np.ndarray, sigma: Sequence[np.ndarray]) -> np.ndarray:
    return regrets_from_values(deviation_function(U)(sigma), sigma)
