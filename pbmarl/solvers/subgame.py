"""Nash equilibria of large n-player tables by solving a growing sub-table (a double oracle inside the meta-game).

Equilibria of PSRO meta-games (and of random games) put their mass on few members, so the
table is solved on supports ``S_p`` that start small: the previous meta-strategy's support
plus the newest members, or each player's best reply to uniform play. Each round solves the
sub-table ``U[S_0 x ... x S_{k-1}]`` by the logit path (`logit_path_nash`), extends the answer
with zeros, and computes every member's deviation payoff in the full table (one contraction
per player). If no member outside the supports gains more than the tolerance allows, the
answer is an equilibrium of the full table; otherwise each player's best such member joins
its support and the next round starts (McMahan, Gordon & Blum 2003, "Planning in the
presence of cost functions controlled by an adversary", the double oracle, here applied to
the meta-game's own members). Every round adds a member, so at most ``sum_p n_p`` rounds run;
a sub-table whose own solve falls short (the path stalls near a degenerate equilibrium) hands
over to the whole table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pbmarl.solvers.dynamics import Profile
from pbmarl.solvers.logit_path import logit_path_nash
from pbmarl.solvers.nashconv import deviation_function

#: a sub-table at least this fraction of the full table is not worth the rounds: the full table is solved
FULL_FRACTION = 0.5


def subgame_nash(
    U: np.ndarray,
    *,
    target: float,
    init: Sequence[np.ndarray] | None = None,
    max_rounds: int | None = None,
    max_steps: int = 3_000,
) -> tuple[Profile, float, dict[str, object]]:
    """A profile of `U` ``(n_1, ..., n_k, k)`` with NashConv at most `target` if one is found (module doc).

    Args:
        U: checked payoff array.
        target: the NashConv to reach, in `U`'s units.
        init: a warm start, one distribution per player over all members (zeros for new ones):
            its support and each player's last member start the sub-table.
        max_rounds: most sub-tables to solve (None: until the supports cover the table).
        max_steps: most logit-path steps per sub-table.

    Returns:
        ``(profile, nash_conv, info)`` with info ``rounds``, ``support_sizes`` (of the last
        sub-table), ``path_steps`` (logit-path steps over all rounds), ``restricted``
        (whether the last sub-table was smaller than the table) and ``polished`` (whether
        Newton's method produced the profile).
    """
    k = U.shape[-1]
    sizes = U.shape[:-1]
    deviations = deviation_function(U)
    supports = _initial_supports(U, init)
    best: Profile = tuple(np.full(n, 1.0 / n) for n in sizes)
    best_score = np.inf
    rounds, path_steps, polished = 0, 0, False
    restricted = True
    while max_rounds is None or rounds < max_rounds:
        rounds += 1
        cells = int(np.prod([len(s) for s in supports]))
        if cells >= FULL_FRACTION * np.prod(sizes):
            supports = [np.arange(n) for n in sizes]
            restricted = False
        sub = U[np.ix_(*supports)]
        # the sub-table is solved well inside the target: members outside it use the rest
        sub_sigma, _, info = logit_path_nash(sub, target=0.25 * target, max_steps=max_steps)
        path_steps += int(info["steps"])
        sigma = tuple(_extend(s, support, n) for s, support, n in zip(sub_sigma, supports, sizes))
        values = deviations(sigma)
        gains = [v - float(v @ s) for v, s in zip(values, sigma)]
        score = float(sum(max(float(g.max()), 0.0) for g in gains))
        if score < best_score:
            best, best_score, polished = sigma, score, bool(info["polished"])
        if score <= target or not restricted:
            break
        grown = False
        for p in range(k):
            outside = np.setdiff1d(np.arange(sizes[p]), supports[p])
            if len(outside) and gains[p][outside].max() > target / (2 * k):
                supports[p] = np.sort(np.append(supports[p], outside[int(np.argmax(gains[p][outside]))]))
                grown = True
        if not grown:  # the sub-table's own solve fell short with nothing outside to add: the whole table next
            supports = [np.arange(n) for n in sizes]
    info_out: dict[str, object] = {"rounds": rounds, "support_sizes": tuple(len(s) for s in supports),
                                   "path_steps": path_steps, "restricted": restricted, "polished": polished}
    return best, best_score, info_out


def _extend(sub: np.ndarray, support: np.ndarray, n: int) -> np.ndarray:
    full = np.zeros(n)
    full[support] = sub
    return full


def _initial_supports(U: np.ndarray, init: Sequence[np.ndarray] | None) -> list[np.ndarray]:
    sizes = U.shape[:-1]
    if init is not None:
        return [np.union1d(np.flatnonzero(np.asarray(s) > 0), [n - 1]).astype(int) for s, n in zip(init, sizes)]
    uniform = [np.full(n, 1.0 / n) for n in sizes]
    values = deviation_function(U)(uniform)
    return [np.array([int(np.argmax(v))]) for v in values]
