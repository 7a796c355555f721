"""Perfect-recall information-state keys from a player's own action-observation history.

Some OpenSpiel games name information states by strings that forget part of what
the player did (goofspiel's strings keep the cards won, not the order of the bids),
so two histories that differ in the player's own actions share a string. The exact
engine then keys the player's information set by its whole own history instead:
the string it saw at each of its earlier decisions and the action it took there,
in order, followed by the string it sees now,

    key_1 = "player <p>:" + s_1,    key_d = key_{d-1} + "|a=<a_{d-1}>|" + s_d.

The tree builder extends the parent's key as it walks (`extend_key`); a state met
anywhere else (a rollout, a tabular policy's lookup) replays its history
(`recall_key`). Both produce the same string by construction, so every consumer of
information sets agrees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game
    from pbmarl.games.state import State

#: between a decision's string and the action taken there
SEPARATOR = "\n|a={action}|\n"


def first_key(player: int, info: str) -> str:
    """The key of `player`'s first decision, whose string is `info` (the player is named: two
    players' strings may coincide, as in goofspiel, and keys must tell their states apart)."""
    return f"player {player}:\n{info}"


def extend_key(parent_key: str, action: int, info: str) -> str:
    """The key of a decision whose string is `info`, after `parent_key` where the player took `action`."""
    return parent_key + SEPARATOR.format(action=action) + info


def recall_key(game: Game, state: State, player: int) -> str:
    """The perfect-recall key of `player` at `state`, by replaying the state's history.

    Needs pyspiel-like ``full_history()`` (a list of ``(player, action)`` records); the
    first key names the player (`first_key`).
    """
    history: list[Any] = list(state.full_history())  # type: ignore[attr-defined]
    replay = game.new_initial_state()
    key: str | None = None
    last = 0
    i, P = 0, game.num_players
    while i < len(history):
        if replay.is_chance_node():
            replay.apply_action(history[i].action)
            i += 1
        elif replay.is_simultaneous_node():
            joint = [int(h.action) for h in history[i:i + P]]
            if replay.legal_actions(player):
                key, last = _next(key, last, player, game.info_string(replay, player)), joint[player]
            replay.apply_actions(joint)
            i += P
        else:
            if replay.current_player() == player:
                key, last = _next(key, last, player, game.info_string(replay, player)), int(history[i].action)
            replay.apply_action(history[i].action)
            i += 1
    return _next(key, last, player, game.info_string(state, player))


def _next(key: str | None, action: int, player: int, info: str) -> str:
    return first_key(player, info) if key is None else extend_key(key, action, info)
