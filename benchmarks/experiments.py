"""What the experiment runner costs, and what Tune's parallelism buys, on this machine.

    python benchmarks/experiments.py                       # both slices: overhead, then 20 trials of about 5 s
    python benchmarks/experiments.py --only overhead --trial-seconds 30    # the issue's 30-second trials
    python benchmarks/experiments.py --only short --short-seconds 3
    python benchmarks/experiments.py --only short --short-iterations 100   # pin the work instead

Each trial is PSRO on Kuhn poker with sampled payoffs. Its budget is a number of iterations, found by
running seed 0 in a plain loop for the seconds asked (or given with ``--*-iterations``), so both sides
do the same work: a runner that slowed iterations down would show in its wall time (a
``pb.Stop(seconds=)`` would hide it in fewer iterations). On a shared machine the calibration can
run at another load than the trials: pin the iterations to compare runs.

1. **Overhead per trial** (``--only overhead``): the same trials run twice, one at a time: by a plain
   loop that builds each run, calls ``run.run(until=stop)`` and saves the run folder, and by
   `pb.Experiment` on Ray Tune with one trial at a time. Overhead = (runner wall - loop wall) / trials,
   Ray's own start timed apart. The trials' ``finished.json`` stamps split it into the one-off start
   (from ``exp.run()`` to the first trial's first line: Tune's driver, a new worker process for the
   trial actor, importing Ray Tune there) and what each trial adds after that (pbmarl's imports and the
   game's tree in the first trial, Tune's result round trips, the experiment state Tune checkpoints).
   The start is split again at the moment the trial's worker process began. CPU seconds a trial (the
   loop's process; the trial's own thread, from the trial's stamps) are printed beside the walls: on
   a shared machine they move less with the load than wall times do; so are the runner's CPU seconds by
   process, and a trial's phases (build, ``run.run()``, the final save) beside the loop's, wall and CPU.
   The one-off start is paid once an ``exp.run()``: the overhead per trial is also printed for an
   experiment of N trials sharing it (start / N + what each trial adds after it; N = the trials run, 10
   and 30, the issue's example grid), the rows' notes say both.
2. **Trials of a few seconds, end to end** (``--only short``): the plain loop, the runner on the local
   Ray with every CPU, and the runner on a simulated two-node ``ray.cluster_utils.Cluster`` (one CPU a
   node) in a child process; speed-up = loop wall / runner wall, beside the CPUs each was given.

Prints the numbers side by side and appends one row per measure to ``benchmarks/results/experiments.csv``
(date, commit, machine, command, and the load average: the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _rows import Stamp, append, load_avg

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ["date", "commit", "machine", "load_avg", "command", "measure", "trials", "trial_seconds", "wall_s",
          "per_trial_s", "note"]
GAME = "kuhn_poker"


def _spec() -> Any:
    import pbmarl as pb

    return pb.spec(pb.PSRO, solver="nash", evaluator="rollout", eval_episodes=200)


def calibrate(seconds: float) -> int:
    """How many iterations seed 0 runs in `seconds` in a plain loop (at least 2)."""
    import pbmarl as pb

    run = _spec().build(GAME, seed=0)
    run.run(until=pb.Stop(seconds=seconds), progress=False)
    done = len(run.records)
    run.close()
    return max(2, done)


def loop(trials: int, stop: Any, root: Path, phases: dict[str, float] | None = None) -> tuple[float, float]:
    """The baseline: build, run to the stop and save each run, one after another; returns wall and CPU seconds.

    `phases` (when given) gets each phase's wall and CPU seconds summed over the trials, as the trials stamp
    theirs: ``build``, ``run``, ``save`` and ``cpu_build``, ``cpu_run``, ``cpu_save``."""
    spec = _spec()
    start, cpu = time.perf_counter(), time.process_time()
    for seed in range(trials):
        marks = [(time.perf_counter(), time.process_time())]
        run = spec.build(GAME, seed=seed)
        marks.append((time.perf_counter(), time.process_time()))
        run.run(until=stop, progress=False)
        marks.append((time.perf_counter(), time.process_time()))
        run.save(root / f"loop-{seed}")
        marks.append((time.perf_counter(), time.process_time()))
        run.close()
        if phases is not None:
            for name, a, b in zip(("build", "run", "save"), marks, marks[1:]):
                phases[name] = phases.get(name, 0.0) + b[0] - a[0]
                phases[f"cpu_{name}"] = phases.get(f"cpu_{name}", 0.0) + b[1] - a[1]
    return time.perf_counter() - start, time.process_time() - cpu


def runner(name: str, trials: int, stop: Any, root: Path, *, address: str | None = None,
           max_concurrent: int | None = None) -> dict[str, Any]:
    """Run the trials as one experiment; returns its wall and the trials' stamps (Unix times)."""
    import pbmarl as pb

    exp = pb.Experiment(name, GAME, [_spec()], seeds=range(trials), stop=stop, root=root)
    began = time.time()
    start = time.perf_counter()
    exp.run(address=address, progress=False, max_concurrent=max_concurrent)
    wall = time.perf_counter() - start
    ended = time.time()
    bad = exp.status[exp.status["state"] != "finished"]
    if not bad.empty:
        raise RuntimeError(f"trials did not finish:\n{bad}")
    stamps = sorted((json.loads((exp.trial_dir(t) / "finished.json").read_text()) for t in exp.trials),
                    key=lambda s: s["started"])
    return {"wall": wall, "began": began, "ended": ended, "stamps": stamps}


