"""Policies -> behaviour tables -> realisation plans -> terminal reach.

Pure ndarray functions over a `GameTree` (see `pbmarl.games.tree`):

* `policy_tables` asks a policy, in ONE batched call, for its action probabilities
  at every information state of a player: a behaviour table ``[S_p, A]``.
* `realization_plans` turns behaviour tables ``[n, S_p, A]`` into realisation plans
  ``[n, 1 + S_p * A]``: the probability that the player's own actions follow each
  sequence, ``x[0] = 1`` and ``x[1 + I*A + a] = x[parent_seq(I)] * pi(a | I)``.
* `terminal_reach` reads the plans at each terminal history's last sequence of
  the player: ``[n, Z]``. A mixed strategy's reach is the weighted sum of its
  members' (`mixture_reach`): realisation plans are linear.

Example:
    >>> tree = game.tree()  # doctest: +SKIP
    >>> tables = policy_tables([pi0, pi1], tree, player=0)        # [2, S_0, A]  # doctest: +SKIP
    >>> plans = realization_plans(tables, tree.infosets[0], tree.num_actions)  # doctest: +SKIP
    >>> reach = terminal_reach(plans, tree, player=0)             # [2, Z]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from pbmarl.policies.base import Policy

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.tree import GameTree, PlayerInfosets


def _check_player(tree: GameTree, player: int) -> int:
    if isinstance(player, (bool, np.bool_)) or not isinstance(player, (int, np.integer)):
        raise TypeError(f"player must be an int in 0..{tree.num_players - 1}, got {player!r}")
    if not 0 <= player < tree.num_players:
        raise ValueError(f"player {player} is out of range 0..{tree.num_players - 1}")
    return int(player)


def _one_table(policy: Policy, tree: GameTree, player: int) -> np.ndarray:
    if not isinstance(policy, Policy):
        raise TypeError(
            f"expected a pbmarl Policy, got {type(policy).__name__}: {policy!r} "
            "(a Mixture is a mixed strategy, not a behaviour table: use its members)"
        )
    if policy.num_actions != tree.num_actions:
        raise ValueError(f"{policy!r} has {policy.num_actions} actions but the game has {tree.num_actions}")
    infos = tree.infosets[player]
    if infos.size == 0:
        return np.zeros((0, tree.num_actions))
    probs = policy.action_probabilities(infos.obs, infos.legal, infos.keys)
    return np.asarray(probs, dtype=float)


@overload
def policy_tables(policy: Policy, tree: GameTree, player: int) -> np.ndarray: ...
@overload
def policy_tables(policy: Sequence[Policy], tree: GameTree, player: int) -> np.ndarray: ...


def policy_tables(policy: Policy | Sequence[Policy], tree: GameTree, player: int) -> np.ndarray:
    """Behaviour table(s) of `player` over all of its information states.

    One batched `action_probabilities` call per policy, over every information
    state of the player (observations, legal masks and keys from the tree).

    Returns:
        ``[S_p, A]`` for one policy, ``[n, S_p, A]`` for a sequence of policies.
        Illegal actions have probability exactly zero.
    """
    player = _check_player(tree, player)
    if isinstance(policy, Policy):
        return _one_table(policy, tree, player)
    policies = list(policy)
    S, A = tree.infosets[player].size, tree.num_actions
    if not policies:
        return np.zeros((0, S, A))
    return np.stack([_one_table(p, tree, player) for p in policies])


def realization_plans(tables: np.ndarray, infosets: PlayerInfosets, num_actions: int) -> np.ndarray:
    """Realisation plans ``[n, 1 + S*A]`` of behaviour tables ``[n, S, A]`` (or one ``[S, A]``).

    Computed level by level (information sets grouped by the player's own depth),
    vectorised over all information sets of a level and all `n` policies at once.
    A 2-D input gives a 1-D plan.
    """
    t = np.asarray(tables, dtype=float)
    single = t.ndim == 2
    if single:
        t = t[None]
    S, A = infosets.size, int(num_actions)
    if t.ndim != 3 or t.shape[1:] != (S, A):
        raise ValueError(f"tables must have shape [n, {S}, {A}] (policies, infosets, actions), got {np.shape(tables)}")
    n = t.shape[0]
    plans = np.zeros((n, 1 + S * A))
    plans[:, 0] = 1.0
    seq = plans[:, 1:].reshape(n, S, A)  # a view: writing it fills `plans`
    for level in infosets.levels:
        parent = plans[:, infosets.parent_seq[level]]  # [n, L]; parents lie at shallower levels, already set
        seq[:, level, :] = parent[:, :, None] * t[:, level, :]
    return plans[0] if single else plans


def terminal_reach(plans: np.ndarray, tree: GameTree, player: int) -> np.ndarray:
    """Each plan's probability of its own actions on the path to each terminal: ``[n, Z]`` (or ``[Z]``)."""
    player = _check_player(tree, player)
    plans = np.asarray(plans, dtype=float)
    expected = tree.num_sequences(player)
    if plans.shape[-1] != expected:
        raise ValueError(f"plans of player {player} must have {expected} sequences, got shape {plans.shape}")
    return plans[..., tree.terminal_seq[player]]


def mixture_reach(weights: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Terminal reach ``[Z]`` of the mixed strategy with `weights` ``[n]`` over members' reach ``[n, Z]``."""
    w = np.asarray(weights, dtype=float)
    r = np.asarray(reach, dtype=float)
    if w.ndim != 1 or r.ndim != 2 or len(w) != len(r):
        raise ValueError(f"weights [n] and reach [n, Z] must agree, got shapes {w.shape} and {r.shape}")
    return w @ r


def behaviour_from_plan(plan: np.ndarray, infosets: PlayerInfosets, num_actions: int) -> np.ndarray:
    """The behaviour table ``[S, A]`` realisation-equivalent to `plan` ``[1 + S*A]``.

    ``pi(a | I) = x(I, a) / x(parent_seq(I))``; uniform over the legal actions where
    the plan never reaches ``I`` (the choice there changes no outcome).
    """
    x = np.asarray(plan, dtype=float)
    S, A = infosets.size, int(num_actions)
    if x.shape != (1 + S * A,):
        raise ValueError(f"plan must have {1 + S * A} sequences, got shape {x.shape}")
    num = np.where(infosets.legal, x[1:].reshape(S, A), 0.0)
    total = num.sum(axis=1, keepdims=True)
    uniform = infosets.legal / np.maximum(infosets.legal.sum(axis=1, keepdims=True), 1)
    return np.where(total > 0, num / np.where(total > 0, total, 1.0), uniform)
