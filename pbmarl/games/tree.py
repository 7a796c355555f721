"""The whole game tree of a small game as flat arrays (sequence form).

Built once per game by one walk (`build_tree`); `pbmarl.games.tree_cache.game_tree` keeps it on the game
and on disk.
What it keeps is what every exact computation needs and nothing per history: for each
player, the information states (key, observation tensor, legal mask, the player's own
previous sequence); and for each terminal history, the chance probability of reaching
it, its returns and, per player, the last sequence (information state, action) the
player took on the way.

Sequences of player p are numbered ``0`` (the empty sequence) and
``1 + infoset * num_actions + action``, so a realisation plan is a flat vector of
length ``1 + S_p * num_actions``.

Information sets always have perfect recall. Where the game's own strings merge
histories that differ in the player's own past (goofspiel), the walk starts again with
keys made of the player's action-observation history (`pbmarl.games.recall`), warns
once and sets ``game.recall_keys``; from then on `Game.info_key` returns those keys, so
rollouts, tabular policies and every exact computation name information sets alike.

A walk is planned and watched against a memory budget (`memory=`, by default `MEMORY_SHARE`
of what is available): refused before it starts when the upper estimate of its memory
(`pbmarl.games.tree_size.estimate_spread`) exceeds the budget, and stopped with
`WalkOverBudget` once the process's resident memory has grown past it
(`pbmarl.games.walk_guard`). A long walk shows a progress bar; a walk stopped by either
that or Ctrl-C frees what it built, and nothing is kept on the game or cached on disk.
"""

from __future__ import annotations

import itertools
import sys
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.recall import extend_key, first_key
from pbmarl.games.state import CHANCE, SIMULTANEOUS, TERMINAL
from pbmarl.games.tree_size import SizeEstimate, available_memory, estimate_memory, estimate_size, estimate_spread
from pbmarl.games.walk_guard import CHECK_EVERY, WalkGuard

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game

#: share of the memory available when a walk begins that it may use by default: the rest is left to
#: the notebook or program around it (at 0.8 a 15 GB walk was accepted on a 23 GB machine)
MEMORY_SHARE = 0.5
#: histories a second the walk manages (66k on goofspiel(num_cards=5), 210k on 3-player Leduc,
#: one core of the benchmark machine): used to say how long a large walk will take
WALK_RATE = 100_000.0
#: walks estimated to take longer than this many seconds are announced with a warning first
SLOW_WALK_SECONDS = 60.0


class NotExact(ValueError):
    """The exact engine cannot take this game; the message says why and what to use instead."""


class WalkOverBudget(NotExact, MemoryError):
    """A tree walk stopped because the process's memory grew past the walk's budget (`memory=`).

    A `NotExact` (so callers that fall back to sampling when the exact engine refuses keep
    doing so) and a `MemoryError`; the message gives the growth measured, the budget and how
    to raise it.
    """


@dataclass(frozen=True)
class PlayerInfosets:
    """The information states of one player."""

    keys: list[str]
    index: dict[str, int]
    obs: np.ndarray  # [S, *observation_shape] float32
    legal: np.ndarray  # [S, A] bool
    parent_seq: np.ndarray  # [S] int: the player's sequence leading here (0 = empty)
    depth: np.ndarray  # [S] int: the player's own decisions before this one
    levels: list[np.ndarray] = field(default_factory=list)  # infoset indices by depth

    @property
    def size(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class GameTree:
    """Sequence-form view of a game; see the module doc."""

    num_players: int
    num_actions: int
    infosets: tuple[PlayerInfosets, ...]
    chance_reach: np.ndarray  # [Z]
    returns: np.ndarray  # [Z, P]
    terminal_seq: np.ndarray  # [P, Z] int
    num_nodes: int
    #: True when information sets are keyed by action-observation histories (`pbmarl.games.recall`)
    recall_keys: bool = False

    @property
    def num_terminals(self) -> int:
        return len(self.chance_reach)

    def num_sequences(self, player: int) -> int:
        return 1 + self.infosets[player].size * self.num_actions


class _RecallConflict(Exception):
    """An information-state string is reached after two different own histories."""


def make_infosets(keys: list[str], obs: np.ndarray, legal: np.ndarray, parent_seq: np.ndarray,
                  depth: np.ndarray) -> PlayerInfosets:
    """`PlayerInfosets` from its arrays (levels and the key index are derived)."""
    levels = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)] if len(depth) else []
    return PlayerInfosets(keys=keys, index={k: i for i, k in enumerate(keys)}, obs=obs, legal=legal,
                          parent_seq=parent_seq, depth=depth, levels=levels)


