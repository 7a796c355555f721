"""Nash equilibria by pygambit (the Gambit project's solvers), when its optional extra is installed.

pygambit is GPL-2.0-or-later while pbmarl is Apache-2.0, so it is never imported unless
it is installed and a solve asks for it: ``pip install "pbmarl[gambit]"``. Nothing here
runs at import time.

Methods (measured in ``benchmarks/exact_scale.py``): ``"ipa"`` (iterated polymatrix
approximation, Govindan & Wilson 2004) is the fastest on n-player tables; ``"logit"``
(quantal-response path following, McKelvey & Palfrey 1995) is slower and more accurate;
``"gnm"`` (global Newton) is the fallback; ``"lcp"`` is Lemke-Howson for two players.
"""

from __future__ import annotations

import importlib.util
import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pbmarl.solvers.result import SolverError, SolverResult

#: the pygambit methods `gambit_nash` can run
GAMBIT_METHODS = ("ipa", "logit", "gnm", "lcp")


def gambit_available() -> bool:
    """Whether pygambit is installed (found without importing it)."""
    return importlib.util.find_spec("pygambit") is not None


def gambit_game(U: np.ndarray) -> Any:
    """A pygambit strategic game with payoffs `U` ``(n_1, ..., n_k, k)`` (floats kept as doubles)."""
    import pygambit

    sizes = U.shape[:-1]
    game = pygambit.Game.new_table(list(sizes))
    players = list(game.players)
    for profile in itertools.product(*(range(n) for n in sizes)):
        outcome = game[profile]
        for p, player in enumerate(players):
            outcome[player] = float(U[profile + (p,)])
    return game


def gambit_nash(U: np.ndarray, *, method: str = "ipa", game: Any = None) -> SolverResult:
    """One Nash equilibrium of `U` by pygambit's `method` (see the module doc).

    Args:
        U: a checked payoff array ``(n_1, ..., n_k, k)``.
        method: one of `GAMBIT_METHODS` (``"lcp"`` needs two players).
        game: the pygambit game of `U` if already built (building costs about 60 us a cell).

    Raises:
        ImportError: pygambit is not installed (``pip install "pbmarl[gambit]"``, GPL-2.0-or-later).
        ValueError: an unknown method.
        SolverError: the method returned no equilibrium.
    """
    if method not in GAMBIT_METHODS:
        raise ValueError(f"unknown pygambit method {method!r}; accepted: {', '.join(GAMBIT_METHODS)}")
    if not gambit_available():
        raise ImportError('pygambit is not installed: pip install "pbmarl[gambit]" (GPL-2.0-or-later)')
    import pygambit

    start = time.perf_counter()
    game = gambit_game(U) if game is None else game
    built = time.perf_counter() - start
    solvers = {
        "ipa": lambda g: pygambit.nash.ipa_solve(g),
        "logit": lambda g: pygambit.nash.logit_solve(g),
        "gnm": lambda g: pygambit.nash.gnm_solve(g),
        "lcp": lambda g: pygambit.nash.lcp_solve(g, rational=False, stop_after=1),
    }
    result = solvers[method](game)
    if not result.equilibria:
        raise SolverError(f"pygambit {method} found no equilibrium of a game of shape {U.shape}")
    eq = result.equilibria[0]
    sigma = tuple(_distribution([float(eq[s]) for s in player.strategies]) for player in game.players)
    return SolverResult(sigma, f"gambit-{method}", {"build_seconds": built,
                                                    "solve_seconds": time.perf_counter() - start - built})


def _distribution(x: Sequence[float]) -> np.ndarray:
    a = np.clip(np.asarray(x, dtype=float), 0.0, None)
    return a / a.sum()
