"""The whole game tree of a small game as flat arrays (sequence form).

Built once per game by one walk. What it keeps is what every exact computation
needs and nothing per history: for each player, the information states (key,
observation tensor, legal mask, the player's own previous sequence); and for each
terminal history, the chance probability of reaching it, its returns and, per
player, the last sequence (information state, action) the player took on the way.

Sequences of player p are numbered ``0`` (the empty sequence) and
``1 + infoset * num_actions + action``, so a realisation plan is a flat vector of
length ``1 + S_p * num_actions``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game


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

    @property
    def num_terminals(self) -> int:
        return len(self.chance_reach)

    def num_sequences(self, player: int) -> int:
        return 1 + self.infosets[player].size * self.num_actions


class _Builder:
    def __init__(self, game: Game) -> None:
        self.game = game
        P = game.num_players
        self.keys: list[list[str]] = [[] for _ in range(P)]
        self.index: list[dict[str, int]] = [{} for _ in range(P)]
        self.obs: list[list[np.ndarray]] = [[] for _ in range(P)]
        self.legal: list[list[np.ndarray]] = [[] for _ in range(P)]
        self.parent: list[list[int]] = [[] for _ in range(P)]
        self.depth: list[list[int]] = [[] for _ in range(P)]

    def infoset(self, state: object, player: int, parent_seq: int) -> int:
        key = self.game.info_key(state, player)
        idx = self.index[player].get(key)
        if idx is None:
            idx = len(self.keys[player])
            self.index[player][key] = idx
            self.keys[player].append(key)
            self.obs[player].append(self.game.observation(state, player))
            self.legal[player].append(self.game.legal_mask(state, player))
            self.parent[player].append(parent_seq)
            A = self.game.num_actions
            self.depth[player].append(0 if parent_seq == 0 else self.depth[player][(parent_seq - 1) // A] + 1)
        elif self.parent[player][idx] != parent_seq:
            raise ValueError(
                f"game {self.game.name!r} lacks perfect recall: information state {key!r} of player "
                f"{player} is reached after different own histories; the exact engine needs perfect recall"
                + (" (load goofspiel with imp_info=True)" if self.game.name.startswith("goofspiel") else "")
            )
        return idx

    def finish(self, player: int) -> PlayerInfosets:
        depth = np.asarray(self.depth[player], dtype=np.int64)
        levels = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)] if len(depth) else []
        shape = (0,) + tuple(self.game.observation_shape)
        return PlayerInfosets(
            keys=self.keys[player],
            index=self.index[player],
            obs=np.stack(self.obs[player]).astype(np.float32) if self.obs[player] else np.zeros(shape, np.float32),
            legal=np.stack(self.legal[player]) if self.legal[player] else np.zeros((0, self.game.num_actions), bool),
            parent_seq=np.asarray(self.parent[player], dtype=np.int64),
            depth=depth,
            levels=levels,
        )


def _child(state: object, action: int) -> object:
    child = state.clone()  # type: ignore[attr-defined]
    child.apply_action(action)  # type: ignore[attr-defined]
    return child


def estimate_tree_size(game: Game, *, probes: int = 64, seed: int = 0) -> float:
    """Knuth's unbiased estimate of the number of histories: mean over random paths of the
    summed products of branching factors along the path. Cheap: `probes` random playouts."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(probes):
        state, product, count = game.new_initial_state(), 1.0, 1.0
        while not state.is_terminal():  # type: ignore[attr-defined]
            if state.is_chance_node():  # type: ignore[attr-defined]
                actions = [a for a, p in state.chance_outcomes() if p > 0]  # type: ignore[attr-defined]
                state.apply_action(actions[rng.integers(len(actions))])  # type: ignore[attr-defined]
                product *= len(actions)
            elif state.is_simultaneous_node():  # type: ignore[attr-defined]
                legal = [state.legal_actions(p) or [0] for p in range(game.num_players)]  # type: ignore[attr-defined]
                state.apply_actions([a[rng.integers(len(a))] for a in legal])  # type: ignore[attr-defined]
                product *= float(np.prod([len(a) for a in legal]))
            else:
                legal = state.legal_actions(state.current_player())  # type: ignore[attr-defined]
                state.apply_action(legal[rng.integers(len(legal))])  # type: ignore[attr-defined]
                product *= len(legal)
            count += product
        total += count
    return total / probes


def build_tree(game: Game, *, max_nodes: int = 5_000_000) -> GameTree:
    """Walk the whole tree of `game` once; raise if it has more than `max_nodes` histories.

    A cheap estimate of the tree size is made first, so a game far too large fails in
    milliseconds rather than after walking `max_nodes` histories.
    """
    if not game.enumerable:
        raise ValueError(f"game {game.name!r} cannot be enumerated; use a sampling evaluator (pb.RolloutPool)")
    estimate = estimate_tree_size(game)
    if estimate > 20 * max_nodes:
        raise ValueError(
            f"game {game.name!r} has about {estimate:.2g} histories: too large for the exact engine "
            f"(limit {max_nodes:,}); use a sampling evaluator (pb.RolloutPool) and an RL oracle (pb.DQN, pb.PPO)"
        )
    P, A = game.num_players, game.num_actions
    builder = _Builder(game)
    reach: list[float] = []
    returns: list[list[float]] = []
    term_seq: list[tuple[int, ...]] = []
    stack: list[tuple[object, float, tuple[int, ...]]] = [(game.new_initial_state(), 1.0, (0,) * P)]
    nodes = 0
    while stack:
        state, prob, seqs = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ValueError(
                f"game {game.name!r} has more than {max_nodes:,} histories: too large for the exact engine; "
                "use a sampling evaluator (pb.RolloutPool) instead"
            )
        if state.is_terminal():  # type: ignore[attr-defined]
            reach.append(prob)
            returns.append(list(state.returns()))  # type: ignore[attr-defined]
            term_seq.append(seqs)
        elif state.is_chance_node():  # type: ignore[attr-defined]
            for action, p in state.chance_outcomes():  # type: ignore[attr-defined]
                if p > 0:
                    stack.append((_child(state, action), prob * p, seqs))
        elif state.is_simultaneous_node():  # type: ignore[attr-defined]
            choices = []
            for player in range(P):
                legal = state.legal_actions(player)  # type: ignore[attr-defined]
                if legal:
                    I = builder.infoset(state, player, seqs[player])
                    choices.append([(player, a, 1 + I * A + a) for a in legal])
                else:
                    choices.append([(player, 0, seqs[player])])
            for joint in itertools.product(*choices):
                child = state.clone()  # type: ignore[attr-defined]
                child.apply_actions([a for _, a, _ in joint])
                stack.append((child, prob, tuple(s for _, _, s in joint)))
        else:
            player = state.current_player()  # type: ignore[attr-defined]
            I = builder.infoset(state, player, seqs[player])
            for a in state.legal_actions(player):  # type: ignore[attr-defined]
                new = list(seqs)
                new[player] = 1 + I * A + a
                stack.append((_child(state, a), prob, tuple(new)))
    return GameTree(
        num_players=P,
        num_actions=A,
        infosets=tuple(builder.finish(p) for p in range(P)),
        chance_reach=np.asarray(reach, dtype=float),
        returns=np.asarray(returns, dtype=float).reshape(len(reach), P),
        terminal_seq=np.asarray(term_seq, dtype=np.int64).reshape(len(reach), P).T.copy(),
        num_nodes=nodes,
    )
