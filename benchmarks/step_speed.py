"""Milliseconds per env step of `pb.NFSP` at the IIG benchmark's tuned liar's dice settings, and its numbers' hash.

Issue 47 needs 5 seeds x 10M env steps of NFSP with ``NFSP_LIARS_DICE`` (``benchmarks/selfplay.py``: three
hidden layers of 512, Adam, an update every 27 decisions). This measures what one env step costs there: each
measurement is a fresh process that builds ``pb.NFSP("liars_dice", seed=0, **NFSP_LIARS_DICE)`` and plays
``--steps`` steps of ``--episodes`` episodes under one torch thread (what `NFSP.step` sets), timing the steps
by CPU seconds (steadier than wall seconds on the shared machine) and wall seconds. With ``--baseline DIR``
(a tree holding an older ``pbmarl/``, e.g. ``git archive <commit> pbmarl | tar -x -C DIR``) the measurements
alternate between it and this checkout, ``--repeats`` times each, so both see the same load; each row also
carries a hash of the run's history (without its seconds) and of every network, optimiser state and the
random state after the steps, so a speed-up can be checked to change no number.

    python benchmarks/nfsp_speed.py --baseline /tmp/nfsp_old --repeats 4 --steps 4 --episodes 1000

A fresh run costs less than a late one: its Adam moments have not yet decayed into the subnormal range
(`pbmarl.torchutil.flush_denormals`). ``--from RUN`` measures steps of a saved run instead (a folder of
``benchmarks/state/selfplay/liars_dice/nfsp/...``, loaded read-only; its own episodes a step), e.g. 7M env steps in:

    python benchmarks/nfsp_speed.py --baseline /tmp/nfsp_old --from /tmp/nfsp_seed4 --steps 3

Rows go to ``benchmarks/results/nfsp_speed.csv`` with the date, commit, machine and command; ``--no-save``
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

FIELDS = ["date", "commit", "machine", "command", "side", "pbmarl", "episodes_per_step", "steps", "env_steps",
          "cpu_ms_per_step", "wall_ms_per_step", "hours_per_10M_cpu", "history_hash", "state_hash", "load_avg",
          "start"]

#: what one measurement runs, in a fresh process whose ``pbmarl`` comes from PYTHONPATH's first entry
CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[3])
import torch
import pbmarl as pb
from selfplay import NFSP_LIARS_DICE
episodes, steps, start = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4]
if start == "fresh":
    run = pb.NFSP("liars_dice", seed=0, **{**NFSP_LIARS_DICE, "episodes_per_step": episodes})
else:
    run = pb.load_run(start)
before = sum(run.decisions)
cpu, wall = time.process_time(), time.perf_counter()
for _ in range(steps):
    run.step()
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
history = run.history
history = history[[c for c in history.columns if c != "wall_time" and not c.startswith("time")]]
state = hashlib.sha256()
for net in run.q_nets + run.target_nets + run.avg_nets:
    for v in net.state_dict().values():
        state.update(v.numpy().tobytes())
for opt in run.rl_opts + run.sl_opts:
    for s in opt.state_dict()["state"].values():
        for v in s.values():
            state.update(v.numpy().tobytes() if torch.is_tensor(v) else repr(v).encode())
state.update(repr(run.rng.bit_generator.state).encode())
n = sum(run.decisions) - before
print(json.dumps({"pbmarl": pb.__file__, "episodes_per_step": run.config.episodes_per_step, "env_steps": n, "cpu_ms_per_step": 1000 * cpu / n,
                  "wall_ms_per_step": 1000 * wall / n,
                  "history_hash": hashlib.sha256(history.to_csv().encode()).hexdigest()[:16],
                  "state_hash": state.hexdigest()[:16]}))
"""


def measure(root: Path, episodes: int, steps: int, start: str = "fresh") -> dict[str, object]:
    """One measurement in a fresh process importing ``pbmarl`` from `root`, of a new run or of the saved run
    folder `start`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(episodes), str(steps), str(HERE), start], env=env, cwd="/",
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the measurement with pbmarl from {root} failed:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(result["pbmarl"]).startswith(str(root)):
        raise RuntimeError(f"the measurement imported pbmarl from {result['pbmarl']}, not from {root}")
    return result


def main() -> None:
    from _rows import Stamp, append, load_avg

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episodes a step (NFSP_LIARS_DICE's 1000)")
    parser.add_argument("--steps", type=int, default=4, help="steps a measurement")
    parser.add_argument("--repeats", type=int, default=2, help="measurements of each side")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a tree holding an older pbmarl/ to alternate with (default: this checkout only)")
    parser.add_argument("--from", dest="start", type=Path, default=None,
                        help="a saved NFSP run folder to measure steps of (default: a fresh run)")
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
    stamp = Stamp("benchmarks/nfsp_speed.py")
    sides = [("baseline", args.baseline.resolve())] if args.baseline is not None else []
    sides.append(("this checkout", HERE.parent))
    rows = []
    for _ in range(args.repeats):
        for side, root in sides:
            got = measure(root, args.episodes, args.steps, start)
            row = stamp.row(side=side, steps=args.steps, load_avg=load_avg(), start=start, **got)
            row["hours_per_10M_cpu"] = f"{float(got['cpu_ms_per_step']) * 1e7 / 1000 / 3600:.2f}"  # type: ignore[arg-type]
            for key in ("cpu_ms_per_step", "wall_ms_per_step"):
                row[key] = f"{float(row[key]):.3f}"
            print(" ".join(f"{k}={row[k]}" for k in FIELDS[4:]), flush=True)
            rows.append(row)
    if not args.no_save:
        print("rows ->", append("nfsp_speed", rows, FIELDS))


if __name__ == "__main__":
    main()
