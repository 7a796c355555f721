"""CartPole DQN late in training: how often the greedy policy is at 500, pbmarl against Stable-Baselines3.

`benchmarks/control.py` scores each run by one snapshot, the policy at the end. DQN on CartPole with
rl-zoo's settings (128 updates every 256 env steps, a hard target copy per burst) swings between 500 and
collapse from one burst to the next, so one snapshot per seed says little. This script trains both
libraries with the control benchmark's DQN row (same settings, same evaluation: the mean greedy return
over the 10 reset seeds ``EVAL_SEEDS``) and evaluates after every burst from ``--from`` env steps on, and
once more at the end. Evaluation runs outside training (it takes no learner randomness), so each run
trains exactly as in the control benchmark: the end snapshot is that benchmark's return for the seed.

    python benchmarks/dqn_snapshots.py --seeds 300 301 302   # about 1.3 min (pbmarl) + 2 min (SB3) a seed

SB3 runs in its own environment (``--sb3-python``); one row per library and seed goes to
``benchmarks/results/dqn_snapshots.csv``: snapshots at 500, snapshots taken, mean snapshot return, end return.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.control import (
    CASES,
    EVAL_LOOP,
    EVAL_SEEDS,
    SB3_MODEL,
    _commit,
    gymnasium_returns,
    make_pbmarl_learner,
    sb3_arguments,
)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "dqn_snapshots.csv")
HEADER = ["date", "commit", "command", "library", "seed", "from_step", "snapshots_at_500", "snapshots",
          "mean_snapshot_return", "end_return"]
CASE = ("CartPole-v1", "dqn")

#: SB3's DQN of the case (`SB3_MODEL`, as the control benchmark builds it), evaluated after its bursts
SB3_SNAPSHOTS = SB3_MODEL + r"""
from stable_baselines3.common.callbacks import BaseCallback
start, freq = int(sys.argv[2]), params["train_freq"]
greedy = lambda obs: model.predict(obs, deterministic=True)[0]
snapshots = []
class AfterBursts(BaseCallback):
    def _on_step(self):  # at step n (a multiple of train_freq) the latest burst ran after step n - train_freq
        n = self.num_timesteps
        if n % freq == 0 and n - freq >= start:
            snapshots.append(float(np.mean(gymnasium_returns(env_id, greedy, eval_seeds))))
        return True
model.learn(budget, callback=AfterBursts())
end = float(np.mean(gymnasium_returns(env_id, greedy, eval_seeds)))
print(json.dumps({"snapshots": snapshots, "end": end}))
"""


def append_row(path: str, header: list[str], values: list[Any]) -> None:
    """Append one row to the CSV at `path`: the UTC date and the commit, then `values`; a new file gets `header`."""
    new_file = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as fh:
        writer = csv.writer(fh)
        if new_file:
            writer.writerow(header)
        writer.writerow([datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), _commit(),
                         *values])


def pbmarl_snapshots(seed: int, start: int) -> dict[str, Any]:
    """Train pbmarl's DQN row as `benchmarks/control.py` does, evaluating after every burst from `start` on."""
    import numpy as np

    learner = make_pbmarl_learner(*CASE, seed, CASES[CASE][0])
    snapshots: list[float] = []
    burst = learner._burst

    def burst_then_evaluate(n: int, losses: dict[str, list[float]]) -> None:
        burst(n, losses)
        if learner.env_steps >= start:
            snapshots.append(float(np.mean(gymnasium_returns(
                CASE[0], lambda obs: learner.act(obs, deterministic=True), EVAL_SEEDS))))

    learner._burst = burst_then_evaluate  # type: ignore[method-assign]
    learner.run(progress=False)  # to the budget
    end = float(np.mean(gymnasium_returns(CASE[0], lambda obs: learner.act(obs, deterministic=True), EVAL_SEEDS)))
    return {"snapshots": snapshots, "end": end}


def sb3_snapshots(python: str, seed: int, start: int) -> dict[str, Any]:
    arg = sb3_arguments(*CASE, seed, CASES[CASE][0])
    out = subprocess.run([python, "-c", EVAL_LOOP + SB3_SNAPSHOTS, arg, str(start)], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise RuntimeError(f"SB3 run failed (seed {seed}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[300, 301, 302])
    parser.add_argument("--from", dest="start", type=int, default=45_000, help="first env step to evaluate after")
    parser.add_argument("--only", choices=("pbmarl", "sb3"), default=None, help="one library only")
    parser.add_argument("--sb3-python", default="/work/venvs/sb3/bin/python")
    parser.add_argument("--no-record", action="store_true", help="print only; append nothing to the CSV")
    args = parser.parse_args(argv)
    command = "python benchmarks/dqn_snapshots.py " + " ".join(sys.argv[1:] if argv is None else argv)
    totals: dict[str, list[int]] = {}
    print(f"{'library':8} {'seed':>5} {'at 500':>8} {'mean snapshot':>14} {'end':>7}")
    for seed in args.seeds:
        for library in ("pbmarl", "sb3"):
            if args.only and library != args.only:
                continue
            run = pbmarl_snapshots(seed, args.start) if library == "pbmarl" else \
                sb3_snapshots(args.sb3_python, seed, args.start)
            shots = run["snapshots"]
            hits = sum(r >= 500 for r in shots)
            mean = sum(shots) / len(shots) if shots else float("nan")
            total = totals.setdefault(library, [0, 0, 0, 0])
            total[0] += hits
            total[1] += len(shots)
            total[2] += run["end"] >= 500
            total[3] += 1
            print(f"{library:8} {seed:>5} {hits:>3}/{len(shots):<4} {mean:>14.1f} {run['end']:>7.1f}", flush=True)
            if not args.no_record:
                append_row(RESULTS, HEADER, [command, library, seed, args.start, hits, len(shots), round(mean, 2),
                                             round(run["end"], 2)])
    for library, (hits, shots, ends, runs) in totals.items():
        print(f"{library}: at 500 in {hits} of {shots} snapshots ({hits / max(shots, 1):.0%}), "
              f"and at the end of {ends} of {runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
