"""Milliseconds per env step of the self-play comparison's NFSP or PSRO, alternating two pbmarl trees, with hashes.

Issue 47 runs 5 seeds x 10M env steps of `pb.NFSP` with ``NFSP_LIARS_DICE`` and of `pb.PSRO` with a DQN oracle
(``benchmarks/selfplay.py``'s `make_nfsp` and `make_psro`, which this script builds). This measures what one env step
costs there: each measurement is a fresh process that builds the run (seed 0, ``--game``) or loads a saved one
(``--from``), and plays ``--steps`` steps under the run's own torch settings, timing them by CPU seconds (steadier
than wall seconds on the shared machine) and wall seconds. With ``--baseline DIR`` (a tree holding an older
``pbmarl/``, e.g. ``git archive <commit> pbmarl | tar -x -C DIR``) the measurements alternate between it and this
checkout, ``--repeats`` times each, so both see the same load. Each row also carries a hash of the run's history
(without its seconds) and of its state after the steps (NFSP: every network, optimiser state and the random state;
PSRO: the payoff table, the meta-strategy and both random states), so a speed-up can be checked to change no number.

    python benchmarks/step_speed.py --baseline /tmp/nfsp_old --repeats 4 --steps 4 --episodes 1000
    python benchmarks/step_speed.py --method psro --baseline /tmp/psro_old --steps 2 --repeats 2
    python benchmarks/step_speed.py --method psro-parallel --baseline /tmp/psro_old --steps 2 --repeats 2

``psro-parallel`` is the same PSRO with its DQN oracle inside a ``ParallelOracle(backend="local")``: one copy per
player, answering in turn in this process.

A fresh NFSP run costs less than a late one: its Adam moments have not yet decayed into the subnormal range
(`pbmarl.torchutil.flush_denormals`). ``--from RUN`` measures steps of a saved run instead (a folder of
``benchmarks/state/selfplay/<game>/<method>/...``, loaded read-only), e.g. 7M env steps in:

    python benchmarks/step_speed.py --baseline /tmp/nfsp_old --from /tmp/nfsp_seed4 --steps 3

The script was ``benchmarks/nfsp_speed.py`` until it measured PSRO too; its rows keep the command they ran.
Rows go to ``benchmarks/results/step_speed.csv`` with the date, commit, machine and command; ``--no-save``
only prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FIELDS = ["date", "commit", "machine", "command", "method", "game", "side", "pbmarl", "episodes_per_step", "steps",
          "env_steps", "cpu_ms_per_step", "wall_ms_per_step", "hours_per_10M_cpu", "history_hash", "state_hash",
          "load_avg", "start"]

#: what one measurement runs, in a fresh process whose ``pbmarl`` comes from PYTHONPATH's first entry
CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import pbmarl as pb
from selfplay import make_nfsp, make_psro
method, game, episodes, steps, start = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
if start != "fresh":
    run = pb.load_run(start)
    if type(run).__name__.lower() != method.split("-")[0]:
        sys.exit(f"--from {start} holds a {type(run).__name__} run, not --method {method}")
elif method == "nfsp":
    run = make_nfsp(game, 0, {"episodes_per_step": episodes})
else:
    run = make_psro(game, 0, parallel="local" if method == "psro-parallel" else None)
before = run.records[-1].env_steps if run.records else 0
cpu, wall = time.process_time(), time.perf_counter()
for _ in range(steps):
    run.step()
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
history = run.history
history = history[[c for c in history.columns if c != "wall_time" and not c.startswith("time")]]
state = hashlib.sha256()
if method == "nfsp":
    for net in run.q_nets + run.target_nets + run.avg_nets:
        for v in net.state_dict().values():
            state.update(v.numpy().tobytes())
    for opt in run.rl_opts + run.sl_opts:
        for s in opt.state_dict()["state"].values():
            for v in s.values():
                state.update(v.numpy().tobytes() if torch.is_tensor(v) else repr(v).encode())
else:
    state.update(np.ascontiguousarray(run.table.values).tobytes())
    state.update(repr([np.asarray(m).tolist() for m in run.meta_strategy]).encode())
    for learner in getattr(run.learner, "_local", None) or [run.learner]:
        state.update(repr(learner.rng.bit_generator.state).encode())
state.update(repr(run.rng.bit_generator.state).encode())
n = run.records[-1].env_steps - before
print(json.dumps({"pbmarl": pb.__file__, "episodes_per_step": getattr(run.config, "episodes_per_step", ""),
                  "env_steps": n, "cpu_ms_per_step": 1000 * cpu / n, "wall_ms_per_step": 1000 * wall / n,
                  "history_hash": hashlib.sha256(history.to_csv().encode()).hexdigest()[:16],
                  "state_hash": state.hexdigest()[:16]}))
"""


