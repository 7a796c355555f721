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
``cfr+`` (`CFRPlus` average), ``nfsp`` (`pb.NFSP`, its average policies measured) and ``psro`` (`pb.PSRO` with
a DQN oracle and the Nash meta-solver, its meta-strategy mixture measured). Every neural method counts env steps
as decisions of all seats, stops at the first measurement at or past ``--steps`` and reports the wall time of
its training alone (the exact measurements are not in it).

``nfsp``: the IIG benchmark's ``best_hyperparameters/min_final_expl_hparams/nfsp/liars_dice/best_hparams.yaml``
(nathanlct/IIG-RL-Benchmark at 591d35d; their ``algorithms/nfsp``, OpenSpiel's PyTorch NFSP) mapped to
`NFSPConfig` (`NFSP_LIARS_DICE`):

- ``hidden_layers_sizes [512, 512, 512]`` -> ``hidden=(512, 512, 512)`` (both networks, as theirs);
- ``optimizer_str adam`` -> ``optimizer="adam"`` (both networks);
- ``inner_rl_agent.learning_rate 0.00125`` -> ``rl_lr``; their top-level ``rl_learning_rate 0.01`` never reaches
  the DQN (their run_nfsp.py passes the inner agent's options), so it is not used; ``sl_learning_rate 0.00125``
  -> ``sl_lr``;
- ``anticipatory_param 0.316`` -> ``anticipatory``;
- ``epsilon_start 0.03``, ``epsilon_end 0.001``, ``epsilon_decay_duration 40M`` (linear over the DQN's own
  steps, which it takes only in best-response episodes: about 1.6M per player in 10M env steps, so epsilon
  ends near 0.029) -> ``epsilon_start=0.03``, ``epsilon_decay_episodes=10**8``: pbmarl's schedule is
  ``epsilon_start / sqrt(1 + episodes / decay)`` (no linear schedule, no end value), about 0.0296 after the
  3M episodes of 10M steps;
- ``replay_buffer_capacity 500k`` -> ``replay_capacity``; ``reservoir_buffer_capacity 500k`` ->
  ``reservoir_capacity``;
- ``inner_rl_agent.batch_size 32`` -> ``batch_size=32``; their average-policy ``batch_size 16`` has no option
  (pbmarl draws one minibatch size for both networks);
- update cadence: theirs learns the average policy every 128 NFSP steps (``learn_every``) and the DQN every 10
  of its own steps in best-response episodes plus once every 128 steps in average-policy episodes, about once
  per 27 decisions of a player; pbmarl updates both networks together every ``learn_every`` decisions of a
  player, so ``learn_every=27, updates_per_learn=1`` keeps their DQN's rate (the average policy then gets
  about 4.7x more updates than theirs);
- ``update_target_network_every 4000`` (DQN steps) -> ``target_update_every=468`` (pbmarl counts updates:
  400 updates in the 4000 best-response steps, plus about 68 taken in the average-policy steps between);
- ``min_buffer_size_to_learn 125`` -> ``min_buffer=125`` (also the DQN's, whose own 1,000 default has no option);
- ``discount_factor 1.0`` -> ``gamma=1.0``; ``loss_str mse``: pbmarl's TD loss is the mean squared error.

``psro``: ``.../psro/liars_dice/best_hparams.yaml`` mapped to `pb.PSRO` and a `pb.DQN` oracle (`PSRO_DQN`):

- ``meta_strategy_method nash`` -> ``solver="nash"``; ``training_strategy_selector probabilistic``,
  ``number_policies_selected 1``, ``rectifier ''``: each iteration trains one best response per player
  against the meta-strategy mixture (pbmarl's default targets);
- ``sims_per_entry 250`` -> ``evaluator="rollout", eval_episodes=250``: the payoff table is sampled and its
  episodes count as env steps, as theirs count ``num_meta_game_steps``;
- ``number_training_episodes 4000`` per best response -> ``budget=6_700`` learner steps (pbmarl's budget counts
  the learning seat's decisions: 4000 episodes x 3.36 decisions, the mean under uniform play, / 2 seats);
- ``hidden_layer_size 512, n_hidden_layers 3`` -> ``hidden=(512, 512, 512)``; ``learning_rate 0.08``
  (Adam) -> ``lr``; ``batch_size 8``; ``replay_buffer_capacity 25000`` -> ``buffer_size``;
- ``learn_every 10`` -> ``updates_per_round=16`` after every ``steps_per_round=160`` learner steps
  (``num_envs=16`` so a round is not forced to 256 episodes); ``update_target_network_every 250`` (steps)
  -> ``target_update_interval=25`` (updates);
- ``epsilon_start 0.48, epsilon_end 0.002, epsilon_decay_duration 80M``: each of their best responses is a
  fresh DQN, so epsilon falls by under 0.001 within one -> ``epsilon_start=epsilon_end=0.48``;
- their DQN (OpenSpiel's) is not double and does not clip gradients -> ``double=False``,
  ``max_grad_norm=1e9``; its ``min_buffer_size_to_learn`` default 1000 -> ``learning_starts=1000``;
  ``loss_str mse`` -> ``loss="mse"``; ``discount_factor 1.0`` -> ``gamma=1.0``;
- ``sigma 0``, ``self_play_proportion 0``, fresh weights per best response -> pbmarl's defaults
  (``warm_start=False``); their exported policy is the greedy argmax of Q, pbmarl's ``softmax(Q / 0.001)``;
- their first population member is an untrained DQN's greedy policy; pbmarl's is uniform random (no option).
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
METHODS = ("ppo", "deep_mmd", "mmd", "cfr+", "nfsp", "psro")
#: the IIG benchmark's tuned liar's dice NFSP as `NFSPConfig` options (the mapping is in the module doc)
NFSP_LIARS_DICE: dict[str, object] = dict(
    hidden=(512, 512, 512), optimizer="adam", rl_lr=0.00125, sl_lr=0.00125, anticipatory=0.31622776601683794,
    epsilon_start=0.03, epsilon_decay_episodes=10**8, replay_capacity=500_000, reservoir_capacity=500_000,
    batch_size=32, learn_every=27, updates_per_learn=1, target_update_every=468, min_buffer=125, gamma=1.0,
    episodes_per_step=1_000, measure=False)
#: the IIG benchmark's tuned liar's dice PSRO oracle as `DQNConfig` options (the mapping is in the module doc)
PSRO_DQN: dict[str, object] = dict(
    hidden=(512, 512, 512), lr=0.08, batch_size=8, buffer_size=25_000, num_envs=16, steps_per_round=160,
    updates_per_round=16, target_update_interval=25, epsilon_start=0.48, epsilon_end=0.48, double=False,
    max_grad_norm=1e9, learning_starts=1_000, loss="mse", gamma=1.0, budget=6_700)
#: sampled episodes per payoff-table cell (their ``sims_per_entry``)
PSRO_SIMS_PER_ENTRY = 250


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


def nfsp(out: Writer, game: str, seed: int, steps: int, every: int) -> None:
    """NFSP with the tuned liar's dice options; exact exploitability of the average policies."""
    from pbmarl.evaluation.exact import exploitability

    run = pb.NFSP(game, seed=seed, **NFSP_LIARS_DICE)  # type: ignore[arg-type]
    next_eval = every
    while True:
        record = run.step()
        last = record.env_steps >= steps
        if record.env_steps >= next_eval or last:
            result = exploitability(run.game, run.average_policies())
            out.row(game, "nfsp", seed, record.iteration, record.env_steps, record.wall_time,
                    float(result.exploitability))
            while next_eval <= record.env_steps:
                next_eval += every
        if last:
            return


def psro(out: Writer, game: str, seed: int, steps: int, every: int) -> None:
    """PSRO-Nash with the tuned DQN oracle and a sampled payoff table; exact exploitability of the meta-strategy.

    An iteration can take more than ``every`` env steps (its payoff-table cells grow with the population): it
    is then measured once, and the run ends after the iteration that reaches ``steps`` (as theirs does).
    """
    learner = pb.DQN(game, seed=seed, **PSRO_DQN)  # type: ignore[arg-type]
    run = pb.PSRO(game, solver="nash", learner=learner, evaluator="rollout", seed=seed,
                  eval_episodes=PSRO_SIMS_PER_ENTRY, measure=False, stop_exploitability=None)
    measurer = pb.ExactEvaluator(run.game)  # keeps each member's realisation plan between measurements
    next_eval = every
    with run:
        while True:
            record = run.step()
            last = record.env_steps >= steps
            if record.env_steps >= next_eval or last:
                result = measurer.exploitability(run.population, run.meta_strategy)
                out.row(game, "psro", seed, record.iteration, record.env_steps, record.wall_time,
                        float(result.exploitability))
                while next_eval <= record.env_steps:
                    next_eval += every
            if last:
                return


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
            if method == "nfsp":
                nfsp(out, args.game, seed, args.steps, args.eval_every)
            elif method == "psro":
                psro(out, args.game, seed, args.steps, args.eval_every)
            else:
                neural(out, args.game, method, seed, args.steps, args.eval_every)


if __name__ == "__main__":
    main()
