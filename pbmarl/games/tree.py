"""The whole game tree of a small game as flat arrays (sequence form).

Built once per game by one walk (or loaded from the disk cache, `pbmarl.games.tree_cache`).
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
"""

from __future__ import annotations

import itertools
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.base import CHANCE, SIMULTANEOUS, TERMINAL
from pbmarl.games.recall import extend_key, first_key
from pbmarl.games.tree_size import TreeSize, available_memory, estimate_memory, estimate_size

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game

#: share of the available memory a walk may plan to use
MEMORY_SHARE = 0.8
#: trees that take longer than this to walk are written to the disk cache
CACHE_AFTER_SECONDS = 1.0
#: histories a second the walk manages (66k on goofspiel(num_cards=5), 210k on 3-player Leduc,
#: one core of the benchmark machine): used to say how long a large walk will take
WALK_RATE = 100_000.0
#: walks estimated to take longer than this many seconds are announced with a warning first
SLOW_WALK_SECONDS = 60.0


class NotExact(ValueError):
    """The exact engine cannot take this game; the message says why and what to use instead."""


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

    def finish(self, player: int) -> PlayerInfosets:
        shape = (0,) + tuple(self.game.observation_shape)
        return make_infosets(
            self.keys[player],
            np.stack(self.obs[player]).astype(np.float32) if self.obs[player] else np.zeros(shape, np.float32),
            np.stack(self.legal[player]) if self.legal[player] else np.zeros((0, self.A), bool),
            np.asarray(self.parent[player], dtype=np.int64),
            np.asarray(self.depth[player], dtype=np.int64),
        )


def _walk(game: Game, recall: bool, max_nodes: int | None) -> GameTree:
    P, A = game.num_players, game.num_actions
    builder = _Builder(game, recall)
    reach: list[float] = []
    returns: list[float] = []
    term_seq: list[int] = []
    stack: list[tuple[Any, float, tuple[int, ...]]] = [(game.new_initial_state(), 1.0, (0,) * P)]
    nodes = 0
    while stack:
        state, prob, seqs = stack.pop()
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            raise NotExact(f"game {game.name!r} is too large for the exact engine: more than {max_nodes:,} histories "
                           "(max_nodes); use a sampling evaluator (pb.RolloutPool) instead")
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
    Z = len(reach)
    return GameTree(
        num_players=P,
        num_actions=A,
        infosets=tuple(builder.finish(p) for p in range(P)),
        chance_reach=np.asarray(reach, dtype=float),
        returns=np.asarray(returns, dtype=float).reshape(Z, P),
        terminal_seq=np.asarray(term_seq, dtype=np.int64).reshape(Z, P).T.copy(),
        num_nodes=nodes,
        recall_keys=recall,
    )


def check_exact(game: Game) -> None:
    """Raise `NotExact` naming the reason if `game` is outside the exact engine (before any walk)."""
    if game.exact_refusal is not None:
        raise NotExact(f"game {game.name!r} is outside the exact engine: {game.exact_refusal}")
    if not game.enumerable:
        raise NotExact(f"game {game.name!r} cannot be enumerated; use a sampling evaluator (pb.RolloutPool)")


def check_fits(game: Game, *, max_nodes: int | None = None, memory: float | None = None) -> TreeSize:
    """Refuse a tree estimated to need more than `memory` bytes (default: a share of what is
    available now) or, when given, far more than `max_nodes` histories; cheap (random playouts).
    Returns the estimate."""
    size = estimate_size(game)
    if max_nodes is not None and size.histories > 20 * max_nodes:
        raise NotExact(
            f"game {game.name!r} has about {size.histories:.2g} histories: too large for the exact engine "
            f"(limit {max_nodes:,}); use a sampling evaluator (pb.RolloutPool) and an RL oracle (pb.DQN, pb.PPO)"
        )
    need = estimate_memory(game, size)
    have = MEMORY_SHARE * available_memory() if memory is None else float(memory)
    if need > have:
        raise NotExact(
            f"game {game.name!r} is too large for the exact engine: about {size.histories:.2g} histories "
            f"({size.terminals:.2g} terminal) need about {need / 2**30:.3g} GB to walk and "
            f"{have / 2**30:.1f} GB of memory is available; use a sampling "
            "evaluator (pb.RolloutPool) and an RL oracle (pb.DQN, pb.PPO)"
        )
    return size


def build_tree(game: Game, *, max_nodes: int | None = None, memory: float | None = None) -> GameTree:
    """Walk the whole tree of `game` once; see the module doc.

    Args:
        game: an enumerable game inside the exact engine (`check_exact`).
        max_nodes: refuse trees with more histories than this (None: only the memory check).
        memory: bytes the walk may use (None: 80% of what is available now).

    Raises:
        NotExact: a mean-field or deliberately imperfect-recall game, a game that cannot be
            enumerated, or a tree estimated to need more memory than is available (with the
            estimate in GB and the memory available).
    """
    check_exact(game)
    size = check_fits(game, max_nodes=max_nodes, memory=memory)
    seconds = size.histories / WALK_RATE
    if seconds > SLOW_WALK_SECONDS:
        warnings.warn(
            f"{game.name!r}: walking about {size.histories:.2g} histories takes about {seconds / 60:.0f} minutes "
            f"(at {WALK_RATE:,.0f} histories/s) and {estimate_memory(game, size) / 2**30:.2g} GB; the tree is "
            "cached on disk afterwards (PBMARL_TREE_CACHE)",
            stacklevel=2,
        )
    try:
        return _walk(game, game.recall_keys, max_nodes)
    except _RecallConflict as exc:
        key, player = exc.args
        game.__dict__["_recall_reason"] = f"the string {key!r} of player {player}"
        game.recall_keys = True
        return _walk(game, True, max_nodes)


def game_tree(game: Game, *, max_nodes: int | None = None) -> GameTree:
    """The tree of `game`, kept on the game object; loaded from the disk cache when a valid entry
    exists, else walked (and cached when the walk took more than `CACHE_AFTER_SECONDS`)."""
    from pbmarl.games.tree_cache import load_cached_tree, save_cached_tree

    tree: GameTree | None = game.__dict__.get("_tree_cache")
    if tree is None:
        check_exact(game)
        tree = load_cached_tree(game)
        if tree is None:
            start = time.perf_counter()
            tree = build_tree(game, max_nodes=max_nodes)
            if time.perf_counter() - start > CACHE_AFTER_SECONDS:
                save_cached_tree(game, tree)
        if tree.recall_keys:
            where = game.__dict__.get("_recall_reason", "its strings (the cached tree says so)")
            warnings.warn(
                f"{game.name!r}: information-state strings lack perfect recall ({where} is reached after different "
                "own histories or names another player's state too); information sets are keyed by each player's "
                "action-observation history instead (game.recall_keys = True)",
                stacklevel=3,
            )
        game.recall_keys = tree.recall_keys
        game.__dict__["_tree_cache"] = tree
    if max_nodes is not None and tree.num_nodes > max_nodes:
        raise NotExact(f"game {game.name!r} is too large for the exact engine: {tree.num_nodes:,} histories, more "
                       f"than max_nodes={max_nodes:,}; use a sampling evaluator (pb.RolloutPool) instead")
    return tree


def estimate_tree_size(game: Game, *, probes: int = 4096, seed: int = 0) -> float:
    """Estimated number of histories (stratified Knuth estimate, `pbmarl.games.tree_size`)."""
    return estimate_size(game, probes=probes, seed=seed).histories