def measure(root: Path, method: str, game: str, episodes: int, steps: int, start: str = "fresh") -> dict[str, object]:
    """One measurement in a fresh process importing ``pbmarl`` from `root`, of a new `method` run of `game` or of
    the saved run folder `start`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(HERE), method, game, str(episodes), str(steps), start],
                         env=env, cwd="/", capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the measurement with pbmarl from {root} failed:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(result["pbmarl"]).startswith(str(root)):
        raise RuntimeError(f"the measurement imported pbmarl from {result['pbmarl']}, not from {root}")
    return result


def main() -> None:
    from _rows import Stamp, append, load_avg

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", choices=("nfsp", "psro", "psro-parallel"), default="nfsp",
                        help="the run to time (default nfsp; psro-parallel: PSRO's oracle in a local ParallelOracle)")
    parser.add_argument("--game", default="liars_dice", help="an OpenSpiel game name (default liars_dice)")
    parser.add_argument("--episodes", type=int, default=1000,
                        help="NFSP's episodes a step (NFSP_LIARS_DICE's 1000); PSRO's step is one iteration")
    parser.add_argument("--steps", type=int, default=4, help="steps a measurement")
    parser.add_argument("--repeats", type=int, default=2, help="measurements of each side")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a tree holding an older pbmarl/ to alternate with (default: this checkout only)")
    parser.add_argument("--from", dest="start", type=Path, default=None,
                        help="a saved run folder of --method to measure steps of (default: a fresh run)")
    parser.add_argument("--no-save", action="store_true", help="print the rows only")
    args = parser.parse_args()
    for name in ("episodes", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive int, got {getattr(args, name)!r}")
    if args.baseline is not None and not (args.baseline / "pbmarl" / "__init__.py").is_file():
        parser.error(f"--baseline must be a folder holding pbmarl/__init__.py, got {str(args.baseline)!r}")
    if args.start is not None and not (args.start / "run.json").is_file():
        parser.error(f"--from must be a saved run folder holding run.json, got {str(args.start)!r}")
    start = "fresh" if args.start is None else str(args.start.resolve())
    stamp = Stamp("benchmarks/step_speed.py")
    sides = [("baseline", args.baseline.resolve())] if args.baseline is not None else []
    sides.append(("this checkout", HERE.parent))
    rows = []
    for _ in range(args.repeats):
        for side, root in sides:
            got = measure(root, args.method, args.game, args.episodes, args.steps, start)
            row = stamp.row(method=args.method, game=args.game, side=side, steps=args.steps, load_avg=load_avg(),
                            start=start, **got)
            row["hours_per_10M_cpu"] = f"{float(got['cpu_ms_per_step']) * 1e7 / 1000 / 3600:.2f}"  # type: ignore[arg-type]
            for key in ("cpu_ms_per_step", "wall_ms_per_step"):
                row[key] = f"{float(row[key]):.3f}"
            print(" ".join(f"{k}={row[k]}" for k in FIELDS[4:]), flush=True)
            rows.append(row)
    if not args.no_save:
        print("rows ->", append("step_speed", rows, FIELDS))


if __name__ == "__main__":
    main()
