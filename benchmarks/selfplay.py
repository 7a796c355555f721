"""The IIG benchmark's comparison (Rudolph et al., ICLR 2026) on liar's dice, run in slices.

Each (method, seed) trains for ``--steps`` env steps (the paper: 10M) and records the last iterate's
exact exploitability every ``--eval-every`` env steps (the paper: 250k); every measurement is appended
to ``benchmarks/results/selfplay.csv`` with the date, commit, machine and command, so slices run on
different days add up to the full table. Tabular MMD and CFR+ are exact reference lines (their x axis
is iterations, written in the ``env_steps`` column as 0).

    python benchmarks/selfplay.py --only ppo --seeds 0 --steps 20000 --eval-every 10000   # one short slice
    python benchmarks/selfplay.py --only ppo --only deep_mmd --seeds 0-4                  # 10M steps x 5 seeds

Methods: ``ppo`` (`pb.PPOSelfPlay`, preset ``iig_liars_dice``), ``deep_mmd`` (`pb.DeepMMD`, untuned
defaults: the reference has no tuned MMD setting), ``mmd`` (tabular, alpha 0.002, magnet moved every 10 iterations),
``cfr+`` (`CFRPlus` average). NFSP and neural PSRO slices are not here yet.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pbmarl as pb

RESULTS = Path(__file__).with_name("results") / "selfplay.csv"
METHODS = ("ppo", "deep_mmd", "mmd", "cfr+")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Writer:
    def __init__(self) -> None:
        self.stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.commit = _commit()
        self.machine = f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus"
        self.command = "python benchmarks/selfplay.py " + " ".join(sys.argv[1:])

    def row(self, game: str, method: str, seed: int, iteration: int, env_steps: int, wall: float,
            exploitability: float) -> None:
        print(f"{game:<14} {method:<9} seed {seed}  it {iteration:>6}  env {env_steps:>10,}  {wall:8.1f} s  "
              f"exploitability {exploitability:.5f}", flush=True)
        new = not RESULTS.exists()
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with open(RESULTS, "a", newline="") as fh:
            writer = csv.writer(fh)
            if new:
                writer.writerow(["date", "commit", "machine", "command", "game", "method", "seed", "iteration",
                                 "env_steps", "wall_time", "exploitability"])
            writer.writerow([self.stamp, self.commit, self.machine, self.command, game, method, seed, iteration,
                             env_steps, f"{wall:.2f}", f"{exploitability:.6g}"])


def neural(out: Writer, game: str, method: str, seed: int, steps: int, every: int) -> None:
    if method == "ppo":
        run = pb.PPOSelfPlay(game, seed=seed, preset="iig_liars_dice", budget=steps, eval_every=0)
    else:
        run = pb.DeepMMD(game, seed=seed, preset="iig_liars_dice", budget=steps, eval_every=0)
    next_eval = every
    with run:
        while not run.done:
            record = run.step()
            if record.env_steps >= next_eval or run.done:
                nc = run._nash_conv()  # exact: the engine holds liar's dice
                out.row(game, method, seed, record.iteration, record.env_steps, record.wall_time, float(nc or 0) / 2)
                next_eval += every


def tabular(out: Writer, game: str, method: str, iterations: int) -> None:
    start = time.perf_counter()
    if method == "mmd":
        run = pb.MMD(game, alpha=0.002, magnet_every=10)  # untuned; alpha 0.05 sits at a near-uniform QRE here
        for record in run.run(iterations, progress=False):
            if record.iteration % max(1, iterations // 10) == 0:
                out.row(game, method, 0, record.iteration, 0, record.wall_time, record.exploitability)
        return
    from pbmarl.evaluation.cfr import CFRPlus

    solver = CFRPlus(pb.load_game(game).tree())
    for i in range(1, iterations + 1):
        solver.step()
        if i % max(1, iterations // 10) == 0:
            out.row(game, method, 0, i, 0, time.perf_counter() - start, solver.nash_conv() / 2)


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=METHODS, help="methods to run (default: all)")
    parser.add_argument("--seeds", default="0-4", help="'0-4' or '0,2' (neural methods)")
    parser.add_argument("--game", default="liars_dice", help="an OpenSpiel game the exact engine holds")
    parser.add_argument("--steps", type=int, default=10_000_000, help="env steps per neural run")
    parser.add_argument("--eval-every", type=int, default=250_000, help="env steps between exact measurements")
    parser.add_argument("--iterations", type=int, default=1000, help="iterations of the tabular methods")
    args = parser.parse_args(argv)
    out = Writer()
    for method in args.only or METHODS:
        if method in ("mmd", "cfr+"):
            tabular(out, args.game, method, args.iterations)
            continue
        for seed in _seeds(args.seeds):
            neural(out, args.game, method, seed, args.steps, args.eval_every)


if __name__ == "__main__":
    main()
