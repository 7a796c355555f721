"""Everything that takes a game takes its name too (the one-vocabulary issue: `pb.RolloutPool("kuhn_poker")` was
refused while `pb.PSRO("kuhn_poker")` built), and anything else is refused naming what is accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import pbmarl as pb

TAKERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "RolloutPool": ("kuhn_poker", lambda g: pb.RolloutPool(g, backend="local")),
    "ExactEvaluator": ("kuhn_poker", lambda g: pb.ExactEvaluator(g)),
    "ExactBestResponse": ("kuhn_poker", lambda g: pb.ExactBestResponse(g)),
    "Population": ("kuhn_poker", lambda g: pb.Population(g)),
    "RandomPolicy": ("kuhn_poker", lambda g: pb.RandomPolicy(g)),
    "TabularPolicy": ("kuhn_poker", lambda g: pb.TabularPolicy(g)),
    "MLPPolicy": ("kuhn_poker", lambda g: pb.MLPPolicy(g, hidden=(8,))),
    "GaussianPolicy": ("gym:Pendulum-v1", lambda g: pb.policies.GaussianPolicy(g, hidden=(8,))),
    "AgentMapping.shared": ("pettingzoo:simple_spread_v3", lambda g: pb.AgentMapping.shared(g)),
    "AgentMapping.independent": ("pettingzoo:simple_spread_v3", lambda g: pb.AgentMapping.independent(g)),
    "sequence_form_lp": ("kuhn_poker", lambda g: pb.sequence_form_lp(g)),
}


@pytest.mark.parametrize("taker", sorted(TAKERS))
def test_a_game_name_builds_what_the_game_builds(taker: str) -> None:
    name, build = TAKERS[taker]
    by_name, by_game = build(name), build(pb.load_game(name))
    game = getattr(by_name, "game", None)
    if game is not None:
        assert game.name == by_game.game.name == pb.load_game(name).name
    if taker == "sequence_form_lp":
        assert by_name.value == pytest.approx(by_game.value)


@pytest.mark.parametrize("taker", sorted(TAKERS))
def test_anything_else_is_refused_naming_what_is_accepted(taker: str) -> None:
    _, build = TAKERS[taker]
    with pytest.raises(TypeError, match=r"must be a pbmarl Game or a game name \(see pb.load_game\), got int: 7"):
        build(7)