def phases(out: dict[str, Any]) -> dict[str, float]:
    """Each phase of a trial after the first (no imports, no new worker), mean seconds: wall and the trial thread's CPU;
    nan where the stamps are older than a phase."""
    s, nan = out["stamps"], float("nan")
    later = s[1:] or s

    def mean(f: Any) -> float:
        return sum(f(x) for x in later) / len(later)

    return {"build": mean(lambda x: x["built"] - x["started"]), "run": mean(lambda x: x.get("ran", nan) - x["built"]),
            "save": mean(lambda x: x["ended"] - x.get("ran", nan)), "cpu_build": mean(lambda x: x["cpu_built"]),
            "cpu_run": mean(lambda x: x.get("cpu_ran", nan) - x["cpu_built"]),
            "cpu_save": mean(lambda x: x["cpu_ended"] - x.get("cpu_ran", nan))}


def cpu_seconds(names: dict[int, str] | None = None) -> dict[int, float]:
    """CPU seconds so far of this process and everything it started (Ray's GCS, raylet, workers), by process id;
    `names` (when given) gets each process's short name."""
    import psutil  # a dependency of Ray

    me = psutil.Process()
    out = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
            if names is not None:
                names[p.pid] = "this process (Tune's driver)" if p.pid == me.pid else _short_name(p)
        except psutil.Error:
            continue
    return out


def _short_name(p: Any) -> str:
    """A Ray process's role from its command line: gcs_server, raylet, a worker (with its title), an agent."""
    try:
        cmd = p.cmdline()
    except Exception:
        return p.name()
    text = " ".join(cmd)
    for part in ("dashboard_agent", "runtime_env_agent", "log_monitor", "monitor.py", "dashboard.py", "default_worker"):
        if part in text:
            return part + (f" {p.name()}" if part == "default_worker" else "")
    return p.name()


