"""The runner's all-numpy engine over a `CompiledTree` (see `pbmarl.rollout.runner`).

Each distinct policy is asked ONCE for the action probabilities of every
information state of the seats it plays (one batched forward pass); the rows of
all (seat, member) tables are stacked into one cumulative table, so a step over
hundreds of instances is a handful of array operations whatever the number of
policies: gather rows, compare against uniforms, index the children.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.rollout.compiled import CHANCE_NODE, SIMULTANEOUS_NODE, TERMINAL_NODE, CompiledTree
from pbmarl.rollout.records import EpisodeBook, RunOutput, Seat
from pbmarl.rollout.trajectories import TransitionBuffer


def policy_tables(tree: CompiledTree, seats: Sequence[Seat], cache: dict[Any, Any]) -> dict[tuple[int, int], np.ndarray]:
    """``{(seat, member): probs [S_seat, A]}`` with one policy call per distinct policy.

    `cache` maps ``(id(policy), seat)`` to ``(policy, version, probs)`` and is reused
    while the policy object and its version are unchanged.
    """
    users: dict[int, tuple[Policy, list[int]]] = {}
    for p, seat in enumerate(seats):
        for pi in seat.policies:
            entry = users.setdefault(id(pi), (pi, []))
            if p not in entry[1]:
                entry[1].append(p)
    per_policy: dict[tuple[int, int], np.ndarray] = {}
    for pid, (pi, players) in users.items():
        todo = []
        for p in players:
            hit = cache.get((pid, p))
            if hit is not None and hit[0] is pi and hit[1] == pi.version:
                per_policy[(pid, p)] = hit[2]
            else:
                todo.append(p)
        if not todo:
            continue
        obs = np.concatenate([tree.obs[p] for p in todo])
        legal = np.concatenate([tree.legal[p] for p in todo])
        keys = [k for p in todo for k in tree.keys[p]] if pi.needs_keys else None
        probs = pi.action_probabilities(obs, legal, keys) if len(legal) else np.zeros((0, tree.num_actions))
        start = 0
        for p in todo:
            size = len(tree.keys[p])
            per_policy[(pid, p)] = probs[start:start + size]
            cache[(pid, p)] = (pi, pi.version, per_policy[(pid, p)])
            start += size
    return {(p, m): per_policy[(id(pi), p)] for p, seat in enumerate(seats) for m, pi in enumerate(seat.policies)}


def run_tree(
    game: Game,
    tree: CompiledTree,
    seats: Sequence[Seat],
    book: EpisodeBook,
    rng: np.random.Generator,
    *,
    num_envs: int,
    learner: int | None,
    tables: dict[Any, Any],
) -> RunOutput:
    """Play `book`'s episodes on the compiled tree; see the module doc."""
    P = tree.num_players
    by_member = policy_tables(tree, seats, tables)
    width = max(len(seat.policies) for seat in seats)
    offset = np.zeros((P, width), dtype=np.int64)
    rows, total = [], 0
    for (p, m), probs in by_member.items():
        offset[p, m] = total
        rows.append(probs)
        total += len(probs)
    prob_all = np.concatenate(rows) if rows else np.zeros((0, tree.num_actions))
    cdf_all = np.cumsum(prob_all, axis=1)
    last = cdf_all[:, -1:]
    cdf_all = np.divide(cdf_all, last, out=np.ones_like(cdf_all), where=last > 0)
    cdf_all[:, -1] = 1.0  # u < 1 never passes the end: no action beyond the last with mass

    kind, player, infoset, children = tree.kind, tree.player, tree.infoset, tree.children
    chance_cdf, reward, strides = tree.chance_cdf, tree.reward, tree.strides
    simultaneous = tree.has_simultaneous
    N, active, ret, length, member, episode, last_t = book.slots(num_envs)
    node = np.zeros(N, dtype=np.int64)
    buf = TransitionBuffer(tree.num_actions, tuple(game.observation_shape)) if learner is not None else None

    def start(idx: np.ndarray) -> None:
        k = book.may_start(len(idx))
        active[idx[k:]] = False
        idx = idx[:k]
        if k == 0:
            return
        ids, members = book.start(k, rng)
        node[idx] = 0
        ret[idx] = 0.0
        length[idx] = 0
        member[idx] = members
        episode[idx] = ids
        last_t[idx] = -1
        active[idx] = True

    start(np.arange(N))
    while True:
        act = np.flatnonzero(active)
        if len(act) == 0:
            break
        k = kind[node[act]]
        ch = act[k == CHANCE_NODE]
        while len(ch):
            nd = node[ch]
            slot = (rng.random(len(ch))[:, None] >= chance_cdf[nd]).sum(axis=1)
            nxt = children[nd, slot]
            node[ch] = nxt
            r = reward[nxt]
            ret[ch] += r
            if buf is not None:
                buf.add_reward(last_t[ch], r[:, learner])
            ch = ch[kind[nxt] == CHANCE_NODE]
        k = kind[node[act]]
        term = act[k == TERMINAL_NODE]
        if len(term):
            book.finish(episode[term], ret[term], length[term])
            if buf is not None:
                buf.end(last_t[term])
            start(term)
            continue  # restarted instances may begin at a chance node
        nd = node[act]
        u = rng.random((len(act), P if simultaneous else 1))
        if not simultaneous:
            pl = player[nd]
            s = infoset[nd, pl]
            row = offset[pl, member[act, pl]] + s
            a = (u >= cdf_all[row]).sum(axis=1)
            slot = a
            if buf is not None and learner is not None:
                mine = pl == learner
                if mine.any():
                    _record(buf, tree, learner, act[mine], episode, s[mine], a[mine], prob_all[row[mine], a[mine]], last_t)
        else:
            slot = np.zeros(len(act), dtype=np.int64)
            for p in range(P):
                s = infoset[nd, p]
                acting = s >= 0
                row = offset[p, member[act, p]] + np.maximum(s, 0)
                a = np.where(acting, (u[:, p:p + 1] >= cdf_all[row]).sum(axis=1), 0)
                slot += np.where(kind[nd] == SIMULTANEOUS_NODE, a * strides[p], np.where(acting, a, 0))
                if buf is not None and p == learner and acting.any():
                    _record(buf, tree, p, act[acting], episode, s[acting], a[acting], prob_all[row[acting], a[acting]], last_t)
        nxt = children[nd, slot]
        node[act] = nxt
        r = reward[nxt]
        ret[act] += r
        length[act] += 1
        book.steps += len(act)
        if buf is not None:
            buf.add_reward(last_t[act], r[:, learner])
            book.learner_steps = buf.size

    returns, lengths = book.results()
    traj = buf.build(returns, lengths, book.steps, learner) if buf is not None and learner is not None else None
    return RunOutput(returns, lengths, book.steps, traj)


def _record(buf: TransitionBuffer, tree: CompiledTree, p: int, idx: np.ndarray, episode: np.ndarray,
            s: np.ndarray, a: np.ndarray, prob: np.ndarray, last_t: np.ndarray) -> None:
    last_t[idx] = buf.add(episode[idx], tree.obs[p][s], tree.legal[p][s], a, prob)
