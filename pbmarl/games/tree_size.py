"""How big a game tree is before walking it: histories, terminals and the memory they need.

`estimate_size` is Knuth's (1975) unbiased estimator, stratified: the first levels
of the tree are enumerated exactly until the frontier holds `frontier` nodes, and
random playouts from the frontier nodes estimate what lies below each (the mean over
playouts of the summed products of branching factors along the path). Games whose
subtrees differ a lot in size (liar's dice: bids end the game at any depth) are
estimated far better this way than by playouts from the root alone.

`estimate_memory` turns the counts into the bytes the walk and the flat tree need at
their peak; `available_memory` reads what the machine has free now.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.base import CHANCE, SIMULTANEOUS, TERMINAL

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game

#: bytes per terminal history at the walk's peak: Python lists of the chance probability,
#: returns and last sequences (~32 + 40 bytes a player), then their arrays (8 + 16 a player)
_TERMINAL_BYTES = (40, 56)
#: bytes per decision node: an information-state key string and a share of its row of arrays
_DECISION_BYTES = 64


@dataclass(frozen=True)
class TreeSize:
    """Estimated counts of a game tree (exact when `exact` is True)."""

    histories: float
    terminals: float
    decisions: float
    exact: bool = False


def _child(state: Any, action: int) -> Any:
    child = state.clone()
    child.apply_action(action)
    return child


def _children(state: Any, num_players: int) -> tuple[int, list[Any]]:
    """(kind, children) of a non-terminal state: kind is CHANCE, SIMULTANEOUS or the player."""
    kind = state.current_player()
    if kind == CHANCE:
        actions = [a for a, p in state.chance_outcomes() if p > 0]
        return kind, [_child(state, a) for a in actions]
    if kind == SIMULTANEOUS:
        legal = [state.legal_actions(p) or [0] for p in range(num_players)]
        out = []
        for joint in np.ndindex(*[len(a) for a in legal]):
            child = state.clone()
            child.apply_actions([legal[p][i] for p, i in enumerate(joint)])
            out.append(child)
        return kind, out
    return kind, [_child(state, a) for a in state.legal_actions(kind)]


def _playout(state: Any, num_players: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """One Knuth probe below `state`: estimates of (histories, terminals, decisions) under it, itself included."""
    histories, terminals, decisions, product = 1.0, 0.0, 0.0, 1.0
    while state.current_player() != TERMINAL:
        kind = state.current_player()
        if kind == CHANCE:
            actions = [a for a, p in state.chance_outcomes() if p > 0]
            state.apply_action(actions[rng.integers(len(actions))])
            width = len(actions)
        elif kind == SIMULTANEOUS:
            decisions += product
            legal = [state.legal_actions(p) or [0] for p in range(num_players)]
            state.apply_actions([a[rng.integers(len(a))] for a in legal])
            width = int(np.prod([len(a) for a in legal]))
        else:
            decisions += product
            legal = state.legal_actions(kind)
            state.apply_action(legal[rng.integers(len(legal))])
            width = len(legal)
        product *= width
        histories += product
    return histories, terminals + product, decisions


def estimate_size(game: Game, *, frontier: int = 256, probes: int = 4096, seed: int = 0) -> TreeSize:
    """Stratified Knuth estimate of the tree of `game`; see the module doc. Exact for small trees."""
    P = game.num_players
    rng = np.random.default_rng(seed)
    level = [game.new_initial_state()]
    histories = terminals = decisions = 0.0
    while level and len(level) < frontier:
        nxt: list[Any] = []
        for state in level:
            histories += 1
            if state.current_player() == TERMINAL:
                terminals += 1
                continue
            kind, children = _children(state, P)
            decisions += kind != CHANCE
            nxt.extend(children)
        level = nxt
    if not level:
        return TreeSize(histories, terminals, decisions, exact=True)
    per_node = max(1, probes // len(level))
    for state in level:
        h = t = d = 0.0
        for _ in range(per_node):
            dh, dt, dd = _playout(state.clone(), P, rng)
            h, t, d = h + dh, t + dt, d + dd
        histories, terminals, decisions = histories + h / per_node, terminals + t / per_node, decisions + d / per_node
    return TreeSize(histories, terminals, decisions)


def estimate_memory(game: Game, size: TreeSize) -> float:
    """Bytes the walk needs at its peak for a tree of `size` (the flat tree it leaves is smaller)."""
    per_terminal = _TERMINAL_BYTES[0] + _TERMINAL_BYTES[1] * game.num_players
    obs = 4 * int(np.prod(game.observation_shape)) + game.num_actions
    return size.terminals * per_terminal + size.decisions * (_DECISION_BYTES + obs / 4)


def available_memory() -> float:
    """Bytes of memory available now (MemAvailable on Linux; physical memory elsewhere)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float("inf")
