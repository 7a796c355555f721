"""Exact payoffs, best responses and NashConv as pure ndarray functions over a `GameTree`.

Everything here works on terminal reach: ``reach[p]`` is ``[n_p, Z]`` (one row per
policy of player p) or ``[Z]`` (one, possibly mixed, strategy), the probability
that player p's own actions lead to each terminal history (`pbmarl.evaluation.realization`).
The chance probability and the returns come from the tree, so the expected payoff
of a profile is ``sum_z chance(z) * returns(z) * prod_p reach[p](z)``: for two
players a matrix product gives every cell of a payoff table at once.

Example:
    >>> U = expected_payoffs(tree, [R0, R1])                  # [n0, n1, 2]  # doctest: +SKIP
    >>> value, br = best_response_values(tree, 0, opponent_reach(tree, 0, [r0, r1]))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.tree import GameTree

#: how many floats an intermediate ``[rows, Z]`` array may hold before work is chunked
_CHUNK_FLOATS = 1 << 22

#: actions whose value is within ``TIE_TOL * max(1, |best|)`` of the best count as tied
TIE_TOL = 1e-12


def terminal_weights(tree: GameTree) -> np.ndarray:
    """``chance_reach[z] * returns[z, k]``: ``[Z, P]``."""
    return tree.chance_reach[:, None] * tree.returns


def _zero_sum(tree: GameTree) -> bool:
    """Whether the returns of every terminal sum to exactly zero (then one payoff needs no product)."""
    return bool(np.all(tree.returns.sum(axis=1) == 0.0))


def _check_reaches(tree: GameTree, reaches: Sequence[np.ndarray], ndim: int) -> list[np.ndarray]:
    if len(reaches) != tree.num_players:
        raise ValueError(f"expected terminal reach for {tree.num_players} players, got {len(reaches)}")
    out = []
    Z = tree.num_terminals
    for p, r in enumerate(reaches):
        a = np.asarray(r, dtype=float)
        if a.ndim != ndim or a.shape[-1] != Z:
            want = f"[n_{p}, {Z}]" if ndim == 2 else f"[{Z}]"
            raise ValueError(f"terminal reach of player {p} must have shape {want}, got {a.shape}")
        out.append(a)
    return out


def expected_payoffs(tree: GameTree, reaches: Sequence[np.ndarray]) -> np.ndarray:
    """Payoffs of every profile: ``[n_0, ..., n_{P-1}, P]`` from ``reaches[p]`` of shape ``[n_p, Z]``.

    Two players: ``U[:, :, k] = (R_0 * w_k) @ R_1.T`` with ``w_k = chance * returns[:, k]``
    (in a zero-sum game the last player's payoffs are minus the sum of the others').
    More players: the first P-1 players' reach is combined row by row (chunked to
    bound memory), then one matrix product with the last player's.
    """
    R = _check_reaches(tree, reaches, 2)
    W = terminal_weights(tree)
    P, Z = tree.num_players, tree.num_terminals
    sizes = tuple(len(r) for r in R)
    if P == 1:
        return R[0] @ W
    big = int(np.argmax(sizes))
    if P > 2 and sizes[big] > sizes[-1]:
        # the lead players' rows are multiplied out ([prod of their sizes, Z]), so the player with the
        # most rows goes last: a new member of the last player then costs O(n^(P-2) Z), not O(n^(P-1) Z)
        order = [p for p in range(P) if p != big] + [big]
        U = expected_payoffs(tree, [R[p] for p in order])
        return np.transpose(U, [order.index(p) for p in range(P)] + [P])
    if P > 2:
        # terminals that some player's rows never reach add nothing (a new deterministic member reaches
        # a fraction of them): their columns are dropped before the rows are multiplied out
        live = np.ones(Z, dtype=bool)
        for r in R:
            live &= r.any(axis=0)
        if live.sum() < 0.75 * Z:
            cols = np.flatnonzero(live)
            R, W, Z = [r[:, cols] for r in R], W[cols], len(cols)
    last = R[-1]
    lead_sizes = sizes[:-1]
    n_lead = int(np.prod(lead_sizes))
    out = np.empty((n_lead, sizes[-1], P))
    if n_lead == 0 or sizes[-1] == 0:
        return out.reshape(sizes + (P,))
    rows = max(1, _CHUNK_FLOATS // max(Z, 1))
    lead_index = np.indices(lead_sizes).reshape(P - 1, -1)  # [P-1, n_lead]
    computed = range(P - 1) if _zero_sum(tree) else range(P)
    for start in range(0, n_lead, rows):
        if P == 2:
            left = R[0][start:start + rows]
        else:
            idx = lead_index[:, start:start + rows]
            left = R[0][idx[0]]
            for p in range(1, P - 1):
                left = left * R[p][idx[p]]
        for k in computed:
            w = np.ascontiguousarray(W[:, k])
            # weight whichever side has fewer rows: a new member against everyone costs O(n Z)
            if len(left) <= len(last):
                out[start:start + rows, :, k] = (left * w) @ last.T
            else:
                out[start:start + rows, :, k] = left @ (last * w).T
    if len(computed) < P:  # zero-sum: the last player's payoff is minus the others'
        out[..., P - 1] = -out[..., : P - 1].sum(axis=-1)
    return out.reshape(sizes + (P,))


def cell_payoffs(tree: GameTree, reaches: Sequence[np.ndarray], cells: np.ndarray) -> np.ndarray:
    """Payoffs ``[m, P]`` of the `m` profiles ``cells`` (``[m, P]`` member indices), chunked."""
    R = _check_reaches(tree, reaches, 2)
    cells = np.asarray(cells, dtype=np.int64).reshape(-1, tree.num_players)
    W = terminal_weights(tree)
    out = np.empty((len(cells), tree.num_players))
    rows = max(1, _CHUNK_FLOATS // max(tree.num_terminals, 1))
    for start in range(0, len(cells), rows):
        c = cells[start:start + rows]
        prod = R[0][c[:, 0]]
        for p in range(1, tree.num_players):
            prod = prod * R[p][c[:, p]]
        out[start:start + rows] = prod @ W
    return out


def payoffs_where(tree: GameTree, reaches: Sequence[np.ndarray], mask: np.ndarray) -> np.ndarray:
    """Payoffs of the profiles where `mask` (``[n_0, ..., n_{P-1}]`` bool) is True; NaN elsewhere.

    Works in blocks: for each player, the members whose whole slice is masked (a
    new population member, say) are computed against everyone with one matrix
    product; whatever is left is computed with one product over its bounding box
    when it fills a quarter of it or more, else cell by cell. Adding one member
    per player and filling therefore costs O(n * Z), not O(n^2 * Z).
    """
    R = _check_reaches(tree, reaches, 2)
    P = tree.num_players
    sizes = tuple(len(r) for r in R)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != sizes:
        raise ValueError(f"mask must have shape {sizes} (members per player), got {mask.shape}")
    out = np.full(sizes + (P,), np.nan)
    if not mask.any():
        return out
    if mask.all():
        return expected_payoffs(tree, R)
    done = np.zeros(sizes, dtype=bool)
    for p in range(P):
        others = tuple(q for q in range(P) if q != p)
        rows = np.flatnonzero(mask.all(axis=others) & ~done.all(axis=others))
        if len(rows) == 0:
            continue
        index: list[slice | np.ndarray] = [slice(None)] * P
        index[p] = rows
        block = expected_payoffs(tree, [R[q] if q != p else R[p][rows] for q in range(P)])
        out[tuple(index)] = block
        done[tuple(index)] = True
    rest = mask & ~done
    if rest.any():
        cells = np.argwhere(rest)
        box = [np.unique(cells[:, p]) for p in range(P)]
        if len(cells) * 4 >= np.prod([len(b) for b in box]):  # dense enough: one product over the box
            block = expected_payoffs(tree, [R[p][box[p]] for p in range(P)])
            out[np.ix_(*box)] = np.where(rest[np.ix_(*box)][..., None], block, out[np.ix_(*box)])
        else:
            out[tuple(cells.T)] = cell_payoffs(tree, R, cells)
    return out


def profile_values(tree: GameTree, reach: Sequence[np.ndarray]) -> np.ndarray:
    """Expected returns ``[P]`` of one profile given each player's terminal reach ``[Z]``."""
    r = _check_reaches(tree, reach, 1)
    prod = tree.chance_reach.copy()
    for rp in r:
        prod *= rp
    return prod @ tree.returns


