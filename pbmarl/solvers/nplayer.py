"""Approximate Nash equilibria of any game by running dynamics and keeping the best profile.

There is no efficient exact method for three or more players (nor a guarantee that these
dynamics converge), so `iterative_nash` is honest about it: it returns the profile with
the lowest meta-game NashConv it saw and reports that NashConv.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from pbmarl.solvers.dynamics import Profile, fictitious_play, projected_replicator_dynamics, regret_matching
from pbmarl.solvers.inputs import as_payoff_array, payoff_scale
from pbmarl.solvers.nashconv import deviation_function, regrets_from_values
from pbmarl.solvers.result import SolverResult

#: the dynamics `iterative_nash` can run
DYNAMICS = ("prd", "rm", "fp")


def iterative_nash(
    U: ArrayLike,
    *,
    iterations: int = 10_000,
    tol: float = 1e-6,
    check_every: int = 20,
    dynamics: Sequence[str] = DYNAMICS,
) -> SolverResult:
    """Run each of `dynamics` for up to `iterations` steps; return the best profile seen.

    Every `check_every` steps the candidates are scored by meta-game NashConv: the PRD
    iterate and its running average, the RM+ iterate and its (linear) average, the
    fictitious-play average, and the "purified" version of each (members below 1e-3
    dropped, and the pure profile of each player's most likely member). The search stops
    early once the best NashConv is at most ``tol`` x payoff range.

    Returns:
        A `SolverResult` whose method names the winning candidate (e.g. ``"prd-average"``,
        ``"rm-iterate+pure"``) and whose info holds ``nash_conv``, ``steps`` (per dynamic)
        and ``converged`` (whether the tolerance was met).
    """
    U = as_payoff_array(U)
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
    if check_every < 1:
        raise ValueError(f"check_every must be a positive integer, got {check_every!r}")
    unknown = [d for d in dynamics if d not in DYNAMICS]
    if unknown or not dynamics:
        raise ValueError(f"dynamics must be a non-empty subset of {DYNAMICS}, got {tuple(dynamics)!r}")
    target = tol * payoff_scale(U)
    deviations = deviation_function(U)

    def nash_conv(sigma: Profile) -> float:
        return float(regrets_from_values(deviations(sigma), sigma).sum())

    best: tuple[float, Profile, str] = (np.inf, tuple(np.full(n, 1.0 / n) for n in U.shape[:-1]), "uniform")
    steps: dict[str, int] = {}
    for name in dynamics:
        for t, candidates in _run(name, U, iterations, check_every):
            steps[name] = t
            for label, sigma in candidates:
                for tag, cand in _with_purified(sigma):
                    score = nash_conv(cand)
                    if score < best[0]:
                        best = (score, cand, label + tag)
            if best[0] <= target:
                break
        if best[0] <= target:
            break
    score, sigma, method = best
    info = {"nash_conv": score, "steps": steps, "converged": bool(score <= target), "tol": tol}
    return SolverResult(tuple(np.array(s) for s in sigma), method, info)


def _run(name: str, U: np.ndarray, iterations: int, check_every: int) -> Iterator[tuple[int, list[tuple[str, Profile]]]]:
    """Yield (steps so far, labelled candidates) every `check_every` steps and at the end."""
    if name == "prd":
        gen = projected_replicator_dynamics(U)
    elif name == "rm":
        gen = regret_matching(U, plus=True)
    else:
        gen = fictitious_play(U)
    total = [np.zeros(n) for n in U.shape[:-1]]
    weight_sum = 0.0
    for t in range(1, iterations + 1):
        sigma = next(gen)
        weight = float(t) if name == "rm" else 1.0  # RM+ uses linear averaging
        for acc, s in zip(total, sigma):
            acc += weight * s
        weight_sum += weight
        if t % check_every == 0 or t == iterations:
            average = tuple(acc / weight_sum for acc in total)
            if name == "fp":  # fictitious play's iterates already are averages
                yield t, [("fp", sigma)]
            else:
                yield t, [(f"{name}-iterate", sigma), (f"{name}-average", average)]


def _with_purified(sigma: Profile) -> list[tuple[str, Profile]]:
    out = [("", sigma)]
    trimmed = []
    for s in sigma:
        kept = np.where(s >= 1e-3 * s.max(), s, 0.0)
        trimmed.append(kept / kept.sum())
    out.append(("+trimmed", tuple(trimmed)))
    pure = []
    for s in sigma:
        e = np.zeros_like(s)
        e[int(np.argmax(s))] = 1.0
        pure.append(e)
    out.append(("+pure", tuple(pure)))
    return out
