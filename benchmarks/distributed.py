"""Distributed learners beside RLlib 2.60: env steps/s with 1 and 2 actors, time to 475 on CartPole, scaling.

    python benchmarks/distributed.py --backend ray --seconds 25 --envs CartPole-v1       # one slice
    python benchmarks/distributed.py --backend ray --seconds 25 --envs simple_spread_v3  # the other
    python benchmarks/distributed.py --backend local --seconds 20 --no-rllib             # no Ray at all

For each environment and actor count, pbmarl's IMPALA (V-trace learner, actors with
batched inference) and Ape-X DQN (central replay actor) train for `--seconds` of wall
time; then RLlib 2.60's IMPALA and DQN (new API stack, local learner) train for the same
time with as many env runners, each in a fresh process of RLlib's own venv
(`--rllib-python`, default /work/venvs/rllib/bin/python; see benchmarks/distributed_rllib.py).
pbmarl's Ray is shut down before RLlib's runs, so the two never share the machine.

Printed, side by side: env steps per second (data consumed by pbmarl's learner; RLlib's
env steps sampled), the wall time at which a round's (RLlib: an iteration's) mean return
first reached 475 on CartPole (Ape-X: its greedy policy's return over 10 episodes, evaluated
every 5 s inside the measured time, since its actors explore at fixed rates), the ratios against the issue's targets (throughput >= 2x
RLlib's, time to 475 <= RLlib's), the scaling efficiency ``rate(2) / (2 rate(1))``, and a
PROJECTION to N nodes from pbmarl IMPALA's measured one-actor collection rate and its
learner (server) seconds per step: ``min(N * 2 * r_actor, r_learner)`` — a projection, not a
measurement. pbmarl's wall time includes its actors' start-up; RLlib's starts after
``build_algo()``. If RLlib cannot run something here, the reason is printed.
Rows (date, git commit, command, load average) are appended to
benchmarks/results/distributed.csv.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "distributed.csv")
HEADER = ["date", "commit", "command", "env", "algo", "backend", "actors", "seconds", "env_steps", "env_steps_per_s",
          "time_to_475_s", "last_return", "scaling_efficiency_1_to_2", "peer", "load_average"]
PAIRS = {"impala": ("IMPALA", "impala"), "apex": ("ApeX", "dqn")}  # pbmarl learner, RLlib algorithm


def make_game(env: str) -> tuple[Any, list[Any]]:
    import pbmarl as pb

    if env == "simple_spread_v3":  # seat 0 learns; the other two agents act at random
        game = pb.load_game("pettingzoo:simple_spread_v3", N=3, max_cycles=25)
        return game, [None] + [pb.RandomPolicy(game) for _ in range(game.num_players - 1)]
    return pb.load_game(f"gym:{env}"), [None]


#: Ape-X on CartPole: rl-zoo's DQN network, learning rate and replay size, and its replay ratio (128 updates
#: per 256 env steps) as `updates_per_step` (actors return whole episodes, up to 8 x 500 steps a batch); the
#: earlier fixed 16 updates a round fell to one update per ~250 steps as episodes grew, and the greedy
#: return stayed near 250 after 60 s. With these, a local run (seeds 0, 1, 2) first evaluated at >= 475
#: after 40, 67 and 82 s.
APEX_CARTPOLE: dict[str, Any] = {"hidden": (256, 256), "lr": 2.3e-3, "updates_per_step": 0.5,
                                 "target_update_interval": 128, "buffer_size": 100_000}


def run_pbmarl(kind: str, env: str, actors: int, backend: str, seconds: float, seed: int) -> dict[str, float]:
    import pbmarl as pb

    game, opponents = make_game(env)
    common = {"backend": backend, "steps_per_round": 256, "num_envs": 8, "hidden": (64, 64), "gamma": 0.99,
              "budget": 10**9, "seed": seed, "opponents": opponents}
    if kind == "impala":
        learner: Any = pb.IMPALA(game, actors=actors, lr=3e-3, **common)
    else:
        options = dict(lr=5e-4, batch_size=64, learning_starts=1000, updates_per_round=16, publish_interval=4,
                       buffer_size=50_000, target_update_interval=250)
        if env == "CartPole-v1":  # rl-zoo's CartPole DQN sizes, with its 128 updates per 256 env steps as a ratio
            options = {**options, **APEX_CARTPOLE}
        learner = pb.ApeX(game, actors=actors, **{**common, **options})
    # Ape-X's actors explore at fixed rates (0.4 for one actor), so their returns never show what the
    # learner knows: on CartPole its greedy policy plays 10 fixed episodes every EVAL_EVERY seconds instead,
    # inside the measured wall time (RLlib's DQN reports its training return, epsilon annealed to 0.05)
    greedy = kind == "apex" and env == "CartPole-v1"
    t0 = time.perf_counter()
    t475, last, next_eval = math.nan, math.nan, EVAL_EVERY
    try:
        while time.perf_counter() - t0 < seconds:
            record = learner.step()
            value = record["return/0"]
            if greedy:
                if time.perf_counter() - t0 < next_eval:
                    continue
                next_eval += EVAL_EVERY
                value = greedy_return(learner)
            if not math.isnan(value):
                last = value
                if math.isnan(t475) and last >= 475:
                    t475 = time.perf_counter() - t0
    finally:
        wall = time.perf_counter() - t0
        steps = learner.records[-1].env_steps if learner.records else 0
        learn_s = float(getattr(learner, "learn_seconds", math.nan))
        learner.close()
    return {"wall_s": wall, "env_steps": steps, "rate": steps / wall, "t475_s": t475, "last_return": last,
            "learn_s": learn_s}


#: seconds between the greedy evaluations of Ape-X on CartPole
EVAL_EVERY = 5.0


def greedy_return(learner: Any, episodes: int = 10) -> float:
    """Mean return of the learner's greedy Q policy over `episodes` fixed-seed CartPole episodes.

    The episodes run side by side, one batched forward pass per step for those still playing
    (the evaluation's time counts against pbmarl's measured wall time)."""
    import gymnasium
    import numpy as np
    import torch

    envs = [gymnasium.make("CartPole-v1") for _ in range(episodes)]
    obs = [env.reset(seed=10_000 + s)[0] for s, env in enumerate(envs)]
    totals, live = [0.0] * episodes, list(range(episodes))
    while live:
        with torch.no_grad():
            actions = learner.q_net(torch.as_tensor(np.asarray([obs[i] for i in live], np.float32))).argmax(1).tolist()
        still = []
        for i, action in zip(live, actions):
            obs[i], r, term, trunc, _ = envs[i].step(int(action))
            totals[i] += float(r)
            if not (term or trunc):
                still.append(i)
        live = still
    return float(np.mean(totals))


def run_rllib(python: str, algo: str, env: str, runners: int, seconds: float, seed: int) -> dict[str, Any]:
    """One RLlib measurement in a fresh process of RLlib's venv; ``{"error": why}`` when it could not run."""
    if not os.path.exists(python):
        return {"error": f"no RLlib venv at {python} (python3 -m venv /work/venvs/rllib && "
                         "/work/venvs/rllib/bin/pip install 'ray[rllib]==2.60.0' torch==2.13.0 gymnasium pettingzoo mpe2)"}
    env_vars = dict(os.environ, RAY_AUTH_MODE="disabled")
    env_vars.pop("RAY_ADDRESS", None)
    env_vars.pop("PYTHONPATH", None)
    cmd = [python, os.path.join(HERE, "distributed_rllib.py"), "--algo", algo, "--env", env, "--runners", str(runners),
           "--seconds", str(seconds), "--seed", str(seed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env_vars, timeout=seconds + 240)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {seconds + 240:.0f} s"}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RLLIB_RESULT ")]
    if not lines:
        return {"error": f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['no output'])[-1][:300]}"}
    out: dict[str, Any] = json.loads(lines[-1][len("RLLIB_RESULT "):])
    return out


