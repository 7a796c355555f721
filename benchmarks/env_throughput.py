"""Environment throughput: pbmarl's multi-agent collection vs what users write, on Gymnasium and MPE.

    python benchmarks/env_throughput.py                      # all three environments, about three minutes
    python benchmarks/env_throughput.py --seconds 3 --routes # and every stepper route of (c), side by side
    python benchmarks/env_throughput.py --only simple_spread_v3 --seconds 3 --no-ray

Env steps per second (one step = every live agent of one environment instance acts
once) on ``CartPole-v1``, ``Pendulum-v1`` and ``simple_spread_v3`` (3 agents, one
shared policy), all with one 64x64 MLP policy (softmax for discrete actions, the
tanh-squashed Gaussian for Pendulum):

(a) the raw environment loop with random actions, one instance: the limit of one core;
(b) what users write: Gymnasium ``SyncVectorEnv`` (8 instances) or a PettingZoo Parallel
    loop, with one torch forward pass per step; (b') for Gymnasium, the same with 64
    instances, as many as (c) steps;
(c) pbmarl local, one worker: ``pool.collect(policies=..., mapping=..., steps=...,
    whole_episodes=False)`` -- a fixed number of steps, as (b) takes -- on 64 copies
    stepped by the route ``stepper="auto"`` picks (the rows are recorded, too);
    (c whole) the same with whole episodes (the default: every episode played to its
    end, so each work unit ends with a tail where fewer copies run);
(d) pbmarl Ray, two workers, as (c) (Ray start and worker start-up not timed).

With ``--routes``, (c) is measured for every stepper route the environment has
(`pbmarl.envs.batch`: pbmarl's numpy port, Gymnasium's native vector env,
Gymnasium's ``SyncVectorEnv``, one environment object per copy): the measurement
behind the order in which ``stepper="auto"`` picks them. Targets: (c) >= 5x (b) on
simple_spread_v3; (d) >= 60% of (a) summed over this machine's cores. Every process
runs torch with one thread. Numbers are printed, never asserted; each run appends
rows (date, commit, command, load average) to benchmarks/results/env_throughput.csv.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import pbmarl as pb  # noqa: E402
from pbmarl.envs.batch import available_steppers, resolve_stepper  # noqa: E402

ENVS = {"CartPole-v1": "gym:CartPole-v1", "Pendulum-v1": "gym:Pendulum-v1",
        "simple_spread_v3": "pettingzoo:simple_spread_v3"}
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "env_throughput.csv")


def timed(fn: Callable[[float], int], seconds: float) -> float:
    """Steps per second of `fn(seconds)`, which runs about that long and returns its step count."""
    start = time.perf_counter()
    steps = fn(seconds)
    return steps / (time.perf_counter() - start)


# -- (a) raw loops --------------------------------------------------------------------------
def raw_gym(env_id: str) -> Callable[[float], int]:
    import gymnasium

    env = gymnasium.make(env_id)
    env.action_space.seed(0)

    def run(seconds: float) -> int:
        steps, end, ep = 0, time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            env.reset(seed=ep)
            ep += 1
            done = False
            while not done:
                _, _, term, trunc, _ = env.step(env.action_space.sample())
                done = term or trunc
                steps += 1
        return steps

    return run


def raw_spread() -> Callable[[float], int]:
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env()
    spaces = {a: env.action_space(a) for a in env.possible_agents}
    for i, s in enumerate(spaces.values()):
        s.seed(i)

    def run(seconds: float) -> int:
        steps, end, ep = 0, time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            env.reset(seed=ep)
            ep += 1
            while env.agents:
                env.step({a: spaces[a].sample() for a in env.agents})
                steps += 1
        return steps

    return run


# -- (b) what users write -----------------------------------------------------------------------
def mlp(in_dim: int, out_dim: int) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(in_dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, out_dim))


def user_sync_vector(env_id: str, num_envs: int = 8) -> Callable[[float], int]:
    import gymnasium
    import torch

    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(num_envs)])
    space = envs.single_action_space
    discrete = isinstance(space, gymnasium.spaces.Discrete)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    net = mlp(obs_dim, int(space.n) if discrete else 2 * int(np.prod(space.shape)))
    high = None if discrete else torch.as_tensor(space.high)

    def run(seconds: float) -> int:
        obs, _ = envs.reset(seed=0)
        steps, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            with torch.no_grad():
                out = net(torch.as_tensor(obs, dtype=torch.float32))
                if discrete:
                    action = torch.distributions.Categorical(logits=out).sample().numpy()
                else:
                    mu, log_std = out.chunk(2, dim=-1)
                    u = torch.distributions.Normal(mu, log_std.clamp(-20, 2).exp()).sample()
                    action = (torch.tanh(u) * high).numpy()
            obs, _, _, _, _ = envs.step(action)
            steps += num_envs
        return steps

    return run


def user_parallel_loop() -> Callable[[float], int]:
    import torch
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env()
    net = mlp(18, 5)

    def run(seconds: float) -> int:
        steps, end, ep = 0, time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            obs, _ = env.reset(seed=ep)
            ep += 1
            while env.agents:
                agents = list(env.agents)
                with torch.no_grad():
                    logits = net(torch.as_tensor(np.stack([obs[a] for a in agents])))
                    action = torch.distributions.Categorical(logits=logits).sample().numpy()
                obs, _, _, _, _ = env.step({a: int(action[k]) for k, a in enumerate(agents)})
                steps += 1
        return steps

    return run


# -- (c), (d) pbmarl --------------------------------------------------------------------------------
def pbmarl_setup(name: str) -> tuple[Any, Any, dict[str, Any]]:
    game = pb.load_game(ENVS[name])
    mapping = pb.AgentMapping.shared(game)
    view = mapping.group_game("shared")
    policy = (pb.policies.GaussianPolicy(view, hidden=(64, 64), seed=0) if view.num_actions == 0
              else pb.MLPPolicy(view, hidden=(64, 64)))
    return game, mapping, {"shared": policy}


def pbmarl_rate(name: str, seconds: float, *, whole_episodes: bool = False, **pool_kwargs: Any) -> float:
    game, mapping, policies = pbmarl_setup(name)
    with pb.RolloutPool(game, seed=0, envs_per_worker=64, **pool_kwargs) as pool:
        probe = 4_000
        kwargs = dict(policies=policies, mapping=mapping, whole_episodes=whole_episodes)
        pool.collect(steps=probe, **kwargs)  # warm up: workers, policies shipped
        start = time.perf_counter()
        pool.collect(steps=probe, **kwargs)
        per_second = probe / (time.perf_counter() - start)
        wanted = max(probe, int(per_second * seconds))

        def run(_: float) -> int:
            out = pool.collect(steps=wanted, **kwargs)
            return int(next(iter(out.values())).steps)

        return timed(run, seconds)


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(RESULTS), check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(ENVS), action="append", help="environment(s) to measure")
    parser.add_argument("--seconds", type=float, default=8.0, help="timing per measurement")
    parser.add_argument("--no-ray", action="store_true", help="skip (d)")
    parser.add_argument("--routes", action="store_true", help="also (c) for every stepper route the environment has")
    args = parser.parse_args()
    names = args.only or list(ENVS)
    cores = os.cpu_count() or 1
    import torch

    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    print(f"env steps per second; {cores} cores (load average {load:.1f} at start), torch {torch.__version__} "
          f"({torch.get_num_threads()} thread)\n")
    ray_error = None
    if not args.no_ray:
        try:
            pb.init_ray(num_cpus=cores)
        except Exception as exc:  # noqa: BLE001 - a busy machine: report it, measure the rest
            ray_error = f"{type(exc).__name__}: {exc}"
            print(f"(d) skipped: Ray did not start ({ray_error})\n")
    rows = []
    for name in names:
        a = timed(raw_spread() if name == "simple_spread_v3" else raw_gym(name), args.seconds)
        b = timed(user_parallel_loop() if name == "simple_spread_v3" else user_sync_vector(name), args.seconds)
        b64 = None if name == "simple_spread_v3" else timed(user_sync_vector(name, 64), args.seconds)
        game = pb.load_game(ENVS[name])
        route = resolve_stepper(game, "auto")
        c = pbmarl_rate(name, args.seconds)
        c_whole = pbmarl_rate(name, args.seconds, whole_episodes=True)
        routes = {r: (c if r == route else pbmarl_rate(name, args.seconds, stepper=r))
                  for r in (available_steppers(game) if args.routes else ())}
        d = None if args.no_ray or ray_error else pbmarl_rate(name, args.seconds, backend="ray", num_workers=2)
        user = "PettingZoo Parallel loop" if name == "simple_spread_v3" else "Gymnasium SyncVectorEnv(8)"
        print(name)
        print(f"  (a) raw loop, random actions, 1 core          {a:12,.0f}")
        print(f"  (b) {user:<26} + torch forward {b:12,.0f}")
        if b64 is not None:
            print(f"  (b') Gymnasium SyncVectorEnv(64) + torch forward {b64:11,.0f}")
        print(f"  (c) pbmarl local, 1 worker, 64 copies ({route}) {c:12,.0f}   (c)/(b) = {c / b:.2f}x, (c)/(a) = {c / a:.0%}")
        print(f"  (c whole) the same, whole episodes              {c_whole:12,.0f}   (c whole)/(b) = {c_whole / b:.2f}x")
        for r, rate in routes.items():
            print(f"      route {r:<20}                 {rate:12,.0f}   {rate / c:.2f}x auto")
        if d is not None:
            print(f"  (d) pbmarl Ray, 2 workers                      {d:12,.0f}   (d)/((a) x {cores} cores) = {d / (a * cores):.0%}")
        if name == "simple_spread_v3":
            print(f"      target (c) >= 5x (b): {'met' if c >= 5 * b else 'NOT met'} ({c / b:.1f}x)")
        if d is not None:
            print(f"      target (d) >= 60% of (a) x cores: {'met' if d >= 0.6 * a * cores else 'NOT met'} "
                  f"({d / (a * cores):.0%})")
        rows.append((name, a, b, b64, c, d, route, c_whole, routes))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = "python benchmarks/env_throughput.py " + " ".join(sys.argv[1:])
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    fresh = not os.path.exists(RESULTS)
    with open(RESULTS, "a", newline="") as f:
        writer = csv.writer(f)
        if fresh:
            writer.writerow(["date", "commit", "command", "env", "cores", "load_avg", "raw", "user", "user_vector64",
                             "pbmarl_local", "pbmarl_ray2", "local_over_user", "ray_over_raw_x_cores", "route",
                             "pbmarl_local_whole", "routes", "load_avg_end"])
        end_load = os.getloadavg()[0]
        for name, a, b, b64, c, d, route, c_whole, routes in rows:
            writer.writerow([stamp, commit(), command, name, cores, f"{load:.1f}", f"{a:.0f}", f"{b:.0f}",
                             "" if b64 is None else f"{b64:.0f}", f"{c:.0f}",
                             "" if d is None else f"{d:.0f}", f"{c / b:.3f}", "" if d is None else f"{d / (a * cores):.3f}",
                             route, f"{c_whole:.0f}", " ".join(f"{r}={v:.0f}" for r, v in routes.items()), f"{end_load:.1f}"])
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; appended {len(rows)} rows to {os.path.relpath(RESULTS)}")


if __name__ == "__main__":
    main()
