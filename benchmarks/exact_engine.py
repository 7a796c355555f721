"""Exact engine vs OpenSpiel's own routines on Leduc poker, side by side.

    python benchmarks/exact_engine.py            # full run (about two minutes)
    python benchmarks/exact_engine.py --quick    # smaller tables, fewer OpenSpiel samples

(a) Filling a payoff table of random tabular policies: `ExactEvaluator.fill` (which
    includes turning every policy into a realisation plan) vs OpenSpiel's
    `expected_game_score.policy_value` once per cell. OpenSpiel is timed on a
    sample of cells and extrapolated to the whole table (marked "est.").
(b) NashConv of a population's meta-strategy mixture: `pb.exploitability` vs
    OpenSpiel's `PolicyAggregator` + `exploitability.nash_conv`, both run in full.

Engine times are the best of a few repeats with a fresh evaluator (no cached
plans; the tree, built once per game, is shown on the first line); building the
empty PayoffTable and converting policies for OpenSpiel happen outside the timed region.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pbmarl as pb  # noqa: E402
from pbmarl.games.tree import build_tree  # noqa: E402

GAME = "leduc_poker"


def best_of(fn: Callable[..., object], repeats: int, setup: Callable[[], object] | None = None) -> float:
    """Best wall time of `repeats` calls; `setup()` (untimed) makes the call's argument."""
    times = []
    for _ in range(repeats):
        args = (setup(),) if setup is not None else ()
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def to_openspiel(game: pb.games.Game, pi: pb.TabularPolicy) -> object:
    from open_spiel.python import policy as osp

    out = osp.TabularPolicy(game.pyspiel_game)
    rows = np.fromiter((pi.index[k] for k in out.state_lookup), dtype=np.int64)
    out.action_probability_array[np.fromiter(out.state_lookup.values(), dtype=np.int64)] = pi.table[rows]
    return out


def population(game: pb.games.Game, n: int, seed: int) -> pb.Population:
    pop = pb.Population(game)
    for p in range(game.num_players):
        for i in range(n):
            pop.add(p, pb.TabularPolicy.random(game, seed=seed + 1000 * p + i))
    return pop


def fmt_s(seconds: float) -> str:
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.2f} ms"


def row(label: str, ours: float, theirs: float, note: str = "") -> None:
    print(f"  {label:<38} {fmt_s(ours):>11} {fmt_s(theirs):>13} {theirs / ours:>10.0f}x  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    from open_spiel.python.algorithms import expected_game_score, exploitability, policy_aggregator

    sizes = (10, 50) if args.quick else (50, 200)
    sample_cells = 5 if args.quick else 40
    mix_n = 10 if args.quick else 50
    repeats = 3

    game = pb.load_game(GAME)
    t_tree = best_of(lambda: build_tree(pb.load_game(GAME)), 1)
    tree = game.tree()
    state = game.pyspiel_game.new_initial_state()
    rng = np.random.default_rng(0)
    episodes = 300 if args.quick else 2000
    start = time.perf_counter()
    for _ in range(episodes):  # the raw speed of the game: a plain loop of random legal moves
        s = state.clone()
        while not s.is_terminal():
            if s.is_chance_node():
                actions, probs = zip(*s.chance_outcomes())
                s.apply_action(int(rng.choice(actions, p=probs)))
            else:
                s.apply_action(int(rng.choice(s.legal_actions())))
    t_play = (time.perf_counter() - start) / episodes
    print(f"{GAME}: {tree.num_nodes:,} histories, {tree.num_terminals:,} terminals, "
          f"infosets {[i.size for i in tree.infosets]}; one tree walk {fmt_s(t_tree)}, "
          f"one random playout {t_play * 1e6:.0f} us")
    print(f"\n  {'task':<38} {'pbmarl':>11} {'OpenSpiel':>13} {'speed-up':>11}")

    # (a) payoff tables
    big = population(game, max(sizes) + 1, seed=1)
    os_policies = [[to_openspiel(game, pi) for pi in big[p][:max(sizes)]] for p in range(2)]
    cells = [tuple(int(i) for i in rng.integers(max(sizes), size=2)) for _ in range(sample_cells)]
    start = time.perf_counter()
    for i, j in cells:
        expected_game_score.policy_value(state, [os_policies[0][i], os_policies[1][j]])
    per_cell = (time.perf_counter() - start) / len(cells)
    for n in sizes:
        pop = pb.Population(game)
        for p in range(2):
            for pi in big[p][:n]:
                pop.add(p, pi)

        def fill(table: pb.PayoffTable) -> None:
            pb.ExactEvaluator(game).fill(table)

        ours = best_of(fill, repeats, setup=lambda pop=pop: pb.PayoffTable(pop))
        row(f"fill {n}x{n} payoff table", ours, per_cell * n * n,
            f"(OpenSpiel est.: {fmt_s(per_cell)}/cell x {n * n:,} cells, timed on {len(cells)} cells)")

    # a PSRO iteration: one new policy per player, fill only the new row and column
    n = max(sizes)
    pop = pb.Population(game)
    for p in range(2):
        for pi in big[p][:n]:
            pop.add(p, pi)
    table = pb.PayoffTable(pop)
    ev = pb.ExactEvaluator(game)
    ev.fill(table)
    for p in range(2):
        pop.add(p, big[p][n])
    start = time.perf_counter()
    filled = ev.fill(table)
    ours = time.perf_counter() - start
    row(f"add 1 policy/player to {n}x{n}, fill", ours, per_cell * filled, f"(est.; {filled} new cells)")

    # (b) NashConv of a population mixture
    pop = population(game, mix_n, seed=2)
    sigma = [rng.dirichlet(np.ones(mix_n)) for _ in range(2)]
    ours = best_of(lambda: pb.exploitability(game, pop, sigma), repeats)
    result = pb.exploitability(game, pop, sigma)
    members = [[to_openspiel(game, pi) for pi in pop[p]] for p in range(2)]
    start = time.perf_counter()
    aggregated = policy_aggregator.PolicyAggregator(game.pyspiel_game).aggregate(
        [0, 1], members, [list(map(float, w)) for w in sigma])
    theirs_nc = exploitability.nash_conv(game.pyspiel_game, aggregated)
    theirs = time.perf_counter() - start
    row(f"NashConv, {mix_n} policies/player mixture", ours, theirs, "(PolicyAggregator + nash_conv, measured)")
    start = time.perf_counter()
    bridged_nc = exploitability.nash_conv(game.pyspiel_game, pb.evaluation.to_openspiel_policy(game, pop, sigma))
    t_bridge = time.perf_counter() - start
    print(f"\n  NashConv: pbmarl {result.nash_conv:.12f}, OpenSpiel aggregator {theirs_nc:.12f} "
          f"(|diff| {abs(result.nash_conv - theirs_nc):.1e}); exploitability = NashConv / 2 = {result.exploitability:.6f}")
    print(f"  to_openspiel_policy + OpenSpiel nash_conv: {bridged_nc:.12f} in {fmt_s(t_bridge)} "
          f"(|diff| {abs(result.nash_conv - bridged_nc):.1e})")


if __name__ == "__main__":
    main()