class _Builder:
    def __init__(self, game: Game, recall: bool) -> None:
        self.game = game
        self.recall = recall
        self.A = game.num_actions
        P = game.num_players
        self.keys: list[list[str]] = [[] for _ in range(P)]
        self.index: list[dict[str, int]] = [{} for _ in range(P)]
        self.obs: list[list[np.ndarray]] = [[] for _ in range(P)]
        self.legal: list[list[np.ndarray]] = [[] for _ in range(P)]
        self.parent: list[list[int]] = [[] for _ in range(P)]
        self.depth: list[list[int]] = [[] for _ in range(P)]
        self.owner: dict[str, int] = {}

    def infoset(self, state: Any, player: int, parent_seq: int) -> int:
        key = self.game.info_string(state, player)
        if self.recall:
            if parent_seq:
                I, a = divmod(parent_seq - 1, self.A)
                key = extend_key(self.keys[player][I], a, key)
            else:
                key = first_key(player, key)
        idx = self.index[player].get(key)
        if idx is None:
            owner = self.owner.setdefault(key, player)
            if owner != player:  # one string names states of two players: keys must tell them apart
                raise _RecallConflict(key, player)
            idx = len(self.keys[player])
            self.index[player][key] = idx
            self.keys[player].append(key)
            self.obs[player].append(self.game.observation(state, player))
            self.legal[player].append(self.game.legal_mask(state, player))
            self.parent[player].append(parent_seq)
            self.depth[player].append(0 if parent_seq == 0 else self.depth[player][(parent_seq - 1) // self.A] + 1)
        elif self.parent[player][idx] != parent_seq:
            raise _RecallConflict(key, player)
        return idx

    def clear(self) -> None:
        """Drop everything collected (a stopped walk frees its memory even if its frame is kept)."""
        for lists in (self.keys, self.index, self.obs, self.legal, self.parent, self.depth):
            for one in lists:
                one.clear()
        self.owner.clear()

    def finish(self, player: int) -> PlayerInfosets:
        shape = (0,) + tuple(self.game.observation_shape)
        return make_infosets(
            self.keys[player],
            np.stack(self.obs[player]).astype(np.float32) if self.obs[player] else np.zeros(shape, np.float32),
            np.stack(self.legal[player]) if self.legal[player] else np.zeros((0, self.A), bool),
            np.asarray(self.parent[player], dtype=np.int64),
            np.asarray(self.depth[player], dtype=np.int64),
        )


def _walk(game: Game, recall: bool, max_nodes: int | None, guard: WalkGuard | None = None) -> GameTree:
    builder = _Builder(game, recall)
    reach: list[float] = []
    returns: list[float] = []
    term_seq: list[int] = []
    stack: list[tuple[Any, float, tuple[int, ...]]] = [(game.new_initial_state(), 1.0, (0,) * game.num_players)]
    try:
        nodes = _visit(game, builder, stack, reach, returns, term_seq, max_nodes, guard)
    except BaseException as exc:  # a refusal, a recall conflict or Ctrl-C: free the lists, whoever keeps the frame
        for collected in (reach, returns, term_seq, stack):
            collected.clear()
        builder.clear()
        if isinstance(exc, KeyboardInterrupt) and sys.version_info >= (3, 11):
            exc.add_note(f"the tree walk of {game.name!r} was interrupted; what it built was freed, nothing was cached")
        raise
    finally:
        if guard is not None:
            guard.close()
    P, Z = game.num_players, len(reach)
    return GameTree(
        num_players=P,
        num_actions=game.num_actions,
        infosets=tuple(builder.finish(p) for p in range(P)),
        chance_reach=np.asarray(reach, dtype=float),
        returns=np.asarray(returns, dtype=float).reshape(Z, P),
        terminal_seq=np.asarray(term_seq, dtype=np.int64).reshape(Z, P).T.copy(),
        num_nodes=nodes,
        recall_keys=recall,
    )


def _visit(game: Game, builder: _Builder, stack: list[tuple[Any, float, tuple[int, ...]]], reach: list[float],
           returns: list[float], term_seq: list[int], max_nodes: int | None, guard: WalkGuard | None) -> int:
    """Walk depth first from `stack`, appending each terminal's reach, returns and last sequences; the count."""
    P, A = game.num_players, game.num_actions
    nodes = 0
    while stack:
        state, prob, seqs = stack.pop()
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            raise NotExact(f"game {game.name!r} is too large for the exact engine: more than {max_nodes:,} histories "
                           "(max_nodes); use a sampling evaluator (pb.RolloutPool) instead")
        if guard is not None and nodes % CHECK_EVERY == 0:
            refusal = guard.check(nodes)
            if refusal is not None:
                raise WalkOverBudget(refusal)
        kind = state.current_player()
        if kind == TERMINAL:
            reach.append(prob)
            returns.extend(state.returns())
            term_seq.extend(seqs)
        elif kind == CHANCE:
            for action, p in state.chance_outcomes():
                if p > 0:
                    child = state.clone()
                    child.apply_action(action)
                    stack.append((child, prob * p, seqs))
        elif kind == SIMULTANEOUS:
            choices = []
            for player in range(P):
                legal = state.legal_actions(player)
                if legal:
                    I = builder.infoset(state, player, seqs[player])
                    choices.append([(a, 1 + I * A + a) for a in legal])
                else:
                    choices.append([(0, seqs[player])])
            for joint in itertools.product(*choices):
                child = state.clone()
                child.apply_actions([a for a, _ in joint])
                stack.append((child, prob, tuple(s for _, s in joint)))
        else:
            I = builder.infoset(state, kind, seqs[kind])
            base = 1 + I * A
            for a in state.legal_actions(kind):
                child = state.clone()
                child.apply_action(a)
                new = list(seqs)
                new[kind] = base + a
                stack.append((child, prob, tuple(new)))
    return nodes


def check_exact(game: Game) -> None:
    """Raise `NotExact` naming the reason if `game` is outside the exact engine (before any walk)."""
    if game.exact_refusal is not None:
        raise NotExact(f"game {game.name!r} is outside the exact engine: {game.exact_refusal}")
    if not game.enumerable:
        raise NotExact(f"game {game.name!r} cannot be enumerated; use a sampling evaluator (pb.RolloutPool)")


def walk_budget(memory: float | None = None) -> tuple[float, str]:
    """(bytes a walk may use, how that was set): `memory` when given, else `MEMORY_SHARE` of what is available."""
    if memory is not None:
        if not memory > 0:
            raise ValueError(f"memory must be a positive number of bytes (e.g. 8e9), got {memory!r}")
        return float(memory), f"memory={float(memory):.3g}"
    available = available_memory()
    return MEMORY_SHARE * available, f"{MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GB available; memory= sets it"


def check_fits(game: Game, *, max_nodes: int | None = None, memory: float | None = None) -> SizeEstimate:
    """Refuse a tree whose upper estimate of memory exceeds `memory` bytes (default: `MEMORY_SHARE` of
    what is available now) or, when given, with far more than `max_nodes` histories; cheap (random
    playouts over several seeds, `estimate_spread`). Returns the estimate."""
    return _check_fits(game, max_nodes, *walk_budget(memory))


def _check_fits(game: Game, max_nodes: int | None, have: float, origin: str) -> SizeEstimate:
    size = estimate_spread(game)
    if max_nodes is not None and size.mean.histories > 20 * max_nodes:
        raise NotExact(
            f"game {game.name!r} has about {size.mean.histories:.2g} histories: too large for the exact engine "
            f"(limit {max_nodes:,}); use a sampling evaluator (pb.RolloutPool) and an RL oracle (pb.DQN, pb.PPO)"
        )
    need, high = estimate_memory(game, size.mean), estimate_memory(game, size.high)
    if high > have:
        raise NotExact(
            f"game {game.name!r} is too large for the exact engine: {size.describe()} need about "
            f"{need / 2**30:.3g} GB to walk and {have / 2**30:.2f} GB of memory is available to it ({origin}). "
            f"Pass memory= in bytes to allow more (the upper estimate needs {high / 2**30:.3g} GB: e.g. "
            f"memory={1.25 * high:.2g}), or use a sampling evaluator (pb.RolloutPool) and an RL oracle (pb.DQN, pb.PPO)"
        )
    return size


def build_tree(game: Game, *, max_nodes: int | None = None, memory: float | None = None,
               progress: bool | None = None) -> GameTree:
    """Walk the whole tree of `game` once; see the module doc.

    Args:
        game: an enumerable game inside the exact engine (`check_exact`).
        max_nodes: refuse trees with more histories than this (None: only the memory check).
        memory: bytes the walk may use, planned and watched (None: `MEMORY_SHARE` of what is
            available now).
        progress: a progress bar once the walk has run a few seconds: True always, False never,
            None in a notebook or a terminal.

    Raises:
        NotExact: a mean-field or deliberately imperfect-recall game, a game that cannot be
            enumerated, or a tree estimated to need more memory than the budget (with the
            estimate in GB and the budget).
        WalkOverBudget: the walk's real memory grew past the budget (with what it measured).
    """
    check_exact(game)
    budget, origin = walk_budget(memory)
    size = _check_fits(game, max_nodes, budget, origin)
    seconds = size.mean.histories / WALK_RATE
    if seconds > SLOW_WALK_SECONDS:
        warnings.warn(
            f"{game.name!r}: walking about {size.mean.histories:.2g} histories takes about {seconds / 60:.0f} minutes "
            f"(at {WALK_RATE:,.0f} histories/s) and {estimate_memory(game, size.mean) / 2**30:.2g} GB; the tree is "
            "cached on disk afterwards (PBMARL_TREE_CACHE)",
            stacklevel=2,
        )

    def guard() -> WalkGuard:
        return WalkGuard(game.name, budget=budget, origin=origin, expected=size.high.histories, progress=progress)

    try:
        return _walk(game, game.recall_keys, max_nodes, guard())
    except _RecallConflict as exc:
        key, player = exc.args
    # walked again outside the handler, so the first walk's frame (held by the traceback) is gone
    game.__dict__["_recall_reason"] = f"the string {key!r} of player {player}"
    game.recall_keys = True
    return _walk(game, True, max_nodes, guard())


def estimate_tree_size(game: Game, *, probes: int = 4096, seed: int = 0) -> float:
    """Estimated number of histories (stratified Knuth estimate, `pbmarl.games.tree_size`)."""
    return estimate_size(game, probes=probes, seed=seed).histories