def split(out: dict[str, Any], loop_wall: float, trials: int) -> dict[str, float]:
    """The runner's wall, split: one-off start, the first trial's extra setup, per-trial gaps and the tail."""
    s, nan = out["stamps"], float("nan")
    first_setup = s[0]["built"] - s[0]["started"]
    later_setup = sum(x["built"] - x["started"] for x in s[1:]) / max(1, len(s) - 1)
    gaps = [b["started"] - a["ended"] for a, b in zip(s, s[1:])]
    later = s[1:] or s
    spawned = max(out["began"], s[0].get("worker_started") or out["began"])  # the trial's worker process began
    return {"start": s[0]["started"] - out["began"], "driver": spawned - out["began"],
            "worker": s[0]["started"] - spawned, "first_extra": first_setup - later_setup,
            "gap": sum(gaps) / max(1, len(gaps)), "tail": out["ended"] - s[-1]["ended"],
            "in_trials": sum(x["ended"] - x["started"] for x in s) - loop_wall,
            # CPU seconds of the trial's own thread, build to end, in the trials after the first (no imports)
            "cpu": sum(x.get("cpu_ended", nan) - x.get("cpu_built", nan) for x in later) / len(later),
            "cpu_first": s[0].get("cpu_ended", nan), "reporting": sum(x.get("reporting_s", nan) for x in s) / len(s),
            "saving": sum(x.get("saving_s", nan) for x in s) / len(s)}  # nan: stamps of a runner before these


def cluster_child(trials: int, iterations: int, root: str) -> None:
    """In a fresh process: a two-node simulated cluster (one CPU each) runs the short trials."""
    from ray.cluster_utils import Cluster

    import pbmarl as pb

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        t = time.perf_counter()
        pb.init_ray(address=cluster.address, quiet=True)
        start_s = time.perf_counter() - t
        out = runner("cluster", trials, pb.Stop(iterations=iterations), Path(root))
        nodes = len({s["node"] for s in out["stamps"]})
        print("RESULT", json.dumps({"wall": out["wall"], "ray_start": start_s, "nodes": nodes}))
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()