def opponent_reach(tree: GameTree, player: int, reach: Sequence[np.ndarray | None]) -> np.ndarray:
    """``chance_reach * prod_{q != player} reach[q]``: ``[Z]``; ``reach[player]`` is ignored (may be None)."""
    if len(reach) != tree.num_players:
        raise ValueError(f"expected terminal reach for {tree.num_players} players, got {len(reach)}")
    out = tree.chance_reach.copy()
    for q, r in enumerate(reach):
        if q == player:
            continue
        a = np.asarray(r, dtype=float)
        if a.shape != out.shape:
            raise ValueError(f"terminal reach of player {q} must have shape {out.shape}, got {a.shape}")
        out *= a
    return out


def best_response_values(tree: GameTree, player: int, opp_reach_terminal: np.ndarray) -> tuple[float, np.ndarray]:
    """Best-response value and a pure best response of `player` against fixed opponents.

    Args:
        tree: the game tree.
        player: the best-responding player.
        opp_reach_terminal: ``[Z]``, ``chance_reach * prod_{q != player} reach_q`` at each terminal
            (`opponent_reach`).

    Returns:
        ``(value, br_table)``: the expected return of the best response, and ``[S_p, A]``
        one-hot rows on legal actions. One backward pass over the player's information
        sets, deepest first: a sequence (I, a) is worth the weight of the terminals it
        ends at plus the values of the information sets that follow it; ``V(I)`` is the
        max over legal actions. Ties go to the lowest action index among those within
        ``TIE_TOL * max(1, |V(I)|)`` of the max, so information sets the opponents never
        reach (all actions worth 0) get the lowest legal action: deterministic.
    """
    infos = tree.infosets[player]
    S, A = infos.size, tree.num_actions
    w = np.asarray(opp_reach_terminal, dtype=float)
    if w.shape != (tree.num_terminals,):
        raise ValueError(f"opp_reach_terminal must have shape [{tree.num_terminals}], got {w.shape}")
    seq_value = np.bincount(tree.terminal_seq[player], weights=w * tree.returns[:, player], minlength=1 + S * A)
    q_all = seq_value[1:].reshape(S, A)  # a view: children's values are added into it below
    br = np.zeros((S, A))
    for level in reversed(infos.levels):
        legal = infos.legal[level]
        q = np.where(legal, q_all[level], -np.inf)
        best = q.max(axis=1)
        tied = q >= (best - TIE_TOL * np.maximum(1.0, np.abs(best)))[:, None]
        choice = np.argmax(tied, axis=1)
        br[level, choice] = 1.0
        np.add.at(seq_value, infos.parent_seq[level], best)
    return float(seq_value[0]), br


def nash_conv(tree: GameTree, reach: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Best-response values ``[P]`` and on-profile values ``[P]`` of a profile of (mixed) strategies.

    NashConv is ``(br_values - values).sum()``.
    """
    r = _check_reaches(tree, reach, 1)
    values = profile_values(tree, r)
    br_values = np.array([best_response_values(tree, p, opponent_reach(tree, p, r))[0] for p in range(tree.num_players)])
    return br_values, values
