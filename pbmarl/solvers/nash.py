"""Nash equilibria of meta-games: LP, Lemke-Howson or dynamics, by the shape of the game.

- two players, constant-sum (zero-sum included): linear programming, exact;
- two players, general-sum: Lemke-Howson from dropped labels 0, 1, ... in turn (up to
  ``max_labels``), each answer checked; if every label fails, a long dynamics search is
  accepted only if it passes the same check (and says so in its method), otherwise
  `SolverError`;
- three or more players: `nplayer_nash`: a pure-equilibrium check, the warm start polished
  by Newton's method, the logit path (on a sub-table grown from the warm start's support
  when there is one); then, where pygambit is installed, its ``ipa`` and ``logit`` solvers
  (also polished); then the dynamics (`iterative_nash`). The result's method names what
  produced the profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from pbmarl.solvers.bimatrix import LemkeHowsonFailure, PivotLimitReached, lemke_howson
from pbmarl.solvers.gambit import gambit_available, gambit_game, gambit_nash
from pbmarl.solvers.inputs import DistributionsLike, as_payoff_array, check_distributions, payoff_scale
from pbmarl.solvers.logit_path import logit_path_nash
from pbmarl.solvers.nashconv import deviation_function, regrets_from_values
from pbmarl.solvers.nplayer import iterative_nash, newton_polish, pure_equilibria
from pbmarl.solvers.result import SolverError, SolverResult
from pbmarl.solvers.subgame import subgame_nash
from pbmarl.solvers.zerosum import is_constant_sum, solve_zero_sum, zero_sum_matrix

if TYPE_CHECKING:
    from typing_extensions import Unpack


class NashOptions(TypedDict, total=False):
    """The search options of `nash_equilibrium` that `solve_nash` and `rectified_nash` pass on to it
    (meanings and defaults: `nash_equilibrium`'s Args)."""

    tol: float
    zero_sum_tol: float
    iterations: int
    max_pivots: int | None
    max_labels: int | None


def solve_nash(U: ArrayLike, **options: Unpack[NashOptions]) -> tuple[np.ndarray, ...]:
    """One Nash distribution per player; `nash_equilibrium` (same options) also says how it was found.

    Example:
        >>> x, y = solve_nash([[1, -1], [-1, 1]])   # matching pennies
        >>> np.round(x, 6).tolist(), np.round(y, 6).tolist()
        ([0.5, 0.5], [0.5, 0.5])
    """
    return nash_equilibrium(U, **options).distributions


def nash_equilibrium(
    U: ArrayLike,
    *,
    tol: float = 1e-6,
    zero_sum_tol: float = 1e-9,
    iterations: int = 10_000,
    max_pivots: int | None = None,
    max_labels: int | None = 10,
    init: DistributionsLike | None = None,
    gambit: bool | str = "auto",
) -> SolverResult:
    """A Nash equilibrium of the meta-game `U` (shape ``(n_1, ..., n_k, k)``), with how it was found.

    Args:
        U: payoff array ``(n_1, ..., n_k, k)`` or a 2-D zero-sum matrix (see
            `inputs.as_payoff_array` for what is accepted and refused).
        tol: a two-player general-sum answer is accepted when every player's regret is at
            most ``tol`` x payoff range; for k >= 3 players it is the early-stopping target.
        zero_sum_tol: payoff sums within ``zero_sum_tol`` x payoff range of a constant make
            a two-player game constant-sum (solved by LP).
        iterations: steps per dynamic for k >= 3 players and for the two-player fallback.
        max_pivots: Lemke-Howson pivot cap per label; by default every label first gets
            ``10 * (m + n)`` pivots, and the labels cut off then get ``100 * (m + n)``.
        max_labels: try at most this many dropped labels, ``0, 1, ...`` (None: all
            ``m + n``). Label 0 almost always succeeds; when it does not, the paths tend
            to be long, so trying hundreds of labels would cost minutes.
        init: for k >= 3, a warm start (e.g. the previous meta-strategy, zero-padded).
        gambit: for k >= 3, whether to use pygambit (``"auto"``: where installed).

    Returns:
        `SolverResult` with method ``"lp"``, ``"lemke_howson"``, ``"<dynamic>-fallback"`` or,
        for k >= 3, the stage of `nplayer_nash` that produced the profile.

    Raises:
        SolverError: a two-player general-sum game where no label and no fallback passed the
            check (the shape and the best NashConv reached are named).

    Example:
        >>> rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
        >>> res = nash_equilibrium(rps)
        >>> res.method, np.round(res.distributions[0], 6).tolist()
        ('lp', [0.333333, 0.333333, 0.333333])
    """
    if tol <= 0:
        raise ValueError(f"tol must be positive, got {tol}")
    U = as_payoff_array(U)
    k = U.shape[-1]
    if k >= 3:
        return nplayer_nash(U, tol=tol, iterations=iterations, init=init, gambit=gambit)
    if is_constant_sum(U, tol=zero_sum_tol):
        x, y, value = solve_zero_sum(zero_sum_matrix(U))
        return SolverResult((x, y), "lp", {"value": value + 0.5 * float(U.sum(axis=-1).mean())})
    return bimatrix_nash(U[..., 0], U[..., 1], tol=tol, iterations=iterations, max_pivots=max_pivots,
                         max_labels=max_labels)


def bimatrix_nash(
    A: np.ndarray,
    B: np.ndarray,
    *,
    tol: float = 1e-6,
    iterations: int = 10_000,
    max_pivots: int | None = None,
    max_labels: int | None = 10,
) -> SolverResult:
    """A checked equilibrium of the bimatrix game (A, B) by Lemke-Howson, label after label.

    Each label's answer is accepted only if both players' regrets are at most ``tol`` x
    payoff range. See `nash_equilibrium` for the fallback and the error.
    """
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    U = np.stack([A, B], axis=-1)
    threshold = tol * payoff_scale(U)
    deviations = deviation_function(U)
    m, n = A.shape
    labels = m + n if max_labels is None else min(m + n, int(max_labels))
    if labels < 1:
        raise ValueError(f"max_labels must be a positive integer or None, got {max_labels!r}")
    # Path lengths are heavy-tailed and differ a lot between labels, so every label first
    # gets a short budget and only the ones cut off get a long one.
    caps = [int(max_pivots)] if max_pivots is not None else [10 * (m + n), 100 * (m + n)]
    best = np.inf
    failures: list[str] = []
    pending = list(range(labels))
    attempts = 0
    for cap in caps:
        cut_off = []
        for label in pending:
            attempts += 1
            try:
                x, y = lemke_howson(A, B, initial_dropped_label=label, max_pivots=cap)
            except PivotLimitReached as exc:
                cut_off.append(label)
                failures.append(f"label {label}: {exc}")
                continue
            except LemkeHowsonFailure as exc:
                failures.append(f"label {label}: {exc}")
                continue
            regrets = regrets_from_values(deviations((x, y)), (x, y))
            best = min(best, float(regrets.sum()))
            if regrets.max() <= threshold:
                return SolverResult((x, y), "lemke_howson", {"label": label, "attempts": attempts, "max_pivots": cap})
            failures.append(f"label {label}: regrets {regrets.tolist()}")
        pending = cut_off
    fallback = iterative_nash(U, iterations=iterations, tol=tol, polish=False)
    sigma = fallback.distributions
    regrets = regrets_from_values(deviations(sigma), sigma)
    if regrets.max() <= threshold:
        info = {"attempts": attempts, "lemke_howson_failures": failures, **fallback.info}
        return SolverResult(sigma, f"{fallback.method}-fallback", info)
    best = min(best, float(regrets.sum()))
    raise SolverError(
        f"no Nash equilibrium found for a {m}x{n} general-sum game (payoffs of shape {U.shape}): "
        f"Lemke-Howson failed the check from {labels} of {m + n} labels (max_labels={max_labels}) and the "
        f"dynamics fallback too; "
        f"best NashConv reached {best:.3g} against a tolerance of {threshold:.3g} "
        f"(tol={tol} x payoff range). First failures: {failures[:3]}"
    )


#: pygambit methods tried, in order, where the own logit path falls short. Measured on a random
#: 10^4-cell 4-player table (benchmarks/exact_scale.py): the own path 0.09 s at NashConv 2e-16,
#: ``ipa`` 1.3 s with its game build at 3e-7, ``logit`` 10-40 s; ``gnm`` failed or ran for minutes
GAMBIT_ORDER = ("ipa", "logit")
#: pygambit is not asked for larger tables: building its game alone costs about 60 us a cell
GAMBIT_MAX_CELLS = 200_000
#: most logit-path steps before the own search gives way to pygambit or the dynamics
PATH_STEPS = 3_000
#: table cells x steps the last-resort dynamics may spend (10^4 steps up to 2 x 10^4 cells, then fewer)
DYNAMICS_BUDGET = 2 * 10**8


def nplayer_nash(
    U: ArrayLike,
    *,
    tol: float = 1e-6,
    iterations: int = 10_000,
    init: DistributionsLike | None = None,
    gambit: bool | str = "auto",
) -> SolverResult:
    """A Nash equilibrium of a game with any number of players, by the best solver available.

    In order, stopping at the first profile whose NashConv is at most ``tol`` x payoff range:

    1. a pure equilibrium (the one of highest total payoff), found for the whole table at once;
    2. the warm start `init`, polished by Newton's method on its support (PSRO's new members
       often leave the previous equilibrium one);
    3. the logit path (`logit_path_nash`): on the whole table, or with a warm start on a
       sub-table grown from its support (`subgame_nash`);
    4. pygambit's ``ipa`` then ``logit`` (each polished), where installed;
    5. projected replicator dynamics, RM+ and fictitious play (`iterative_nash`), at most
       ``DYNAMICS_BUDGET / cells`` steps each on large tables.

    Args:
        U: payoff array ``(n_1, ..., n_k, k)``.
        tol: accept a profile whose NashConv is at most ``tol`` x payoff range.
        iterations: steps per dynamic in the last stage.
        init: warm start (PSRO's previous meta-strategy, zero-padded to the new sizes).
        gambit: ``"auto"`` uses pygambit where installed; True requires it; False never imports it.

    Returns:
        `SolverResult`; its method names what produced the profile (``"pure"``,
        ``"warm-start+newton"``, ``"logit-path+newton"``, ``"subgame-logit-path"`` (the path's own
        point, without polishing), ``"subgame-logit-path+newton"``,
        ``"gambit-ipa+newton"``, ``"rm-iterate+newton"``, ...) and its info holds ``nash_conv``,
        ``converged`` and ``tol``.
    """
    U = as_payoff_array(U)
    if gambit not in (True, False, "auto"):
        raise ValueError(f"gambit must be True, False or 'auto', got {gambit!r}")
    if gambit is True and not gambit_available():
        raise ImportError('gambit=True needs pygambit: pip install "pbmarl[gambit]" (GPL-2.0-or-later)')
    use_gambit = gambit is True or (gambit == "auto" and gambit_available() and U[..., 0].size <= GAMBIT_MAX_CELLS)
    target = tol * payoff_scale(U)
    start = None if init is None else tuple(np.asarray(s, dtype=float) for s in check_distributions(init, U.shape[:-1]))
    best = _Best(U, tol)
    pure = pure_equilibria(U)
    if len(pure):
        cell = pure[int(np.argmax(U[tuple(pure.T)].sum(axis=-1)))]
        best.offer(tuple(np.eye(n)[i] for n, i in zip(U.shape[:-1], cell)), "pure")
    if start is not None and not best.done:
        best.offer(start, "warm-start")
        polished = newton_polish(U, start)
        if polished is not None:
            best.offer(polished, "warm-start+newton")
    if not best.done:
        if start is None:
            sigma, _, path = logit_path_nash(U, target=target, max_steps=PATH_STEPS)
            best.offer(sigma, "logit-path+newton" if path["polished"] else "logit-path", path_steps=path["steps"])
        else:
            sigma, _, sub = subgame_nash(U, target=target, init=start, max_steps=PATH_STEPS)
            name = ("subgame-" if sub["restricted"] else "") + "logit-path" + ("+newton" if sub["polished"] else "")
            best.offer(sigma, name, **sub)
    if use_gambit and not best.done:
        game = gambit_game(U)
        for method in GAMBIT_ORDER:
            try:
                res = gambit_nash(U, method=method, game=game)
            except SolverError:
                continue
            best.offer(res.distributions, res.method, **res.info)
            polished = newton_polish(U, res.distributions)
            if polished is not None:
                best.offer(polished, res.method + "+newton", **res.info)
            if best.done:
                break
    if not best.done:  # the dynamics cost a contraction of the whole table a step: bounded on large tables
        steps = min(iterations, max(100, DYNAMICS_BUDGET // max(1, U[..., 0].size)))
        full = iterative_nash(U, iterations=steps, tol=tol, init=start)
        best.offer(full.distributions, full.method, steps=full.info["steps"])
    return best.result()


class _Best:
    """The profile of lowest NashConv offered so far, with what produced it."""

    def __init__(self, U: np.ndarray, tol: float) -> None:
        self.U, self.tol = U, tol
        self.target = tol * payoff_scale(U)
        self.deviations = deviation_function(U)
        self.score = np.inf
        self.sigma: tuple[np.ndarray, ...] = tuple(np.full(n, 1.0 / n) for n in U.shape[:-1])
        self.method = "uniform"
        self.info: dict[str, Any] = {}

    @property
    def done(self) -> bool:
        return self.score <= self.target

    def offer(self, sigma: Sequence[np.ndarray], method: str, **info: Any) -> None:
        sigma = tuple(np.asarray(s, dtype=float) for s in sigma)
        score = float(regrets_from_values(self.deviations(sigma), sigma).sum())
        if score < self.score:
            self.score, self.sigma, self.method, self.info = score, sigma, method, dict(info)

    def result(self) -> SolverResult:
        info = {**self.info, "nash_conv": self.score, "converged": self.done, "tol": self.tol}
        return SolverResult(self.sigma, self.method, info)
