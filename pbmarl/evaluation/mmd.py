"""Magnetic mirror descent over the sequence form with dilated entropy, on a `GameTree`'s flat arrays.

MMD (Sokota et al., ICLR 2023, arXiv 2206.05825, section 4) updates each player's realisation
plan ``x`` by

    x_{t+1} = argmax_x  eta <g_t, x> - eta alpha D(x; z) - D(x; x_t),

where ``g_t`` is the gradient of the player's expected return (its sequence values against the
other player's plan), ``D`` the Bregman divergence of the dilated entropy
``psi(x) = sum_I x(parent(I)) sum_a pi(a|I) log pi(a|I)``, ``z`` the magnet, ``alpha`` the
temperature and ``eta`` the step size. Both players update at once from the same iterate. The
argmax solves ``argmin_x <h, x> + psi(x)`` with

    h = -(eta g_t + eta alpha grad psi(z) + grad psi(x_t)) / (1 + eta alpha),

which is a softmax per information set, deepest first, each set's value
``-logsumexp(-h_I)`` added to its parent sequence (`dilated_prox`). Without a given magnet the
regulariser is ``alpha psi(x)`` itself, as in OpenSpiel's ``MMDDilatedEnt`` (its minimiser is the
uniform policy; the last iterate converges to the alpha-reduced-normal-form QRE). With a magnet
``z`` it is ``alpha D(x; z)``. The automatic step size is OpenSpiel's: ``alpha / max|M|^2`` with
``M`` the sequence-form payoff matrix (chance included, duplicates summed).

Everything is vectorised over a level of information sets: one `bincount` per player for the
gradients, one softmax per level, then `realization_plans` top down.

Example:
    >>> solver = DilatedMMD(game.tree(), alpha=0.1)          # doctest: +SKIP
    >>> for _ in range(100):                                   # doctest: +SKIP
    ...     solver.step()
    >>> solver.gap(), solver.nash_conv()                       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pbmarl.evaluation.engine import nash_conv
from pbmarl.evaluation.realization import behaviour_from_plan, realization_plans
from pbmarl.evaluation.sequence_form import legal_sequences, sequence_payoffs

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.tree import GameTree, PlayerInfosets

__all__ = ["DilatedMMD", "auto_stepsize", "dilated_entropy", "dilated_prox", "entropy_gradient",
           "sequence_gradients"]


def sequence_gradients(tree: GameTree, plans: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each player's gradient of its own expected return over its sequences: ``[1 + S_p * A]`` each.

    ``g_p[s] = sum_{z: seq_p(z) = s} chance(z) u_p(z) prod_{q != p} x_q(seq_q(z))``: the matrix
    product ``M y`` of the sequence form, computed over terminals with one `bincount`.
    """
    reach = [np.asarray(x, dtype=float)[tree.terminal_seq[p]] for p, x in enumerate(plans)]
    out = []
    for p in range(tree.num_players):
        w = tree.chance_reach * tree.returns[:, p]
        for q in range(tree.num_players):
            if q != p:
                w = w * reach[q]
        out.append(np.bincount(tree.terminal_seq[p], weights=w, minlength=tree.num_sequences(p)))
    return out


def _parent_and_children(plan: np.ndarray, infos: PlayerInfosets, num_actions: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(plan, dtype=float)
    return x[infos.parent_seq], x[1:].reshape(infos.size, num_actions)


def entropy_gradient(plan: np.ndarray, infos: PlayerInfosets, num_actions: int) -> np.ndarray:
    """``log(x(I, a) / x(parent(I)))`` ``[S, A]`` on legal actions of reached information sets, 0 elsewhere.

    The gradient of the dilated entropy up to ``1 - (child information sets of (I, a))``, a term whose
    inner product with every realisation plan is the same constant, so it never moves the argmin.
    """
    parent, child = _parent_and_children(plan, infos, num_actions)
    live = infos.legal & (parent > 0)[:, None]
    out = np.zeros_like(child)
    ratio = np.divide(child, parent[:, None], out=np.ones_like(child), where=live)
    np.log(ratio, out=out, where=live)
    return out


def dilated_entropy(plan: np.ndarray, infos: PlayerInfosets, num_actions: int,
                    magnet_log: np.ndarray | None = None) -> float:
    """``psi(x) = sum_I x(parent(I)) sum_a pi(a|I) log pi(a|I)`` (negative entropy, dilated).

    With ``magnet_log`` (``log z`` ``[S, A]``) returns ``psi(x) - <grad psi(z), x>`` instead, the
    divergence to the magnet up to a constant. An action of probability 0 adds 0 (``0 log 0 = 0``): the
    regularised best response in `DilatedMMD.gap` underflows to such actions when alpha is small.
    """
    parent, child = _parent_and_children(plan, infos, num_actions)
    with np.errstate(divide="ignore"):  # log 0 = -inf where a child is 0; those terms are dropped below
        grad = entropy_gradient(plan, infos, num_actions)
    value = float(np.multiply(child, grad, out=np.zeros_like(child), where=child > 0).sum())
    if magnet_log is not None:
        value -= float((np.where(infos.legal, child, 0.0) * magnet_log).sum())
    return value


def dilated_prox(h: np.ndarray, infos: PlayerInfosets, num_actions: int) -> np.ndarray:
    """The behaviour table ``[S, A]`` of ``argmin_x <h, x> + psi(x)`` over the player's treeplex.

    `h` is ``[1 + S*A]`` (index 0, the empty sequence, is ignored). Deepest information sets
    first: ``pi_I = softmax(-h_I)`` over legal actions, and the set's optimal value
    ``-logsumexp(-h_I)`` is added to its parent sequence before the parent's level is solved.
    """
    S, A = infos.size, int(num_actions)
    g = np.array(h, dtype=float)
    q = g[1:].reshape(S, A)  # a view: children's values are added into it
    table = np.zeros((S, A))
    for level in reversed(infos.levels):
        legal = infos.legal[level]
        logits = np.where(legal, -q[level], -np.inf)
        top = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - top)
        total = e.sum(axis=1, keepdims=True)
        table[level] = e / total
        np.add.at(g, infos.parent_seq[level], -(top[:, 0] + np.log(total[:, 0])))
    return table