def overhead(args: argparse.Namespace, tmp: Path, stamp: Stamp) -> list[dict[str, Any]]:
    import pbmarl as pb

    n, secs = args.overhead_trials, args.trial_seconds
    loop(1, pb.Stop(iterations=1), tmp / "warm")  # imports and the game's tree, paid once by the loop
    iters = args.overhead_iterations or calibrate(secs)
    stop = pb.Stop(iterations=iters)
    loop_phases: dict[str, float] = {}
    loop_wall, loop_cpu = loop(n, stop, tmp / "overhead-loop", loop_phases)
    t = time.perf_counter()
    pb.init_ray(num_cpus=os.cpu_count() or 1, quiet=True)
    ray_start = time.perf_counter() - t
    names: dict[int, str] = {}
    cpu_before = cpu_seconds(names)
    out = runner("overhead", n, stop, tmp, max_concurrent=1)
    cpu_after = cpu_seconds(names)
    runner_cpu = sum(v - cpu_before.get(pid, 0.0) for pid, v in cpu_after.items())
    by_name: dict[str, float] = {}
    for pid, v in cpu_after.items():
        by_name[names[pid]] = by_name.get(names[pid], 0.0) + v - cpu_before.get(pid, 0.0)
    import ray

    ray.shutdown()
    over = (out["wall"] - loop_wall) / n
    parts = split(out, loop_wall, n)
    per_trial = over - parts["start"] / n  # what each further trial adds once the worker is up
    trial_s = loop_wall / n
    print(f"\n1. overhead per trial ({n} trials of {iters} PSRO iterations, {trial_s:.1f} s each in the loop; "
          "one at a time)")
    print(f"   {'':<30}{'wall s':>10}{'per trial s':>14}")
    print(f"   {'raw: run.run() in a loop':<30}{loop_wall:>10.1f}{trial_s:>14.2f}")
    print(f"   {'pb.Experiment on Tune':<30}{out['wall']:>10.1f}{out['wall'] / n:>14.2f}")
    print(f"   overhead {over:.2f} s a trial = {100 * over / 30:.1f}% of a 30-s trial; split:")
    print(f"     one-off start, exp.run() to the first trial's first line: {parts['start']:.2f} s "
          f"(Tune's driver, a new worker process, Ray Tune imported there; Ray's own start, {ray_start:.1f} s, apart)")
    print(f"       of which the driver until the trial's worker process began {parts['driver']:.2f} s, that process "
          f"until the trial's first line (importing Ray and Ray Tune) {parts['worker']:.2f} s")
    print(f"     the first trial's extra setup (pbmarl imports, the game's tree): {parts['first_extra']:.2f} s")
    print(f"     inside the trials beyond the loop's time, all {n}: {parts['in_trials']:.2f} s; "
          f"between trials {parts['gap']:.3f} s each; after the last {parts['tail']:.2f} s")
    print(f"     each trial after the start: {per_trial:.2f} s = {100 * per_trial / 30:.1f}% of a 30-s trial")
    print(f"   CPU seconds, every process of this run and Ray's (less moved by the machine's load than walls): loop "
          f"{loop_cpu:.1f}, runner {runner_cpu:.1f}: {(runner_cpu - loop_cpu) / n:.2f} s a trial more")
    print(f"   CPU seconds a trial: loop {loop_cpu / n:.2f}; the trial's "
          f"thread, build to end, {parts['cpu']:.2f} ({parts['cpu_first']:.2f} in the first, imports included); "
          f"in Tune's result round trips {parts['reporting']:.3f} s, in saves beyond the last {parts['saving']:.3f} s")
    print("   CPU seconds of the runner by process (the trial's worker includes the trials): " + ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(by_name.items(), key=lambda kv: -kv[1]) if v >= 0.05))
    ph = phases(out)
    print(f"   a trial after the first, by phase (mean s; the loop's mean over its {n}):"
          f"{'loop wall':>12}{'trial wall':>12}{'loop CPU':>10}{'trial CPU':>11}")
    for name, label in (("build", "build the run (game, run type)"), ("run", "run.run() to the stop"),
                        ("save", "the final save")):
        print(f"     {label:<67}{loop_phases[name] / n:>12.2f}{ph[name]:>12.2f}"
              f"{loop_phases['cpu_' + name] / n:>10.2f}{ph['cpu_' + name]:>11.2f}")
    amortised = {k: parts["start"] / k + per_trial for k in sorted({n, 10, 30})}
    print("   overhead per trial with the one-off start shared by an experiment of N trials (start / N + each trial "
          "after the start, both as measured here): " + ", ".join(
              f"N={k}: {v:.2f} s = {100 * v / 30:.1f}%" for k, v in amortised.items()))
    base = stamp.row(load_avg=load_avg(minutes=1), trials=n, trial_seconds=round(trial_s, 2))
    return [
        base | {"measure": "overhead_loop", "wall_s": round(loop_wall, 2), "per_trial_s": round(trial_s, 3),
                "note": f"{iters} iterations each; CPU {loop_cpu / n:.2f} s a trial"},
        base | {"measure": "overhead_runner", "wall_s": round(out["wall"], 2), "per_trial_s": round(out["wall"] / n, 3),
                "note": f"overhead {over:.2f} s/trial = {100 * over / 30:.1f}% of 30 s; one-off start "
                        f"{parts['start']:.2f} s (driver {parts['driver']:.2f}, worker {parts['worker']:.2f}), "
                        f"first trial's extra setup {parts['first_extra']:.2f} s, each trial "
                        f"after the start {per_trial:.2f} s = {100 * per_trial / 30:.1f}% of 30 s; "
                        f"ray start {ray_start:.1f} s apart; CPU s, all processes: runner {runner_cpu:.1f} vs loop "
                        f"{loop_cpu:.1f}; CPU s a trial: loop {loop_cpu / n:.2f}, trial thread "
                        f"{parts['cpu']:.2f}; round trips {parts['reporting']:.3f} s, saves {parts['saving']:.3f} s; a later trial's "
                        f"run.run() {ph['run']:.2f} s wall, {ph['cpu_run']:.2f} CPU (loop {loop_phases['run'] / n:.2f}, "
                        f"{loop_phases['cpu_run'] / n:.2f}); shared by N trials: "
                        + ", ".join(f"N={k} {100 * v / 30:.1f}%" for k, v in amortised.items())},
    ]


