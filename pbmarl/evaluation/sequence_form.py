"""`sequence_form_lp`: the exact equilibrium of a two-player zero-sum game by linear programming.

Koller, Megiddo and von Stengel (1994, "Fast algorithms for finding randomized
strategies in game trees"; von Stengel 1996). A strategy of player p is a
realisation plan ``x >= 0`` with ``E x = e``: ``x(empty) = 1`` and, at every
information state I, ``sum_a x(I, a) = x(parent_seq(I))``. The payoff matrix over
sequence pairs is ``A[s0, s1] = sum_z chance(z) u_0(z)`` over terminals z whose last
sequences are (s0, s1), so the expected payoff of plans (x, y) is ``x^T A y``.

Player 1 minimises player 0's best-response value. By LP duality the inner
``max_x {x^T A y : E x = e, x >= 0}`` equals ``min_q {e^T q : E^T q >= A y}``, so

    min_{y, q}  e^T q   s.t.   E^T q - A y >= 0,   F y = f,   y >= 0,   q free,

and player 0's plan x is the dual solution of the constraints ``E^T q - A y >= 0``
(the dual LP is player 0's maximin LP), so one LP gives both players' plans. It is
built sparse from the engine's flat tree (`pbmarl.games.tree.GameTree`) and solved
with HiGHS (`scipy.optimize.linprog(method="highs")`); only sequences of legal
actions are variables.

Example:
    >>> sol = sequence_form_lp(pb.load_game("kuhn_poker"))
    >>> round(sol.value, 9)                       # -1/18 for player 0
    -0.055555556
    >>> pb.exploitability(game, sol.policies).nash_conv < 1e-9   # ~1e-16
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from pbmarl.evaluation.realization import behaviour_from_plan
from pbmarl.games.base import Game
from pbmarl.policies.tabular import TabularPolicy

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.tree import GameTree

#: HiGHS tolerances, tighter than its 1e-7 defaults so the policies' NashConv lands near 1e-12
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}

#: sequences (both players together) above which the LP is refused
MAX_SEQUENCES = 2_000_000


@dataclass(frozen=True, eq=False)
class SequenceFormSolution:
    """An exact equilibrium of a two-player zero-sum game.

    Attributes:
        policies: one `TabularPolicy` per player: its equilibrium behaviour at its own
            information states (uniform where its plan never arrives), uniform elsewhere.
        value: player 0's expected return at the equilibrium (the game value).
        plans: each player's realisation plan ``[1 + S_p * A]`` (the tree's sequence numbering).
        values: the LP's optimum and ``x^T A y`` of the two plans, as player 0's payoff (they
            agree to the solver's tolerance; `value` is their mean).
        seconds: wall seconds: building the LP and solving it.
        sequences: number of legal sequences per player (LP variables).
    """

    policies: tuple[TabularPolicy, TabularPolicy]
    value: float
    plans: tuple[np.ndarray, np.ndarray]
    values: tuple[float, float]
    seconds: dict[str, float]
    sequences: tuple[int, int]

    def __repr__(self) -> str:
        return (f"SequenceFormSolution(value={self.value:.9g}, sequences={self.sequences}, "
                f"seconds={sum(self.seconds.values()):.3f})")


def legal_sequences(tree: GameTree, player: int) -> np.ndarray:
    """Indices (tree numbering) of the empty sequence and every legal (infoset, action) sequence."""
    infos = tree.infosets[player]
    S, A = infos.size, tree.num_actions
    seq = 1 + np.arange(S * A).reshape(S, A)
    return np.concatenate([[0], seq[infos.legal]]).astype(np.int64)


def realization_constraints(tree: GameTree, player: int, columns: np.ndarray) -> sp.csr_matrix:
    """``E`` of shape ``[1 + S_p, len(columns)]``: row 0 is ``x(empty) = 1``, row ``1 + I`` is
    ``sum_a x(I, a) - x(parent_seq(I)) = 0``; `columns` are tree sequence indices (`legal_sequences`)."""
    infos = tree.infosets[player]
    A = tree.num_actions
    position = np.full(tree.num_sequences(player), -1, dtype=np.int64)
    position[columns] = np.arange(len(columns))
    rows = [np.zeros(1, np.int64)]
    cols = [np.zeros(1, np.int64)]
    data = [np.ones(1)]
    children = columns[1:]
    rows.append(1 + (children - 1) // A)
    cols.append(position[children])
    data.append(np.ones(len(children)))
    parents = position[infos.parent_seq]
    reached = parents >= 0  # in a restricted tree, states behind a removed action: their plan is 0
    rows.append(1 + np.flatnonzero(reached))
    cols.append(parents[reached])
    data.append(-np.ones(int(reached.sum())))
    return sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(1 + infos.size, len(columns)))


def sequence_payoffs(tree: GameTree, columns: tuple[np.ndarray, np.ndarray]) -> sp.csr_matrix:
    """Player 0's payoff over sequence pairs, ``A[s0, s1] = sum_z chance(z) u_0(z)`` (duplicates summed)."""
    position = []
    for p in (0, 1):
        pos = np.full(tree.num_sequences(p), -1, dtype=np.int64)
        pos[columns[p]] = np.arange(len(columns[p]))
        position.append(pos)
    r = position[0][tree.terminal_seq[0]]
    c = position[1][tree.terminal_seq[1]]
    w = tree.chance_reach * tree.returns[:, 0]
    keep = (r >= 0) & (c >= 0)  # a restricted tree drops terminals behind removed actions
    return sp.coo_matrix((w[keep], (r[keep], c[keep])), shape=(len(columns[0]), len(columns[1]))).tocsr()


def _solve(E_opp: sp.csr_matrix, F: sp.csr_matrix, B: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, float]:
    """min_{y, q} q_0 s.t. B y - E_opp^T q <= 0, F y = f, y >= 0: the minimiser's plan y, the
    maximiser's plan x (the duals of the inequalities) and the value q_0.

    `B` is the maximiser's payoff ``[its sequences, the minimiser's sequences]``.
    """
    n_own, n_q = B.shape[1], E_opp.shape[0]
    c = np.zeros(n_own + n_q)
    c[n_own] = 1.0  # q_0, the root of the opponent's constraints
    A_ub = sp.hstack([B, -E_opp.T]).tocsr()
    A_eq = sp.hstack([F, sp.csr_matrix((F.shape[0], n_q))]).tocsr()
    b_eq = np.zeros(F.shape[0])
    b_eq[0] = 1.0
    bounds = np.array([(0.0, np.inf)] * n_own + [(-np.inf, np.inf)] * n_q)
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(B.shape[0]), A_eq=A_eq, b_eq=b_eq, bounds=bounds,
                  method="highs", options=_HIGHS_OPTIONS)
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"the sequence-form LP ({n_own} sequences of player 1 against {B.shape[0]} of player 0) "
                           f"failed: {res.message}")
    x = np.clip(-np.asarray(res.ineqlin.marginals), 0.0, None)  # HiGHS: d(objective)/d(b_ub) <= 0
    return np.clip(res.x[:n_own], 0.0, None), x, float(res.fun)


