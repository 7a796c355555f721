"""A small game's history tree as flat arrays, for the runner's all-numpy engine.

Where a game's tree fits in memory (Kuhn, Leduc, small Goofspiel, matrix games),
stepping hundreds of instances needs no game states at all: an instance is a node
index, a transition is ``children[node, action]``, chance is a row of cumulative
probabilities, and a policy, evaluated once over every information state of a
seat, is a table indexed by ``infoset[node, seat]``. This module builds those
arrays with one walk of the tree (cached per game object) and refuses games whose
trees are too large or whose observations are not a function of the info key.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbmarl.games.base import Game

#: node kinds
DECISION, CHANCE_NODE, SIMULTANEOUS_NODE, TERMINAL_NODE = 0, 1, 2, 3

#: default node budget for compiling a tree (Leduc poker has 9,457 nodes)
DEFAULT_MAX_NODES = 100_000
#: simultaneous nodes index children by joint action; refuse games with more joint actions than this
MAX_JOINT_ACTIONS = 4096


class NotCompilable(Exception):
    """The game's tree cannot be compiled (too large, or obs not a function of the info key)."""


@dataclass(frozen=True, eq=False)
class CompiledTree:
    """Flat arrays of a game tree; see the module doc.

    ``infoset[n, p]`` is player p's information-state index at node n (-1 where p
    does not act); ``reward[n]`` is what every player receives on arriving at n;
    at simultaneous nodes ``children`` is indexed by ``sum(a_p * strides[p])``.
    """

    num_players: int
    num_actions: int
    kind: np.ndarray  # [N] int8
    player: np.ndarray  # [N] int64, acting player at DECISION nodes, else -1
    infoset: np.ndarray  # [N, P] int64
    children: np.ndarray  # [N, W] int64, -1 where there is no child
    chance_cdf: np.ndarray  # [N, W] float64, cumulative chance probabilities (rows end at exactly 1)
    reward: np.ndarray  # [N, P] float64
    strides: np.ndarray  # [P] int64
    keys: tuple[list[str], ...]
    obs: tuple[np.ndarray, ...]  # per player [S_p, *observation_shape] float32
    legal: tuple[np.ndarray, ...]  # per player [S_p, A] bool

    @property
    def num_nodes(self) -> int:
        return len(self.kind)

    @property
    def has_simultaneous(self) -> bool:
        return bool(np.any(self.kind == SIMULTANEOUS_NODE))


_CACHE: weakref.WeakKeyDictionary[Game, CompiledTree | NotCompilable] = weakref.WeakKeyDictionary()


def compiled_tree(game: Game, *, max_nodes: int = DEFAULT_MAX_NODES) -> CompiledTree:
    """The compiled tree of `game`, built once per game object; raises `NotCompilable`."""
    cached = _CACHE.get(game)
    if isinstance(cached, CompiledTree):
        return cached
    if isinstance(cached, NotCompilable) and cached.args[1] >= max_nodes:
        # a fresh exception: re-raising the cached one would grow its traceback by this call's frames, and keep
        # them (their locals: a learner's snapshot, a best response's replay buffer) for as long as the game lives
        raise NotCompilable(*cached.args)
    if not game.enumerable:
        raise NotCompilable(f"{game.name!r} is not enumerable", max_nodes)
    try:
        tree = _compile(game, max_nodes)
    except NotCompilable as exc:
        _CACHE[game] = NotCompilable(*exc.args)  # its message only, not the frames it was raised through
        raise
    _CACHE[game] = tree
    return tree