def short(args: argparse.Namespace, tmp: Path, stamp: Stamp) -> list[dict[str, Any]]:
    import pbmarl as pb

    cpus = os.cpu_count() or 1
    n = args.short_trials
    loop(1, pb.Stop(iterations=1), tmp / "warm")
    iters = args.short_iterations or calibrate(args.short_seconds)
    stop = pb.Stop(iterations=iters)
    loop_wall, _ = loop(n, stop, tmp / "short-loop")
    t = time.perf_counter()
    pb.init_ray(num_cpus=cpus, quiet=True)
    ray_start = time.perf_counter() - t
    local = runner("short-local", n, stop, tmp)
    import ray

    ray.shutdown()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, __file__, "--cluster-child", str(n), str(iters), str(tmp)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    child = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))[len("RESULT "):])
    trial_s = loop_wall / n
    print(f"\n2. {n} trials of {iters} PSRO iterations ({trial_s:.1f} s each in the loop); Ray start {ray_start:.1f} s "
          f"local, {child['ray_start']:.1f} s joining the simulated cluster (not in the walls)")
    print(f"   {'':<40}{'CPUs':>6}{'wall s':>10}{'speed-up':>10}")
    rows = [("run.run() in a loop", 1, loop_wall), ("Experiment, local Ray", cpus, local["wall"]),
            (f"Experiment, 2-node cluster ({child['nodes']} used)", 2, child["wall"])]
    for label, given, wall in rows:
        print(f"   {label:<40}{given:>6}{wall:>10.1f}{loop_wall / wall:>10.2f}")
    base = stamp.row(load_avg=load_avg(minutes=1), trials=n, trial_seconds=round(trial_s, 2))
    return [
        base | {"measure": "short_loop", "wall_s": round(loop_wall, 2), "per_trial_s": round(trial_s, 3),
                "note": f"{iters} iterations each; 1 CPU"},
        base | {"measure": "short_local", "wall_s": round(local["wall"], 2), "per_trial_s": round(local["wall"] / n, 3),
                "note": f"{cpus} CPUs given; speed-up {loop_wall / local['wall']:.2f}"},
        base | {"measure": "short_cluster", "wall_s": round(child["wall"], 2),
                "per_trial_s": round(child["wall"] / n, 3),
                "note": f"2 nodes x 1 CPU given, {child['nodes']} used; speed-up {loop_wall / child['wall']:.2f}"},
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=["overhead", "short"], default=["overhead", "short"])
    parser.add_argument("--trial-seconds", type=float, default=5.0, help="length of each overhead trial in the loop")
    parser.add_argument("--overhead-trials", type=int, default=4)
    parser.add_argument("--short-trials", type=int, default=20)
    parser.add_argument("--short-seconds", type=float, default=5.0, help="length of each short trial in the loop")
    parser.add_argument("--overhead-iterations", type=int, default=None, help="PSRO iterations of each overhead "
                        "trial (default: as many as seed 0 runs in --trial-seconds)")
    parser.add_argument("--short-iterations", type=int, default=None, help="PSRO iterations of each short trial "
                        "(default: as many as seed 0 runs in --short-seconds)")
    parser.add_argument("--no-save", action="store_true", help="print only, append no rows")
    parser.add_argument("--cluster-child", nargs=3, metavar=("TRIALS", "ITERATIONS", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cluster_child:
        cluster_child(int(args.cluster_child[0]), int(args.cluster_child[1]), args.cluster_child[2])
        return
    stamp = Stamp("benchmarks/experiments.py", argv)
    tmp = Path(tempfile.mkdtemp(prefix="pbmarl-bench-exp-"))
    print(f"machine: {stamp.machine}, load average {load_avg()}")
    rows = []
    for name in args.only:
        rows += (overhead if name == "overhead" else short)(args, tmp, stamp)
    if not args.no_save:
        print(f"appended {len(rows)} rows to {append('experiments', rows, FIELDS)}")


if __name__ == "__main__":
    main()
