"""What the experiment runner costs, and what Tune's parallelism buys, on this machine.

    python benchmarks/experiments.py                       # overhead (4 trials of 5 s) and 20 short trials
    python benchmarks/experiments.py --trial-seconds 30    # the issue's 30-second trials (slower)

1. **Overhead per trial.** The same trials (PSRO on Kuhn poker, sampled payoffs, each stopped by
   ``pb.Stop(seconds=S)``) run twice, one at a time: by a plain loop that builds each run, calls
   ``run.run(until=stop)`` and saves the run folder, and by `pb.Experiment` on Ray Tune with one trial
   at a time. Overhead = (runner wall - loop wall) / trials, with Ray's one-off start timed apart.
2. **20 short trials end to end**: the plain loop, the runner on the local Ray with every CPU, and the
   runner on a simulated two-node ``ray.cluster_utils.Cluster`` (one CPU a node), in a child process.

Prints the numbers side by side and appends one row per measure to ``benchmarks/results/experiments.csv``
(date, commit, machine, command). The machine is shared: its load average goes in every row.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "experiments.csv"
FIELDS = ["date", "commit", "machine", "load_avg", "command", "measure", "trials", "trial_seconds", "wall_s",
          "per_trial_s", "note"]


def _spec() -> Any:
    import pbmarl as pb

    return pb.spec(pb.PSRO, solver="nash", evaluator="rollout", eval_episodes=200)


def loop(trials: int, stop: Any, root: Path) -> float:
    """The baseline: build, run to the stop and save each run, one after another."""
    spec = _spec()
    start = time.perf_counter()
    for seed in range(trials):
        run = spec.build("kuhn_poker", seed=seed)
        run.run(until=stop, progress=False)
        run.save(root / f"loop-{seed}")
        run.close()
    return time.perf_counter() - start


def runner(name: str, trials: int, stop: Any, root: Path, *, address: str | None = None,
           max_concurrent: int | None = None) -> float:
    import pbmarl as pb

    exp = pb.Experiment(name, "kuhn_poker", [_spec()], seeds=range(trials), stop=stop, root=root)
    start = time.perf_counter()
    exp.run(address=address, progress=False, max_concurrent=max_concurrent)
    wall = time.perf_counter() - start
    bad = exp.status[exp.status["state"] != "finished"]
    if not bad.empty:
        raise RuntimeError(f"trials did not finish:\n{bad}")
    return wall


def cluster_child(trials: int, iterations: int, root: str) -> None:
    """In a fresh process: a two-node simulated cluster (one CPU each) runs the 20 short trials."""
    from ray.cluster_utils import Cluster

    import pbmarl as pb

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        t = time.perf_counter()
        pb.init_ray(address=cluster.address, quiet=True)
        start_s = time.perf_counter() - t
        wall = runner("cluster", trials, pb.Stop(iterations=iterations), Path(root))
        print("RESULT", json.dumps({"wall": wall, "ray_start": start_s}))
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def append_rows(rows: list[dict[str, Any]]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    new = not RESULTS.exists()
    with open(RESULTS, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerows({k: r.get(k) for k in FIELDS} for r in rows)
    print(f"appended {len(rows)} rows to {RESULTS}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial-seconds", type=float, default=5.0, help="length of each overhead trial")
    parser.add_argument("--overhead-trials", type=int, default=4)
    parser.add_argument("--short-trials", type=int, default=20)
    parser.add_argument("--short-iterations", type=int, default=3, help="PSRO iterations of each short trial")
    parser.add_argument("--no-save", action="store_true", help="print only, append no rows")
    parser.add_argument("--cluster-child", nargs=3, metavar=("TRIALS", "ITERATIONS", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cluster_child:
        cluster_child(int(args.cluster_child[0]), int(args.cluster_child[1]), args.cluster_child[2])
        return

    import pbmarl as pb

    cpus = os.cpu_count() or 1
    tmp = Path(tempfile.mkdtemp(prefix="pbmarl-bench-exp-"))
    t = time.perf_counter()
    pb.init_ray(num_cpus=cpus, quiet=True)
    ray_start = time.perf_counter() - t

    n, secs = args.overhead_trials, args.trial_seconds
    stop = pb.Stop(seconds=secs)
    loop(1, pb.Stop(iterations=1), tmp / "warm")  # imports and the game's tree, paid once by both sides
    loop_wall = loop(n, stop, tmp / "overhead-loop")
    run_wall = runner("overhead", n, stop, tmp, max_concurrent=1)
    over = (run_wall - loop_wall) / n

    short, iters = args.short_trials, args.short_iterations
    short_stop = pb.Stop(iterations=iters)
    short_loop = loop(short, short_stop, tmp / "short-loop")
    short_local = runner("short-local", short, short_stop, tmp)
    import ray

    ray.shutdown()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, __file__, "--cluster-child", str(short), str(iters), str(tmp)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    child = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))[len("RESULT "):])

    print(f"\nmachine: {platform.node()}, {cpus} CPUs, load average {os.getloadavg()[0]:.1f}; Ray start "
          f"{ray_start:.1f} s local, {child['ray_start']:.1f} s joining the simulated cluster (not in the walls)")
    print(f"\n1. overhead per trial ({n} trials of {secs:g} s, one at a time)")
    print(f"   {'':<28}{'wall s':>10}{'per trial s':>14}")
    print(f"   {'raw: run.run() in a loop':<28}{loop_wall:>10.1f}{loop_wall / n:>14.2f}")
    print(f"   {'pb.Experiment on Tune':<28}{run_wall:>10.1f}{run_wall / n:>14.2f}")
    print(f"   overhead {over:.2f} s a trial = {100 * over / 30:.1f}% of a 30-s trial "
          f"({100 * over / secs:.1f}% of these {secs:g}-s ones)")
    print(f"\n2. {short} short trials ({iters} PSRO iterations each)")
    print(f"   {'':<36}{'wall s':>10}{'speed-up':>10}")
    for label, wall in (("run.run() in a loop", short_loop), (f"Experiment, local Ray ({cpus} CPUs)", short_local),
                        ("Experiment, 2-node cluster (1+1)", child["wall"])):
        print(f"   {label:<36}{wall:>10.1f}{short_loop / wall:>10.2f}")
    if args.no_save:
        return
    base = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "commit": git_commit(),
            "machine": f"{platform.node()} {cpus} cpu", "load_avg": f"{os.getloadavg()[0]:.1f}",
            "command": "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])}
    append_rows([
        base | {"measure": "overhead_loop", "trials": n, "trial_seconds": secs, "wall_s": round(loop_wall, 2),
                "per_trial_s": round(loop_wall / n, 3)},
        base | {"measure": "overhead_runner", "trials": n, "trial_seconds": secs, "wall_s": round(run_wall, 2),
                "per_trial_s": round(run_wall / n, 3),
                "note": f"overhead {over:.2f} s/trial = {100 * over / 30:.1f}% of 30 s; ray start {ray_start:.1f} s"},
        base | {"measure": "short_loop", "trials": short, "wall_s": round(short_loop, 2),
                "per_trial_s": round(short_loop / short, 3), "note": f"{iters} iterations each"},
        base | {"measure": "short_local", "trials": short, "wall_s": round(short_local, 2),
                "per_trial_s": round(short_local / short, 3), "note": f"{cpus} CPUs; speed-up {short_loop / short_local:.2f}"},
        base | {"measure": "short_cluster", "trials": short, "wall_s": round(child["wall"], 2),
                "per_trial_s": round(child["wall"] / short, 3),
                "note": f"2 nodes x 1 CPU; speed-up {short_loop / child['wall']:.2f}"},
    ])


if __name__ == "__main__":
    main()
