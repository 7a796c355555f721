"""Nash equilibria of meta-games: LP, Lemke-Howson or dynamics, by the shape of the game.

- two players, constant-sum (zero-sum included): linear programming, exact;
- two players, general-sum: Lemke-Howson from dropped labels 0, 1, ... in turn (up to
  ``max_labels``), each answer checked; if every label fails, a long dynamics search is
  accepted only if it passes the same check (and says so in its method), otherwise
  `SolverError`;
- three or more players: `nplayer_nash`: a pure-equilibrium check, the warm start and a
  short regret-matching+ run polished by Newton's method (`iterative_nash`); then, where
  pygambit is installed, its ``ipa`` solver (also polished); then the full
  dynamics. The result's method names what produced the profile.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pbmarl.solvers.bimatrix import LemkeHowsonFailure, PivotLimitReached, lemke_howson
from pbmarl.solvers.gambit import gambit_available, gambit_game, gambit_nash
from pbmarl.solvers.inputs import DistributionsLike, as_payoff_array, payoff_scale
from pbmarl.solvers.nashconv import deviation_function, regrets_from_values
from pbmarl.solvers.nplayer import iterative_nash, newton_polish
from pbmarl.solvers.result import SolverError, SolverResult
from pbmarl.solvers.zerosum import is_constant_sum, solve_zero_sum, zero_sum_matrix


def solve_nash(
    U: ArrayLike,
    *,
    tol: float = 1e-6,
    zero_sum_tol: float = 1e-9,
    iterations: int = 10_000,
    max_pivots: int | None = None,
    max_labels: int | None = 10,
) -> tuple[np.ndarray, ...]:
    """One Nash distribution per player; `nash_equilibrium` also says how it was found.

    Example:
        >>> x, y = solve_nash([[1, -1], [-1, 1]])   # matching pennies
        >>> np.round(x, 6).tolist(), np.round(y, 6).tolist()
        ([0.5, 0.5], [0.5, 0.5])
    """
    return nash_equilibrium(U, tol=tol, zero_sum_tol=zero_sum_tol, iterations=iterations, max_pivots=max_pivots,
                            max_labels=max_labels).distributions


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
        for k >= 3, the winning dynamic of `iterative_nash`.

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


#: steps of regret matching+ (with Newton polishing) tried before pygambit is asked: on PSRO tables
#: they usually finish first, and building a pygambit game alone costs about 60 us a cell
QUICK_STEPS = 1000
#: pygambit methods tried, in order (``logit`` and ``gnm`` took 10-40 s on 10^4-cell 4-player tables
#: where ``ipa`` took about 1 s: benchmarks/exact_scale.py)
GAMBIT_ORDER = ("ipa",)
#: pygambit is not asked for larger tables: building its game alone costs about 60 us a cell
GAMBIT_MAX_CELLS = 200_000


def nplayer_nash(
    U: ArrayLike,
    *,
    tol: float = 1e-6,
    iterations: int = 10_000,
    init: DistributionsLike | None = None,
    gambit: bool | str = "auto",
) -> SolverResult:
    """A Nash equilibrium of a game with any number of players, by the best solver available.

    Args:
        U: payoff array ``(n_1, ..., n_k, k)``.
        tol: accept a profile whose NashConv is at most ``tol`` x payoff range.
        iterations: steps per dynamic in the last, own, stage.
        init: warm start (PSRO's previous meta-strategy, zero-padded to the new sizes).
        gambit: ``"auto"`` uses pygambit where installed; True requires it; False never imports it.

    Returns:
        `SolverResult`; its method names what produced the profile (``"pure"``,
        ``"warm-start+newton"``, ``"rm-iterate+newton"``, ``"gambit-ipa+newton"``,
        ``"gambit-logit"``, ...) and its info holds ``nash_conv`` and ``converged``.
    """
    U = as_payoff_array(U)
    if gambit not in (True, False, "auto"):
        raise ValueError(f"gambit must be True, False or 'auto', got {gambit!r}")
    use_gambit = gambit is True or (gambit == "auto" and gambit_available() and U[..., 0].size <= GAMBIT_MAX_CELLS)
    if gambit is True and not gambit_available():
        raise ImportError('gambit=True needs pygambit: pip install "pbmarl[gambit]" (GPL-2.0-or-later)')
    quick = iterative_nash(U, iterations=min(iterations, QUICK_STEPS), tol=tol, init=init, dynamics=("rm",))
    if quick.info["converged"]:
        return quick
    target = tol * payoff_scale(U)
    best = quick
    if use_gambit:
        deviations = deviation_function(U)
        game = gambit_game(U)
        for method in GAMBIT_ORDER:
            try:
                res = gambit_nash(U, method=method, game=game)
            except SolverError:
                continue
            candidates = [(res.distributions, res.method)]
            polished = newton_polish(U, res.distributions)
            if polished is not None:
                candidates.append((polished, res.method + "+newton"))
            for sigma, name in candidates:
                score = float(regrets_from_values(deviations(sigma), sigma).sum())
                if score < best.info["nash_conv"]:
                    best = SolverResult(sigma, name, {**res.info, "nash_conv": score, "converged": score <= target,
                                                      "tol": tol})
            if best.info["converged"]:
                return best
    full = iterative_nash(U, iterations=iterations, tol=tol, init=init)
    return full if full.info["nash_conv"] <= best.info["nash_conv"] else best
