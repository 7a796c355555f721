"""Rollout throughput: pbmarl's batched runner vs the game's own loop and the usual alternative.

    python benchmarks/rollout_throughput.py            # full run (about three minutes, Ray start included)
    python benchmarks/rollout_throughput.py --quick    # shorter timings

Env steps (player decisions) per second, side by side, with two-layer MLP policies
(128 units, ``MLPPolicy(game, hidden=(128, 128))``) in both seats:

(a) the raw game loop with random legal moves (plain pyspiel / plain PettingZoo): the limit;
(b) what users of the underlying library write: OpenSpiel's ``rl_environment.Environment``
    (or a PettingZoo AEC loop) stepped with one torch forward pass per step;
(c) pbmarl's local backend, one worker (engine "auto": the compiled tree for Leduc,
    states for connect_four); Leduc also shows the state engine, (c'), for reference;
(d) pbmarl's Ray backend with 2 workers (Ray start and worker start-up not timed).

Targets: (c) >= 20x (b); (d) >= 50% of (a) summed over this machine's cores.
Every process runs torch with one thread (Ray's workers do; on a small shared machine
multi-threaded torch is several times slower for these batch sizes, for (b) too).
Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import pbmarl as pb  # noqa: E402


def rate(fn: Callable[[float], int], seconds: float) -> float:
    """Steps per second of `fn(seconds)`, which runs for about that long and returns its step count."""
    start = time.perf_counter()
    steps = fn(seconds)
    return steps / (time.perf_counter() - start)


# -- Leduc through OpenSpiel --------------------------------------------------------------
def raw_pyspiel(name: str) -> Callable[[float], int]:
    import pyspiel

    game = pyspiel.load_game(name)
    rng = random.Random(0)

    def run(seconds: float) -> int:
        steps, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(200):
                state = game.new_initial_state()
                while not state.is_terminal():
                    if state.is_chance_node():
                        outcomes = state.chance_outcomes()
                        state.apply_action(outcomes[rng.randrange(len(outcomes))][0])
                    else:
                        state.apply_action(rng.choice(state.legal_actions()))
                        steps += 1
        return steps

    return run


def torch_sample(policy: Any, obs: np.ndarray, legal: list[int], num_actions: int, rng: np.random.Generator) -> int:
    import torch

    with torch.no_grad():
        logits = policy.net(torch.as_tensor(obs, dtype=torch.float32)[None])[0]
        mask = torch.full((num_actions,), float("-inf"))
        mask[legal] = 0.0
        probs = torch.softmax(logits + mask, dim=-1).numpy()
    return int(rng.choice(num_actions, p=probs / probs.sum()))


def openspiel_rl_env(name: str, policies: list[Any]) -> Callable[[float], int]:
    from open_spiel.python import rl_environment

    env = rl_environment.Environment(name)
    num_actions = env.action_spec()["num_actions"]
    rng = np.random.default_rng(0)

    def run(seconds: float) -> int:
        steps, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            time_step = env.reset()
            while not time_step.last():
                p = time_step.observations["current_player"]
                obs = np.asarray(time_step.observations["info_state"][p], dtype=np.float32)
                action = torch_sample(policies[p], obs, time_step.observations["legal_actions"][p], num_actions, rng)
                time_step = env.step([action])
                steps += 1
        return steps

    return run


# -- connect_four through PettingZoo ------------------------------------------------------
def raw_pettingzoo(env_id: str, policies: list[Any] | None) -> Callable[[float], int]:
    from pettingzoo import make

    env = make("aec", env_id)
    agents = list(env.possible_agents)
    rng = np.random.default_rng(0)

    def run(seconds: float) -> int:
        steps, end = 0, time.perf_counter() + seconds
        seed = 0
        while time.perf_counter() < end:
            env.reset(seed=seed)
            seed += 1
            for agent in env.agent_iter():
                obs, _, term, trunc, _ = env.last()
                if term or trunc:
                    env.step(None)
                    continue
                legal = np.flatnonzero(obs["action_mask"])
                if policies is None:
                    action = int(rng.choice(legal))
                else:
                    flat = np.asarray(obs["observation"], dtype=np.float32).ravel()
                    action = torch_sample(policies[agents.index(agent)], flat, list(legal), len(obs["action_mask"]), rng)
                env.step(action)
                steps += 1
        return steps

    return run


# -- pbmarl -------------------------------------------------------------------------------
def pbmarl_pool(pool: Any, profile: list[Any], episodes_per_second: float) -> Callable[[float], int]:
    def run(seconds: float) -> int:
        episodes = max(1, int(episodes_per_second * seconds))
        return int(pool.evaluate(profile, episodes, progress=False).steps)

    return run


def calibrate(pool: Any, profile: list[Any], probe: int) -> float:
    """Episodes per second of `pool` (also warms it up: workers started, tree compiled)."""
    pool.evaluate(profile, probe, progress=False)
    start = time.perf_counter()
    pool.evaluate(profile, probe, progress=False)
    return probe / (time.perf_counter() - start)


def measure_pool(game: Any, profile: list[Any], seconds: float, probe: int, **kwargs: Any) -> float:
    with pb.RolloutPool(game, seed=0, **kwargs) as pool:
        eps = calibrate(pool, profile, probe)
        return rate(pbmarl_pool(pool, profile, eps), seconds)


def row(label: str, value: float | None, ref: float | None = None, note: str = "") -> str:
    if value is None:
        return f"  {label:<58} {'—':>14}"
    ratio = f"{value / ref:9.1f}x (b)" if ref else ""
    return f"  {label:<58} {value:14,.0f} {ratio} {note}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter timings")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray column")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 6.0
    cores = os.cpu_count() or 1
    import torch

    torch.set_num_threads(1)  # one thread per process, as in Ray workers; also (b)'s best setting here
    print(f"rollout throughput, env steps (decisions) per second; {cores} cores, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), numpy {np.__version__}\n")

    leduc = pb.load_game("leduc_poker")
    nets = [pb.MLPPolicy(leduc, hidden=(128, 128), seed=s) for s in (0, 1)]
    a = rate(raw_pyspiel("leduc_poker"), seconds)
    b = rate(openspiel_rl_env("leduc_poker", nets), seconds)
    c = measure_pool(leduc, nets, seconds, 20_000)
    c_states = measure_pool(leduc, nets, seconds, 2_000, engine="states")
    c4 = pb.load_game("pettingzoo:connect_four_v3")
    c4_nets = [pb.MLPPolicy(c4, hidden=(128, 128), seed=s) for s in (0, 1)]
    pa = rate(raw_pettingzoo("classic/connect_four-v3", None), seconds)
    pb_ = rate(raw_pettingzoo("classic/connect_four-v3", c4_nets), seconds)
    pc = measure_pool(c4, c4_nets, seconds, 256)

    d = pd = None
    if not args.no_ray:
        started = time.perf_counter()
        pb.init_ray(num_cpus=cores)
        ray_start = time.perf_counter() - started
        d = measure_pool(leduc, nets, seconds, 50_000, num_workers=2, backend="ray")
        pd = measure_pool(c4, c4_nets, seconds, 512, num_workers=2, backend="ray")

    limit = a * cores
    print("Leduc poker (OpenSpiel), MLP(128, 128) in both seats")
    print(row("(a) raw pyspiel loop, random legal moves, 1 core", a))
    print(row("(b) OpenSpiel rl_environment + one torch forward per step", b))
    print(row("(c) pbmarl local, 1 worker (compiled tree)", c, b))
    print(row("(c') pbmarl local, 1 worker, engine='states'", c_states, b))
    print(row("(d) pbmarl Ray, 2 workers", d, b))
    print(f"    target (c) >= 20x (b): {c / b:.1f}x -> {'met' if c >= 20 * b else 'NOT met'}")
    if d is not None:
        print(f"    target (d) >= 50% of (a) x {cores} cores = {0.5 * limit:,.0f}: "
              f"{d / limit:.0%} of (a) x cores -> {'met' if d >= 0.5 * limit else 'NOT met'}")
    print("\nconnect_four (PettingZoo AEC), MLP(128, 128) in both seats")
    print(row("(a) raw PettingZoo loop, random legal moves, 1 core", pa))
    print(row("(b) PettingZoo loop + one torch forward per step", pb_))
    print(row("(c) pbmarl local, 1 worker (states)", pc, pb_))
    print(row("(d) pbmarl Ray, 2 workers", pd, pb_))
    print(f"    (c) / (b) = {pc / pb_:.1f}x; (c) / (a) = {pc / pa:.0%}"
          + (f"; (d) / ((a) x {cores} cores) = {pd / (pa * cores):.0%}" if pd is not None else ""))
    if not args.no_ray:
        print(f"\nRay start-up (not in the numbers above): {ray_start:.1f} s")


if __name__ == "__main__":
    main()