def payoff_scale(tree: GameTree) -> float:
    """``max |M|`` of the two-player sequence-form payoff matrix (chance included, duplicate pairs summed)."""
    M = sequence_payoffs(tree, (legal_sequences(tree, 0), legal_sequences(tree, 1)))
    M.sum_duplicates()
    return float(np.abs(M.data).max(initial=0.0))


def auto_stepsize(tree: GameTree, alpha: float) -> float:
    """OpenSpiel's automatic step size, ``alpha / max|M|^2``."""
    scale = payoff_scale(tree)
    return float(alpha) / scale**2 if scale > 0 else 0.0


class DilatedMMD:
    """Tabular MMD with dilated entropy for two-player zero-sum trees; see the module doc.

    Args:
        tree: the game tree (`Game.tree()`), two players, zero-sum.
        alpha: the temperature (weight of the magnet term), >= 0.
        stepsize: the step size ``eta``; None: ``alpha / max|M|^2`` (OpenSpiel's choice).
        magnet: None (the dilated entropy itself, OpenSpiel's regulariser) or one behaviour table
            ``[S_p, A]`` per player, positive on legal actions.
        plans: the starting realisation plans (default: the uniform policy's).
    """

    def __init__(self, tree: GameTree, *, alpha: float, stepsize: float | None = None,
                 magnet: Sequence[np.ndarray] | None = None, plans: Sequence[np.ndarray] | None = None) -> None:
        if tree.num_players != 2:
            raise ValueError(f"MMD is for two-player zero-sum games; this tree has {tree.num_players} players")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        self.tree, self.alpha = tree, float(alpha)
        self.stepsize = auto_stepsize(tree, self.alpha) if stepsize is None else float(stepsize)
        self.magnet_log: list[np.ndarray] | None = None
        self.set_magnet(magnet)
        if plans is None:
            plans = [realization_plans(i.legal / np.maximum(i.legal.sum(axis=1, keepdims=True), 1), i, tree.num_actions)
                     for i in tree.infosets]
        self.plans = [np.array(x, dtype=float) for x in plans]
        self.iterations = 0

    def set_magnet(self, magnet: Sequence[np.ndarray] | None) -> None:
        """Use these behaviour tables (one per player) as the magnet; None: the dilated entropy itself."""
        if magnet is None:
            self.magnet_log = None
            return
        logs = []
        for p, (table, infos) in enumerate(zip(magnet, self.tree.infosets)):
            t = np.asarray(table, dtype=float)
            if t.shape != (infos.size, self.tree.num_actions):
                raise ValueError(f"magnet of player {p} must have shape [{infos.size}, {self.tree.num_actions}], "
                                 f"got {t.shape}")
            if np.any(t[infos.legal] <= 0):
                raise ValueError(f"magnet of player {p} must be positive on every legal action (it is a KL anchor)")
            logs.append(np.where(infos.legal, np.log(np.where(infos.legal, t, 1.0)), 0.0))
        self.magnet_log = logs

    def step(self) -> None:
        """One simultaneous MMD update of both players."""
        eta, alpha, A = self.stepsize, self.alpha, self.tree.num_actions
        grads = sequence_gradients(self.tree, self.plans)
        new = []
        for p, infos in enumerate(self.tree.infosets):
            h = -eta * grads[p]
            h[1:] -= entropy_gradient(self.plans[p], infos, A).ravel()
            if self.magnet_log is not None:
                h[1:] -= eta * alpha * self.magnet_log[p].ravel()
            new.append(realization_plans(dilated_prox(h / (1.0 + eta * alpha), infos, A), infos, A))
        self.plans = new
        self.iterations += 1

    def tables(self) -> list[np.ndarray]:
        """The last iterate as one behaviour table ``[S_p, A]`` per player."""
        return [behaviour_from_plan(x, i, self.tree.num_actions) for x, i in zip(self.plans, self.tree.infosets)]

    def nash_conv(self) -> float:
        """NashConv of the last iterate in the unregularised game (exact)."""
        br, values = nash_conv(self.tree, [x[self.tree.terminal_seq[p]] for p, x in enumerate(self.plans)])
        return float((br - values).sum())

    def gap(self) -> float:
        """The saddle-point gap of the regularised game (OpenSpiel's ``get_gap``); needs ``alpha > 0``."""
        if not self.alpha > 0:
            raise ValueError("the regularised gap needs alpha > 0")
        A = self.tree.num_actions
        grads = sequence_gradients(self.tree, self.plans)
        total = 0.0
        for p, infos in enumerate(self.tree.infosets):
            m = None if self.magnet_log is None else self.magnet_log[p]
            h = -grads[p] / self.alpha
            if m is not None:
                h[1:] -= m.ravel()
            br = realization_plans(dilated_prox(h, infos, A), infos, A)
            total += float(grads[p] @ br) - self.alpha * dilated_entropy(br, infos, A, m)
            total -= float(grads[p] @ self.plans[p]) - self.alpha * dilated_entropy(self.plans[p], infos, A, m)
        return total

    def __repr__(self) -> str:
        return (f"DilatedMMD({self.iterations} iterations, alpha={self.alpha:g}, stepsize={self.stepsize:.4g}, "
                f"infosets {[i.size for i in self.tree.infosets]})")
