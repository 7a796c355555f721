"""Distributed learners: env steps/s with 1 and 2 actors, time to a CartPole return of 475, scaling.

    python benchmarks/distributed.py --backend ray --seconds 60        # the issue's run
    python benchmarks/distributed.py --backend local --seconds 20      # no Ray (actors take turns)

For each actor count, IMPALA (V-trace learner, actors with batched inference) trains on
CartPole-v1 for `--seconds` of wall time; printed: env steps per second (actors' data
consumed by the learner), the learner's share of the time, and the wall time at which the
mean return of a round first reached 475 (or "not reached"). Then the scaling efficiency
``rate(2) / (2 * rate(1))`` and a PROJECTION to N nodes from the measured per-actor rate
and the learner's seconds per batch: ``min(N * a * r_actor, B / t_learner)`` (a projection,
not a measurement). On the local backend the actors run one after another in this process,
so 2 actors cannot be faster than 1 there: only the Ray backend measures scaling.

On simple_spread_v3 seat 0 learns against two random agents (no return target there).
The RLlib 2.60 IMPALA/APPO and DQN runs (its own venv, /work/venvs/rllib) are printed as
"not run" when they were not run. Rows are appended to
benchmarks/results/distributed.csv with the date, the git commit and the command.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import os
import subprocess
import sys
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "distributed.csv")


def run_impala(env: str, actors: int, backend: str, seconds: float, seed: int) -> dict[str, float]:
    import pbmarl as pb

    if env == "simple_spread_v3":  # seat 0 learns; the other two agents act at random
        game = pb.load_game("pettingzoo:simple_spread_v3", N=3, max_cycles=25)
        opponents = [None] + [pb.RandomPolicy(game) for _ in range(game.num_players - 1)]
    else:
        game = pb.load_game(f"gym:{env}")
        opponents = [None]
    learner = pb.IMPALA(game, actors=actors, backend=backend, steps_per_round=256, num_envs=8, hidden=(64, 64),
                        lr=3e-3, gamma=0.99, budget=10**9, seed=seed)
    learner.start(0, opponents)
    t0 = time.perf_counter()
    t475 = math.nan
    try:
        while time.perf_counter() - t0 < seconds:
            record = learner.step()
            if math.isnan(t475) and record.mean_return >= 475:
                t475 = time.perf_counter() - t0
    finally:
        wall = time.perf_counter() - t0
        steps, batches, learn_s = learner.task.env_steps, len(learner.log), learner.learn_seconds
        learner.finish()
    return {"wall_s": wall, "env_steps": steps, "rate": steps / wall, "batches": batches,
            "t475_s": t475, "last_return": record.mean_return, "learn_s": learn_s}


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(RESULTS)).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["local", "ray"], default="ray")
    parser.add_argument("--seconds", type=float, default=60.0, help="wall time per actor count")
    parser.add_argument("--actors", default="1,2", help="comma-separated actor counts")
    parser.add_argument("--envs", default="CartPole-v1,simple_spread_v3", help="comma-separated environments")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nodes", default="1,2,4,8", help="node counts of the projection")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import torch

    torch.set_num_threads(1)
    backend = args.backend
    if backend == "ray":
        import pbmarl as pb

        try:
            pb.init_ray(quiet=True)
        except Exception as exc:  # noqa: BLE001 - reported, then measured without Ray
            print(f"Ray could not start ({type(exc).__name__}: {exc}); measuring with the local backend")
            backend = "local"
    for env in args.envs.split(","):
        measure(env, args, backend)


def measure(env: str, args: argparse.Namespace, backend: str) -> None:
    results = {}
    for n in [int(a) for a in args.actors.split(",")]:
        r = run_impala(env, n, backend, args.seconds, args.seed)
        results[n] = r
        t475 = "not reached" if math.isnan(r["t475_s"]) else f"{r['t475_s']:.1f} s"
        target = f", return 475 at: {t475}" if env == "CartPole-v1" else ""
        print(f"{env} IMPALA {backend} actors={n}: {r['rate']:.0f} env steps/s over {r['wall_s']:.1f} s "
              f"({r['env_steps']} steps, {r['batches']} batches){target}, last return {r['last_return']:.1f}")
    print("RLlib 2.60 IMPALA/APPO and DQN: not run (no /work/venvs/rllib on this machine in this session)")
    eff = math.nan
    if 1 in results and 2 in results:
        eff = results[2]["rate"] / (2 * results[1]["rate"])
        print(f"{env}: scaling efficiency 1 -> 2 actors ({backend}): {eff:.2f}")
    if 1 in results:
        r1 = results[1]
        actor_rate = r1["env_steps"] / max(r1["wall_s"] - r1["learn_s"], 1e-9)  # one actor's collection rate
        learner_rate = r1["env_steps"] / max(r1["learn_s"], 1e-9)  # steps/s the learner can consume
        print(f"measured: one actor collects {actor_rate:.0f} env steps/s; the learner consumes up to "
              f"{learner_rate:.0f} env steps/s ({r1['learn_s']:.1f} s of {r1['wall_s']:.1f} s learning)")
        for nodes in [int(x) for x in args.nodes.split(",")]:
            proj = min(nodes * 2 * actor_rate, learner_rate)
            print(f"PROJECTION (not measured): {nodes} nodes x 2 actors -> about {proj:.0f} env steps/s "
                  f"= min({nodes} x 2 x {actor_rate:.0f}, learner {learner_rate:.0f})")
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    new = not os.path.exists(RESULTS)
    command = "python " + " ".join(sys.argv)
    with open(RESULTS, "a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(["date", "commit", "command", "env", "algo", "backend", "actors", "seconds", "env_steps",
                        "env_steps_per_s", "time_to_475_s", "last_return", "scaling_efficiency_1_to_2", "peer"])
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        for n, r in results.items():
            w.writerow([now, commit(), command, env, "pbmarl IMPALA", backend, n, f"{r['wall_s']:.1f}",
                        r["env_steps"], f"{r['rate']:.1f}", "" if math.isnan(r["t475_s"]) else f"{r['t475_s']:.1f}",
                        f"{r['last_return']:.1f}", "" if math.isnan(eff) else f"{eff:.3f}", "RLlib not run"])
    print(f"rows appended to {RESULTS}")


if __name__ == "__main__":
    main()