def _compile(game: Game, max_nodes: int) -> CompiledTree:
    P, A = game.num_players, game.num_actions
    if not game.turn_based and A**P > MAX_JOINT_ACTIONS:
        raise NotCompilable(f"{game.name!r} has {A}^{P} joint actions", max_nodes)
    shape = tuple(game.observation_shape)
    strides = np.array([A ** (P - 1 - p) for p in range(P)], dtype=np.int64)
    kinds: list[int] = []
    players: list[int] = []
    infosets: list[list[int]] = []
    rewards: list[Any] = []
    edges: list[tuple[int, int, int, float]] = []  # (parent, slot, child, chance prob)
    keys: list[list[str]] = [[] for _ in range(P)]
    index: list[dict[str, int]] = [{} for _ in range(P)]
    obs: list[list[np.ndarray]] = [[] for _ in range(P)]
    legal: list[list[np.ndarray]] = [[] for _ in range(P)]

    def infoset_of(state: Any, p: int) -> int:
        key = game.info_key(state, p)
        o = np.asarray(game.observation(state, p), dtype=np.float32).reshape(shape)
        m = np.zeros(A, dtype=bool)
        m[state.legal_actions(p)] = True
        i = index[p].get(key)
        if i is None:
            i = index[p][key] = len(keys[p])
            keys[p].append(key)
            obs[p].append(o)
            legal[p].append(m)
        elif not (np.array_equal(obs[p][i], o) and np.array_equal(legal[p][i], m)):
            raise NotCompilable(f"{game.name!r}: observation or legal actions differ within info state {key!r}", max_nodes)
        return i

    def new_node(state: Any, reward: Any) -> int:
        if len(kinds) >= max_nodes:
            raise NotCompilable(f"{game.name!r} has more than {max_nodes} nodes", max_nodes)
        kinds.append(-1)
        players.append(-1)
        infosets.append([-1] * P)
        rewards.append(reward)
        return len(kinds) - 1

    root_state = game.new_initial_state()
    stack = [(new_node(root_state, [0.0] * P), root_state)]
    while stack:
        n, state = stack.pop()
        if state.is_terminal():
            kinds[n] = TERMINAL_NODE
            continue
        if state.is_chance_node():
            kinds[n] = CHANCE_NODE
            for slot, (a, prob) in enumerate(state.chance_outcomes()):
                child = state.clone()
                child.apply_action(int(a))
                c = new_node(child, child.rewards())
                edges.append((n, slot, c, float(prob)))
                stack.append((c, child))
        elif state.is_simultaneous_node():
            kinds[n] = SIMULTANEOUS_NODE
            acting = [p for p in range(P) if len(state.legal_actions(p)) > 0]
            for p in acting:
                infosets[n][p] = infoset_of(state, p)
            choices = [state.legal_actions(p) if p in acting else [0] for p in range(P)]
            for joint in _product(choices):
                child = state.clone()
                child.apply_actions([int(a) for a in joint])
                c = new_node(child, child.rewards())
                edges.append((n, int(np.dot(joint, strides)), c, 0.0))
                stack.append((c, child))
        else:
            kinds[n] = DECISION
            p = int(state.current_player())
            players[n] = p
            infosets[n][p] = infoset_of(state, p)
            for a in state.legal_actions(p):
                child = state.clone()
                child.apply_action(int(a))
                c = new_node(child, child.rewards())
                edges.append((n, int(a), c, 0.0))
                stack.append((c, child))

    N = len(kinds)
    e = np.array([(p, s, c) for p, s, c, _ in edges], dtype=np.int64).reshape(-1, 3)
    width = max(int(e[:, 1].max()) + 1 if len(e) else 1, A)
    children = np.full((N, width), -1, dtype=np.int64)
    children[e[:, 0], e[:, 1]] = e[:, 2]
    kind = np.array(kinds, dtype=np.int8)
    probs = np.zeros((N, width))
    probs[e[:, 0], e[:, 1]] = [prob for *_, prob in edges]
    cdf = np.cumsum(probs, axis=1)
    chance = kind == CHANCE_NODE
    cdf[chance] /= cdf[chance][:, -1:]
    cdf[chance, -1] = 1.0
    return CompiledTree(
        num_players=P,
        num_actions=A,
        kind=kind,
        player=np.array(players, dtype=np.int64),
        infoset=np.array(infosets, dtype=np.int64).reshape(N, P),
        children=children,
        chance_cdf=cdf,
        reward=np.array(rewards, dtype=float).reshape(N, P),
        strides=strides,
        keys=tuple(keys),
        obs=tuple(np.stack(o).astype(np.float32) if o else np.zeros((0,) + shape, np.float32) for o in obs),
        legal=tuple(np.stack(m) if m else np.zeros((0, A), bool) for m in legal),
    )


def _product(choices: list[list[int]]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for options in choices:
        out = [prefix + (int(a),) for prefix in out for a in options]
    return out
