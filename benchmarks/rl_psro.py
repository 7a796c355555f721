"""PSRO-Nash with RL oracles (DQN, PPO) against the exact oracle and CFR+, on Kuhn and Leduc.

Prints exploitability against wall time and env steps for each run, side by side
with the exact-oracle PSRO curve (the best any oracle can do per iteration) and
OpenSpiel's CFR+ on the same game, and writes ``benchmarks/out/rl_psro_GAMES.csv`` and
``benchmarks/out/rl_psro_GAMES.png``. Exploitability is always exact (the exact engine
turns every neural policy into a table).

Targets on a 2-core machine: Kuhn below 0.05 within 3 minutes; Leduc below 0.5
within 20 minutes.

    python benchmarks/rl_psro.py                          # both games, both oracles, default minutes
    python benchmarks/rl_psro.py --games kuhn_poker --oracles dqn --minutes 3
    python benchmarks/rl_psro.py --quick                  # a smoke run of everything
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pbmarl as pb  # noqa: E402
from pbmarl.learners import make_learner  # noqa: E402

#: per game, the oracle specs (budgets and sizes tuned on a 2-core machine)
SPECS: dict[str, dict[str, dict[str, Any]]] = {
    "kuhn_poker": {
        "dqn": {"budget": 15_000, "hidden": [64, 64]},
        "ppo": {"budget": 15_000, "hidden": [64, 64]},
    },
    "leduc_poker": {
        "dqn": {"budget": 60_000, "lr": 1e-3, "batch_size": 256},
        "ppo": {"budget": 120_000, "lr": 2e-2},
    },
}
#: colours per method, the same in both panels
COLOURS = {"exact": "C0", "cfr+": "C1", "dqn": "C2", "ppo": "C3", "a2c": "C4"}
#: exploitability is plotted on a log axis: exact zeros are drawn at this floor
FLOOR = 1e-5
#: default wall-clock minutes per RL run, and the exploitability target
DEFAULT_MINUTES = {"kuhn_poker": 3.0, "leduc_poker": 20.0}
TARGETS = {"kuhn_poker": 0.05, "leduc_poker": 0.5}


def run_psro(game: Any, learner: Any, minutes: float, label: str, rows: list[dict[str, Any]],
             *, stop: float = 0.0, max_iterations: int = 1000) -> None:
    """Step PSRO-Nash until `minutes` of wall time (checked between iterations) or `stop` is reached."""
    psro = pb.PSRO(game, solver="nash", learner=learner)
    start = time.perf_counter()
    record = psro.records[-1]
    while True:
        wall = time.perf_counter() - start
        rows.append({"game": game.name, "method": label, "iteration": record.iteration, "wall_s": round(wall, 3),
                     "env_steps": record.env_steps, "exploitability": record.exploitability})
        print(f"  {label:10s} it {record.iteration:3d}  {wall:7.1f}s  {record.env_steps:>11,d} env steps  "
              f"exploitability {record.exploitability:.4f}", flush=True)
        if wall >= minutes * 60 or record.exploitability <= stop or record.iteration >= max_iterations:
            return
        record = psro.step()


def run_cfr_plus(game: Any, minutes: float, rows: list[dict[str, Any]]) -> None:
    """OpenSpiel's CFR+ (C++), exploitability of its average policy at doubling iteration counts."""
    import pyspiel
    from open_spiel.python.algorithms import exploitability

    solver = pyspiel.CFRPlusSolver(game.pyspiel_game)
    start, done, checkpoint = time.perf_counter(), 0, 1
    while True:
        while done < checkpoint:
            solver.evaluate_and_update_policy()
            done += 1
        wall = time.perf_counter() - start
        expl = exploitability.exploitability(game.pyspiel_game, solver.average_policy())
        rows.append({"game": game.name, "method": "cfr+", "iteration": done, "wall_s": round(wall, 3),
                     "env_steps": None, "exploitability": expl})
        print(f"  {'cfr+':10s} it {done:5d}  {wall:7.1f}s  {'(full tree)':>22s}  exploitability {expl:.5f}", flush=True)
        if wall >= minutes * 60 or expl < 1e-4:
            return
        checkpoint *= 2


