"""Names the docstring examples use (``pytest --doctest-modules pbmarl``).

The examples read like notebook cells: ``pb``, ``np``, a ``game`` (Kuhn poker), a ``pop`` with one
random policy per player, its exactly filled payoff ``table``, a meta-strategy ``sigma`` and an ``rng``. They are
built once per session from cheap parts (no torch, no Ray) and given to every module's examples.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def _doctest_names() -> dict[str, Any]:
    import numpy as np

    import pbmarl as pb

    game = pb.load_game("kuhn_poker")
    pop = pb.Population(game)
    for player in range(game.num_players):
        pop.add(player, pb.RandomPolicy(game, player=player))
    table = pb.PayoffTable(pop)
    pb.ExactEvaluator(game).fill(table)
    sigma = pb.MetaSolver("uniform")(table)
    return {"pb": pb, "np": np, "game": game, "pop": pop, "table": table, "sigma": sigma, "rng": np.random.default_rng(0)}


@pytest.fixture(autouse=True)
def _add_doctest_names(doctest_namespace: dict[str, Any], _doctest_names: dict[str, Any]) -> None:
    doctest_namespace.update(_doctest_names)