def check_zero_sum_tree(game: Game, tree: GameTree, *, who: str = "sequence_form_lp") -> None:
    """Raise a ValueError naming the game (and `who` refuses it) unless its tree is two-player zero-sum."""
    if tree.num_players != 2:
        raise ValueError(f"{who} solves two-player zero-sum games; {game.name!r} has "
                         f"{tree.num_players} players (use pb.JPSRO for n-player games)")
    sums = tree.returns.sum(axis=1)
    scale = max(1.0, float(np.abs(tree.returns).max(initial=0.0)))
    if len(sums) and np.ptp(sums) > 1e-9 * scale:
        raise ValueError(f"{who} solves two-player zero-sum games; {game.name!r} is general-sum "
                         f"(returns sum to values in [{sums.min():.4g}, {sums.max():.4g}]); use pb.JPSRO "
                         "with a correlated meta-solver for general-sum games")
    if not np.allclose(sums, 0.0, atol=1e-9 * scale):
        raise ValueError(f"{who} expects returns that sum to zero; {game.name!r} is constant-sum "
                         f"with sum {sums[0]:.6g}: subtract it from one player's payoff")


def sequence_form_lp(game: Game | str, *, max_nodes: int = 5_000_000,
                     max_sequences: int = MAX_SEQUENCES) -> SequenceFormSolution:
    """Solve a two-player zero-sum game exactly (see the module doc for the LP).

    Args:
        game: a `Game` or a name for `pb.load_game`; its tree must fit in memory.
        max_nodes: refuse trees with more histories than this.
        max_sequences: refuse games with more sequences (both players) than this.

    Returns:
        a `SequenceFormSolution`: ``.policies`` (two `TabularPolicy`), ``.value`` (player 0).

    Raises:
        ValueError: not two players, general-sum or constant-sum returns, a tree too large.
        RuntimeError: HiGHS reports a failure (named with the LP's size).
    """
    from pbmarl.config import check_int

    max_nodes = check_int("max_nodes", max_nodes, low=1)
    max_sequences = check_int("max_sequences", max_sequences, low=1)
    from pbmarl.games.registry import as_game

    game = as_game(game)
    if game.num_players != 2:
        raise ValueError(f"sequence_form_lp solves two-player zero-sum games; {game.name!r} has "
                         f"{game.num_players} players (use pb.JPSRO for n-player games)")
    start = time.perf_counter()
    tree = game.tree(max_nodes=max_nodes)
    check_zero_sum_tree(game, tree)
    total = sum(len(legal_sequences(tree, p)) for p in (0, 1))
    if total > max_sequences:
        raise ValueError(f"game {game.name!r} has {total:,} sequences, more than max_sequences={max_sequences:,}; "
                         "too large for the sequence-form LP (use pb.XDO with CFR+ instead)")
    plans, values, seconds = solve_tree(tree)
    policies = [_tabular(game, tree, p, plans[p]) for p in (0, 1)]
    seconds["build"] += time.perf_counter() - start - sum(seconds.values())
    return SequenceFormSolution(
        policies=(policies[0], policies[1]), value=0.5 * (values[0] + values[1]),
        plans=plans, values=values, seconds=seconds,
        sequences=(len(legal_sequences(tree, 0)), len(legal_sequences(tree, 1))),
    )