def summarise(rows: list[dict[str, Any]], games: list[str]) -> None:
    print("\nsummary (exact exploitability; target per game)")
    print(f"{'game':12s} {'method':10s} {'iters':>5s} {'wall s':>8s} {'env steps':>12s} {'final':>8s} {'best':>8s} "
          f"{'first < target':>16s}")
    for game in games:
        target = TARGETS.get(game, 0.0)
        for method in dict.fromkeys(r["method"] for r in rows if r["game"] == game):
            run = [r for r in rows if r["game"] == game and r["method"] == method]
            hit = next((r for r in run if r["exploitability"] < target), None)
            when = f"{hit['wall_s']:.1f}s" if hit else "not reached"
            steps = run[-1]["env_steps"]
            print(f"{game:12s} {method:10s} {run[-1]['iteration']:5d} {run[-1]['wall_s']:8.1f} "
                  f"{'-' if steps is None else f'{steps:,d}':>12s} {run[-1]['exploitability']:8.4f} "
                  f"{min(r['exploitability'] for r in run):8.4f} {when:>16s}  (target {target})")


def write_outputs(rows: list[dict[str, Any]], games: list[str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    stem = "rl_psro_" + "_".join(games)  # one file pair per set of games, so separate runs do not collide
    with open(out / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fig, axes = plt.subplots(len(games), 2, figsize=(11, 4 * len(games)), squeeze=False)
    for g, game in enumerate(games):
        for method in dict.fromkeys(r["method"] for r in rows if r["game"] == game):
            run = [r for r in rows if r["game"] == game and r["method"] == method]
            y = [max(r["exploitability"], FLOOR) for r in run]
            style = {"marker": ".", "label": method, "color": COLOURS.get(method)}
            axes[g, 0].plot([max(r["wall_s"], 1e-2) for r in run], y, **style)
            if run[0]["env_steps"] is not None and method != "exact":
                axes[g, 1].plot([max(r["env_steps"], 1) for r in run], y, **style)
        for ax, xlabel in zip(axes[g], ("wall time (s)", "env steps")):
            ax.axhline(TARGETS.get(game, 0.0), color="grey", linestyle="--", linewidth=0.8)
            ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="exploitability", title=game)
            ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=100)
    print(f"\nwrote {out / stem}.csv and {out / stem}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", default="kuhn_poker,leduc_poker")
    parser.add_argument("--oracles", default="dqn,ppo")
    parser.add_argument("--minutes", type=float, default=None,
                        help="wall minutes per RL run (default: 3 for Kuhn, 20 for Leduc)")
    parser.add_argument("--quick", action="store_true", help="tiny budgets: checks that everything runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args()
    games = [g for g in args.games.split(",") if g]
    oracles = [o for o in args.oracles.split(",") if o]
    rows: list[dict[str, Any]] = []
    for name in games:
        game = pb.load_game(name)
        minutes = 0.25 if args.quick else (args.minutes or DEFAULT_MINUTES.get(name, 3.0))
        print(f"\n== {name}: PSRO-Nash, {minutes:g} min per RL run ==")
        run_psro(game, None, minutes, "exact", rows, stop=1e-6, max_iterations=3 if args.quick else 100)
        run_cfr_plus(game, min(minutes, 2.0), rows)
        for oracle in oracles:
            spec = {"name": oracle, "seed": args.seed, **SPECS.get(name, {}).get(oracle, {})}
            if args.quick:
                spec["budget"] = 2_000
            run_psro(game, make_learner(game, spec), minutes, oracle, rows)
    summarise(rows, games)
    write_outputs(rows, games, args.out)


if __name__ == "__main__":
    main()
