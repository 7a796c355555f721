"""`load_game`: one entry point for OpenSpiel names, PettingZoo names and matrix games."""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from pbmarl.games.base import Game

PETTINGZOO_PREFIX = "pettingzoo:"
GYM_PREFIX = "gym:"
MDP_PREFIX = "mdp:"


def as_game(game: Any, *, what: str = "game") -> Game:
    """`game` if it is a `Game`, the game of that name if it is a str (`load_game`), else a TypeError naming it.

    Everything that takes a game takes a name too: ``pb.RolloutPool("kuhn_poker")`` as ``pb.PSRO("kuhn_poker")``.

    >>> as_game("kuhn_poker").num_players
    2
    >>> as_game(3)
    Traceback (most recent call last):
    ...
    TypeError: game must be a pbmarl Game or a game name (see pb.load_game), got int: 3
    """
    if isinstance(game, Game):
        return game
    if isinstance(game, str):
        return load_game(game)
    raise TypeError(f"{what} must be a pbmarl Game or a game name (see pb.load_game), got {type(game).__name__}: "
                    f"{game!r}")


def load_game(name: str | Game, **params: Any) -> Game:
    """Load a game by name.

    Accepts OpenSpiel names with or without parameters (``"kuhn_poker"``,
    ``"goofspiel(num_cards=4)"``, or ``load_game("kuhn_poker", players=3)``) and
    PettingZoo environments as ``"pettingzoo:connect_four_v3"``, Gymnasium ids as
    ``"gym:CartPole-v1"`` (one-player games) and MALib's verification MDPs as
    ``"mdp:two_round_nmdp"``. A `Game` passes through.

    Raises:
        ValueError: for an unknown name (with the closest known names) or bad parameters.
    """
    if isinstance(name, Game):
        return name
    if not isinstance(name, str):
        raise TypeError(f"game name must be a string, got {name!r}")
    name = name.strip()
    if name.startswith(PETTINGZOO_PREFIX):
        from pbmarl.games.pettingzoo import load_pettingzoo

        return load_pettingzoo(name[len(PETTINGZOO_PREFIX):], **params)
    if name.startswith(GYM_PREFIX):
        from pbmarl.games.gym import load_gym

        return load_gym(name[len(GYM_PREFIX):], **params)
    if name.startswith(MDP_PREFIX):
        from pbmarl.games.mdp import load_mdp

        return load_mdp(name[len(MDP_PREFIX):], **params)
    return _load_openspiel(name, params)


def _load_openspiel(name: str, params: dict[str, Any]) -> Game:
    import pyspiel

    from pbmarl.games.openspiel import OpenSpielGame

    base = name.split("(", 1)[0].strip()
    known = list(pyspiel.registered_names())
    if base not in known:
        close = difflib.get_close_matches(base, known, n=3, cutoff=0.6)
        close = _other_sources(base) + close
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"unknown game {base!r}{hint} (OpenSpiel names such as 'kuhn_poker', "
            f"'goofspiel(num_cards=4)', or 'pettingzoo:connect_four_v3')"
        )
    full = name
    if params:
        if "(" in name:
            raise ValueError(f"give parameters either in the name or as keywords, not both: {name!r}, {params}")
        full = f"{base}({','.join(f'{k}={_param(v)}' for k, v in params.items())})"
    try:
        game = pyspiel.load_game(full)
    except pyspiel.SpielError as exc:
        message = str(exc).splitlines()[0]
        raise ValueError(f"cannot load game {full!r}: {message}") from None
    return OpenSpielGame(full, game)


def _other_sources(name: str) -> list[str]:
    """`name` with the prefix of the source that has it (Gymnasium id, verification MDP), if any."""
    import gymnasium

    from pbmarl.games.mdp import TABLES

    found = [GYM_PREFIX + name] if name in gymnasium.registry else []
    return found + ([MDP_PREFIX + name] if name in TABLES else [])


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def game_spec(game: Game) -> dict[str, Any]:
    """A JSON-able description from which `game_from_spec` rebuilds the same game."""
    from pbmarl.games.matrix import MatrixGame

    if isinstance(game, MatrixGame):
        return {"kind": "matrix", "name": game.name, "payoffs": game.payoffs.tolist()}
    kind = getattr(game, "spec_kind", "openspiel")
    return {"kind": kind, "name": game.name}


def game_from_spec(spec: dict[str, Any]) -> Game:
    """Inverse of `game_spec`."""
    from pbmarl.games.matrix import MatrixGame

    kind = spec.get("kind")
    if kind == "matrix":
        return MatrixGame(np.asarray(spec["payoffs"], dtype=float), name=spec["name"])
    if kind == "openspiel":
        return load_game(spec["name"])
    if kind == "pettingzoo":
        name = spec["name"]
        return load_game(name if name.startswith(PETTINGZOO_PREFIX) else PETTINGZOO_PREFIX + name)
    if kind in ("gym", "mdp"):
        return load_game(spec["name"])
    raise ValueError(
        f"unknown game kind {kind!r} in saved spec {spec!r}; known kinds: matrix, openspiel, pettingzoo, gym, mdp"
    )