def solve_tree(tree: GameTree) -> tuple[tuple[np.ndarray, np.ndarray], tuple[float, float], dict[str, float]]:
    """Equilibrium realisation plans of a two-player zero-sum `tree` (its ``legal`` masks say which
    actions exist, so a restricted tree works too), the two value estimates and the seconds taken."""
    start = time.perf_counter()
    columns = (legal_sequences(tree, 0), legal_sequences(tree, 1))
    E = realization_constraints(tree, 0, columns[0])
    F = realization_constraints(tree, 1, columns[1])
    A = sequence_payoffs(tree, columns)
    built = time.perf_counter()
    y, x, v_lp = _solve(E, F, A)  # player 1 minimises player 0's best-response value
    solved = time.perf_counter()
    plans = []
    for p, z in enumerate((x, y)):
        plan = np.zeros(tree.num_sequences(p))
        plan[columns[p]] = z
        plans.append(plan)
    values = (v_lp, float(x @ (A @ y)))
    return (plans[0], plans[1]), values, {"build": built - start, "solve": solved - built}


def _tabular(game: Game, tree: GameTree, player: int, plan: np.ndarray) -> TabularPolicy:
    """The behaviour of `plan` at `player`'s information states; uniform elsewhere."""
    infos = tree.infosets[player]
    policy = TabularPolicy(game)
    rows = [policy.index[k] for k in infos.keys]
    policy.table[rows] = behaviour_from_plan(plan, infos, tree.num_actions)
    return policy
