"""CFR+ over a `GameTree`, vectorised level by level.

Counterfactual regret minimisation (Zinkevich et al. 2007) with the CFR+ changes of
Tammelin (2014) and Tammelin et al. (2015): regrets floored at zero after every update
(regret matching+), players updated in turn (alternating updates), and the average
strategy weighted linearly (iteration t counts t times).

For player p with current behaviour ``pi_p`` the counterfactual value of a sequence
``(I, a)`` is the opponents-and-chance-weighted return of the terminals it ends at plus
the values of the information sets that follow it,

    q(I, a) = sum_{z: seq_p(z) = (I, a)} w_{-p}(z) u_p(z) + sum_{J: parent(J) = (I, a)} v(J),
    v(I) = sum_a pi_p(a | I) q(I, a),

computed deepest level first with one `bincount`/`add.at` per level; the regret update is
``R(I, a) <- max(R(I, a) + q(I, a) - v(I), 0)``. The average strategy is kept as a
realisation plan (sum of ``t * x_t``), which is what linear averaging of behaviour
strategies means once each is weighted by the player's own reach.

Example:
    >>> solver = CFRPlus(game.tree())
    >>> solver.run(200)
    CFRPlus(200 iterations, infosets [6, 6])
    >>> tables = solver.average_tables()      # one [S_p, A] behaviour table per player
    >>> solver.nash_conv() < 1e-3             # of the average profile
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pbmarl.evaluation.engine import nash_conv, opponent_reach, profile_values
from pbmarl.evaluation.realization import behaviour_from_plan, realization_plans

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.tree import GameTree


def regret_matching_plus(regrets: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Behaviour ``[S, A]`` proportional to the positive regrets; uniform over legal actions where none is."""
    pos = np.where(legal, np.maximum(regrets, 0.0), 0.0)
    total = pos.sum(axis=1, keepdims=True)
    uniform = legal / np.maximum(legal.sum(axis=1, keepdims=True), 1)
    return np.where(total > 0, pos / np.where(total > 0, total, 1.0), uniform)


def counterfactual_values(tree: GameTree, player: int, table: np.ndarray, opp_reach_terminal: np.ndarray) -> np.ndarray:
    """``q`` ``[S_p, A]``: counterfactual value of every sequence of `player` under its behaviour `table`.

    `opp_reach_terminal` is ``chance * prod_{q != player} reach_q`` at each terminal (`opponent_reach`).
    """
    infos = tree.infosets[player]
    S, A = infos.size, tree.num_actions
    w = np.asarray(opp_reach_terminal, dtype=float)
    seq_value = np.bincount(tree.terminal_seq[player], weights=w * tree.returns[:, player], minlength=1 + S * A)
    q = seq_value[1:].reshape(S, A)  # a view: children's values are added into it below
    for level in reversed(infos.levels):
        v = np.einsum("ia,ia->i", np.where(infos.legal[level], table[level], 0.0), q[level])
        np.add.at(seq_value, infos.parent_seq[level], v)
    return q.copy()


class CFRPlus:
    """CFR+ with alternating updates over the whole tree; see the module doc.

    Args:
        tree: the game tree (`Game.tree()`); any number of players (convergence to a
            Nash equilibrium is guaranteed for two-player zero-sum games only).
    """

    def __init__(self, tree: GameTree) -> None:
        self.tree = tree
        A = tree.num_actions
        self.regrets = [np.zeros((i.size, A)) for i in tree.infosets]
        self.plan_sum = [np.zeros(tree.num_sequences(p)) for p in range(tree.num_players)]
        self.iterations = 0

    def current_tables(self) -> list[np.ndarray]:
        """The current behaviour table ``[S_p, A]`` of each player (regret matching+)."""
        return [regret_matching_plus(r, i.legal) for r, i in zip(self.regrets, self.tree.infosets)]

    def _reach(self, player: int, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        plan = realization_plans(table, self.tree.infosets[player], self.tree.num_actions)
        return plan, plan[self.tree.terminal_seq[player]]

    def step(self) -> None:
        """One CFR+ iteration: each player in turn updates its regrets against the others' current strategies."""
        t = self.iterations + 1
        tables = self.current_tables()
        reach = [self._reach(p, tables[p])[1] for p in range(self.tree.num_players)]
        for p in range(self.tree.num_players):
            infos = self.tree.infosets[p]
            q = counterfactual_values(self.tree, p, tables[p], opponent_reach(self.tree, p, reach))
            v = np.einsum("ia,ia->i", tables[p], q)
            self.regrets[p] = np.where(infos.legal, np.maximum(self.regrets[p] + q - v[:, None], 0.0), 0.0)
            tables[p] = regret_matching_plus(self.regrets[p], infos.legal)
            plan, reach[p] = self._reach(p, tables[p])
            self.plan_sum[p] += t * plan
        self.iterations = t

    def run(self, iterations: int) -> CFRPlus:
        """Run `iterations` more iterations; returns self."""
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
            raise ValueError(f"iterations must be a non-negative integer, got {iterations!r}")
        for _ in range(int(iterations)):
            self.step()
        return self

    def average_tables(self) -> list[np.ndarray]:
        """The average behaviour table ``[S_p, A]`` of each player (uniform before any iteration)."""
        out = []
        for p, infos in enumerate(self.tree.infosets):
            plan = self.plan_sum[p]
            plan = plan / plan[0] if plan[0] > 0 else realization_plans(
                regret_matching_plus(np.zeros((infos.size, self.tree.num_actions)), infos.legal), infos,
                self.tree.num_actions)
            out.append(behaviour_from_plan(plan, infos, self.tree.num_actions))
        return out

    def average_reach(self) -> list[np.ndarray]:
        """Terminal reach ``[Z]`` of each player's average strategy."""
        return [self._reach(p, t)[1] for p, t in enumerate(self.average_tables())]

    def values(self) -> np.ndarray:
        """Expected returns ``[P]`` of the average profile."""
        return profile_values(self.tree, self.average_reach())

    def nash_conv(self) -> float:
        """NashConv of the average profile (exact, one best-response pass per player)."""
        br_values, values = nash_conv(self.tree, self.average_reach())
        return float((br_values - values).sum())

    def __repr__(self) -> str:
        return f"CFRPlus({self.iterations} iterations, infosets {[i.size for i in self.tree.infosets]})"
