"""How big a game tree is before walking it: histories, terminals and the memory they need.

`estimate_size` is Knuth's (1975) unbiased estimator, stratified: the first levels
of the tree are enumerated exactly until the frontier holds `frontier` nodes, and
random playouts from the frontier nodes estimate what lies below each (the mean over
playouts of the summed products of branching factors along the path). Games whose
subtrees differ a lot in size (liar's dice: bids end the game at any depth) are
estimated far better this way than by playouts from the root alone. `estimate_spread`
repeats the probes over several seeds and gives an upper quantile beside the mean: the
estimator is unbiased but heavy-tailed, so one seed can undercount several times.

`estimate_memory` turns the counts into the bytes the walk and the flat tree need at
their peak; `available_memory` reads what the machine has free now and `resident_memory`
what this process holds (the walk's watchdog, `pbmarl.games.walk_guard`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.state import CHANCE, SIMULTANEOUS, TERMINAL

try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):  # pragma: no cover - no sysconf
    _PAGE = 4096

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game

#: bytes per terminal history at the walk's peak: Python lists of the chance probability,
#: returns and last sequences (a float or int object and its list slot: ~32 + 68 bytes a player,
#: plus the lists' spare room), then their arrays (8 + 16 a player). Measured peaks: 321 B on
#: 3-player Leduc and 389 B on liar's dice (information sets included), where (40, 56) said 208 and 152
_TERMINAL_BYTES = (48, 88)
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


def _frontier(game: Game, frontier: int) -> tuple[list[Any], TreeSize]:
    """The first levels enumerated exactly: (the states of the level where that stops, the counts above it)."""
    P = game.num_players
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
    return level, TreeSize(histories, terminals, decisions, exact=not level)


def _probe_level(level: list[Any], num_players: int, probes: int, rng: np.random.Generator) -> np.ndarray:
    """Knuth estimates of (histories, terminals, decisions) under every state of `level`, summed: ``[3]``.

    With fewer `probes` than states, the probes start from states drawn uniformly (with
    replacement) and their mean is scaled by the level's width, which keeps the estimate
    unbiased and its cost within `probes` playouts.
    """
    total = np.zeros(3)
    if probes < len(level):
        for i in rng.integers(len(level), size=probes):
            total += _playout(level[i].clone(), num_players, rng)
        return total * (len(level) / probes)
    per_node = probes // len(level)
    for state in level:
        for _ in range(per_node):
            total += _playout(state.clone(), num_players, rng)
    return total / per_node


def estimate_size(game: Game, *, frontier: int = 256, probes: int = 4096, seed: int = 0) -> TreeSize:
    """Stratified Knuth estimate of the tree of `game`; see the module doc. Exact for small trees."""
    level, top = _frontier(game, frontier)
    if not level:
        return top
    h, t, d = _probe_level(level, game.num_players, probes, np.random.default_rng(seed))
    return TreeSize(top.histories + h, top.terminals + t, top.decisions + d)


@dataclass(frozen=True)
class SizeEstimate:
    """A tree's counts over several probe seeds: their mean and an upper quantile (equal when exact)."""

    mean: TreeSize
    high: TreeSize
    seeds: int
    quantile: float

    @property
    def exact(self) -> bool:
        return self.mean.exact

    def describe(self) -> str:
        """E.g. ``about 2e+07 histories (9.6e+06 terminal), up to 2.9e+07 (90% quantile of 8 probe seeds)``."""
        if self.exact:
            return f"{self.mean.histories:,.0f} histories ({self.mean.terminals:,.0f} terminal)"
        return (f"about {self.mean.histories:.2g} histories ({self.mean.terminals:.2g} terminal), up to "
                f"{self.high.histories:.2g} ({self.quantile:.0%} quantile of {self.seeds} probe seeds)")


def estimate_spread(game: Game, *, seeds: int = 8, quantile: float = 0.9, frontier: int = 256, probes: int = 4096,
                    seed: int = 0) -> SizeEstimate:
    """`estimate_size` with its uncertainty: the `probes` are split over `seeds` independent probe seeds
    (streams spawned from `seed`); `mean` pools them all, `high` is the `quantile` of the per-seed estimates.

    Knuth's estimator is unbiased but heavy-tailed where subtrees differ a lot in size: on
    ``liars_dice(numdice=2,dice_sides=4)`` (33.6 million histories) single seeds gave 1.2 to 2.9
    times 10^7, so the mean mostly undercounts and the upper quantile is the safer number to plan
    memory by. Uniform trees (goofspiel, trade_comm) give the same answer on every seed.

        >>> est = estimate_spread(pb.load_game("liars_dice"))  # doctest: +SKIP
        >>> est.mean.histories <= est.high.histories  # doctest: +SKIP
        True
    """
    if seeds < 1 or not 0.0 <= quantile <= 1.0:
        raise ValueError(f"need seeds >= 1 and 0 <= quantile <= 1, got seeds={seeds}, quantile={quantile}")
    level, top = _frontier(game, frontier)
    if not level:
        return SizeEstimate(top, top, seeds=1, quantile=quantile)
    streams = np.random.SeedSequence(seed).spawn(seeds)
    per_seed = np.stack([_probe_level(level, game.num_players, max(1, probes // seeds), np.random.default_rng(s))
                         for s in streams])  # [seeds, 3]
    above = np.array([top.histories, top.terminals, top.decisions])
    mean = above + per_seed.mean(axis=0)
    high = above + np.quantile(per_seed, quantile, axis=0)
    return SizeEstimate(TreeSize(float(mean[0]), float(mean[1]), float(mean[2])),
                        TreeSize(float(high[0]), float(high[1]), float(high[2])), seeds=seeds, quantile=quantile)


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


def resident_memory() -> float | None:
    """Bytes of memory this process holds now (its resident set; a few microseconds on Linux).

    Elsewhere the peak resident set from `resource.getrusage` stands in (it never falls, so a
    walk's growth is measured against the process's earlier peak); None where neither exists.
    """
    try:
        with open("/proc/self/statm", "rb") as fh:
            return float(int(fh.read().split()[1]) * _PAGE)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, kilobytes on Linux and BSD