def fmt_time(t: float) -> str:
    return "not reached" if math.isnan(t) else f"{t:.1f} s"


def efficiency(rates: dict[int, float]) -> float:
    return rates[2] / (2 * rates[1]) if 1 in rates and 2 in rates and rates[1] > 0 else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["local", "ray"], default="ray")
    parser.add_argument("--seconds", type=float, default=25.0, help="wall time of every measurement")
    parser.add_argument("--actors", default="1,2", help="comma-separated actor (RLlib: env runner) counts")
    parser.add_argument("--envs", default="CartPole-v1,simple_spread_v3", help="comma-separated environments")
    parser.add_argument("--algos", default="impala,apex", help="pbmarl learners: impala (vs RLlib IMPALA), apex (vs DQN)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nodes", default="1,2,4,8", help="node counts of the projection")
    parser.add_argument("--rllib-python", default="/work/venvs/rllib/bin/python")
    parser.add_argument("--no-rllib", action="store_true", help="measure pbmarl only")
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
    envs, algos = args.envs.split(","), args.algos.split(",")
    counts = [int(a) for a in args.actors.split(",")]
    ours: dict[tuple[str, str, int], dict[str, float]] = {}
    for env in envs:
        for kind in algos:
            for n in counts:
                r = ours[env, kind, n] = run_pbmarl(kind, env, n, backend, args.seconds, args.seed)
                print(f"pbmarl {PAIRS[kind][0]} {env} {backend} actors={n}: {r['rate']:.0f} env steps/s, "
                      f"475 at {fmt_time(r['t475_s'])}, last return {r['last_return']:.1f}", flush=True)
    if backend == "ray":
        import ray

        ray.shutdown()  # RLlib's runs get the machine to themselves
    theirs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for env in envs:
        for kind in algos:
            for n in counts:
                if args.no_rllib:
                    theirs[env, kind, n] = {"error": "not run (--no-rllib)"}
                    continue
                t = run_rllib(args.rllib_python, PAIRS[kind][1], env, n, args.seconds, args.seed)
                if kind == "impala" and "error" not in t and not t.get("env_steps"):
                    why = f"RLlib IMPALA reported 0 env steps sampled in {t['wall_s']:.0f} s; APPO instead"
                    print(why, flush=True)
                    t = run_rllib(args.rllib_python, "appo", env, n, args.seconds, args.seed)
                    t["note"] = why
                theirs[env, kind, n] = t
                state = t["error"] if "error" in t else f"{t['rate']:.0f} env steps/s"
                print(f"RLlib {t.get('algo', PAIRS[kind][1]).upper()} {env} runners={n}: {state}", flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report(envs, algos, counts, ours, theirs, backend, load, args)
    append_rows(envs, algos, counts, ours, theirs, backend, load, args.seconds)


def report(envs: list[str], algos: list[str], counts: list[int], ours: dict, theirs: dict, backend: str,
           load: str, args: argparse.Namespace) -> None:
    print(f"\n=== pbmarl ({backend}) vs RLlib 2.60, {args.seconds:.0f} s each, same machine; "
          f"load average at the end {load} ===")
    print(f"{'env':<17} {'pbmarl / RLlib':<15} {'n':>2} {'pbmarl st/s':>11} {'RLlib st/s':>10} {'ratio':>6} "
          f"{'(>=2)':>5} {'pbmarl 475':>11} {'RLlib 475':>11} {'(<=)':>4}")
    for env in envs:
        for kind in algos:
            for n in counts:
                r, t = ours[env, kind, n], theirs[env, kind, n]
                name = f"{PAIRS[kind][0]} / {str(t.get('algo', PAIRS[kind][1])).upper()}"
                if "error" in t:
                    print(f"{env:<17} {name:<15} {n:>2} {r['rate']:>11.0f} {'-':>10} {'-':>6} {'':>5} "
                          f"{fmt_time(r['t475_s']):>11} {'-':>11}   RLlib: {t['error']}")
                    continue
                ratio = r["rate"] / t["rate"] if t["rate"] > 0 else math.inf
                ok_rate = "yes" if ratio >= 2 else "no"
                ok_time = "-"
                if env == "CartPole-v1":
                    a, b = r["t475_s"], float(t.get("t475_s", math.nan))
                    ok_time = "no" if math.isnan(a) else "yes" if math.isnan(b) or a <= b else "no"
                print(f"{env:<17} {name:<15} {n:>2} {r['rate']:>11.0f} {t['rate']:>10.0f} {ratio:>6.2f} {ok_rate:>5} "
                      f"{fmt_time(r['t475_s']):>11} {fmt_time(float(t.get('t475_s', math.nan))):>11} {ok_time:>4}")
        for kind in algos:
            e_ours = efficiency({n: ours[env, kind, n]["rate"] for n in counts})
            e_theirs = efficiency({n: theirs[env, kind, n]["rate"] for n in counts if "error" not in theirs[env, kind, n]})
            print(f"{env}: scaling efficiency 1 -> 2 actors: pbmarl {PAIRS[kind][0]} {e_ours:.2f}, "
                  f"RLlib {str(theirs[env, kind, counts[0]].get('algo', PAIRS[kind][1])).upper()} {e_theirs:.2f}")
        if "impala" in algos and 1 in counts:
            r1 = ours[env, "impala", 1]
            actor_rate = r1["env_steps"] / max(r1["wall_s"] - r1["learn_s"], 1e-9)  # one actor's collection rate
            learner_rate = r1["env_steps"] / max(r1["learn_s"], 1e-9)  # steps/s the learner (server) can consume
            print(f"{env}: measured, pbmarl IMPALA 1 actor: it collects {actor_rate:.0f} env steps/s; the learner "
                  f"consumes up to {learner_rate:.0f} ({r1['learn_s']:.1f} s of {r1['wall_s']:.1f} s learning)")
            for nodes in [int(x) for x in args.nodes.split(",")]:
                proj = min(nodes * 2 * actor_rate, learner_rate)
                print(f"  PROJECTION (not measured): {nodes} nodes x 2 actors -> about {proj:.0f} env steps/s "
                      f"= min({nodes} x 2 x {actor_rate:.0f}, learner {learner_rate:.0f})")


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=HERE).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def append_rows(envs: list[str], algos: list[str], counts: list[int], ours: dict, theirs: dict, backend: str,
                load: str, seconds: float) -> None:
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    new = not os.path.exists(RESULTS)
    command = "python " + " ".join(sys.argv)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rev = commit()

    def cell(x: float | None, f: str = "{:.1f}") -> str:
        return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f.format(x)

    with open(RESULTS, "a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(HEADER)
        for env in envs:
            for kind in algos:
                mine = efficiency({n: ours[env, kind, n]["rate"] for n in counts})
                peer_ok = {n: theirs[env, kind, n] for n in counts if "error" not in theirs[env, kind, n]}
                peer_eff = efficiency({n: t["rate"] for n, t in peer_ok.items()})
                for n in counts:
                    r, t = ours[env, kind, n], theirs[env, kind, n]
                    peer = t["error"] if "error" in t else f"RLlib {str(t['algo']).upper()} {t['rate']:.1f} steps/s"
                    w.writerow([now, rev, command, env, f"pbmarl {PAIRS[kind][0]}", backend, n, f"{r['wall_s']:.1f}",
                                r["env_steps"], f"{r['rate']:.1f}", cell(r["t475_s"]), cell(r["last_return"]),
                                cell(mine, "{:.3f}"), peer, load])
                    if "error" not in t:
                        w.writerow([now, rev, command, env, f"RLlib {t.get('ray', '')} {str(t['algo']).upper()}",
                                    "ray", n, f"{t['wall_s']:.1f}", int(t["env_steps"]), f"{t['rate']:.1f}",
                                    cell(t.get("t475_s")), cell(t.get("last_return")), cell(peer_eff, "{:.3f}"),
                                    "peer", load])
    print(f"rows appended to {RESULTS}")


if __name__ == "__main__":
    main()
