"""Independent references from OpenSpiel, shared by the exact-engine tests."""

from __future__ import annotations

import numpy as np
from open_spiel.python import policy as osp
from open_spiel.python.algorithms import expected_game_score

import pbmarl as pb

KUHN, LEDUC, KUHN3 = "kuhn_poker", "leduc_poker", "kuhn_poker(players=3)"
GOOF3 = "goofspiel(num_cards=3,imp_info=True,points_order=descending)"


def to_openspiel(game: pb.games.Game, profile: list[pb.TabularPolicy]) -> osp.TabularPolicy:
    """One OpenSpiel TabularPolicy whose player-p rows come from ``profile[p]`` (by OpenSpiel's own keys)."""
    out = osp.TabularPolicy(game.pyspiel_game)
    for p, pi in enumerate(profile):
        for key in out.states_per_player[p]:
            out.policy_for_key(key)[:] = pi.table[pi.index[key]]
    return out


def openspiel_value(game: pb.games.Game, joint: osp.Policy) -> np.ndarray:
    """OpenSpiel's expected returns of a joint policy (simultaneous games take one joint policy)."""
    state = game.pyspiel_game.new_initial_state()
    if game.turn_based:
        return np.asarray(expected_game_score.policy_value(state, [joint] * game.num_players))
    return np.asarray(expected_game_score.policy_value(state, joint))
