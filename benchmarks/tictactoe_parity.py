"""Tianshou parity on PettingZoo ``tictactoe_v3``: an independent DQN per agent against a random opponent.

The learner plays the second seat (``player_2``) against a uniformly random legal opponent, in pbmarl
(`pb.DQN` answering for its seat, the opponent seat played by `pb.RandomPolicy`) and in Tianshou 2.0's own
recipe (``MultiAgentOffPolicyAlgorithm``, its MultiAgentPolicyManager, run from its venv
/work/venvs/tianshou by benchmarks/peers/tianshou_tictactoe.py), with the recipe's settings on both sides:
Net 4 x 128, Adam lr 1e-4, gamma 0.9, target copy every 320 updates, epsilon 0.1 throughout, replay
20,000, batch 64, one gradient step per 10 env steps, 10 envs. Tianshou also uses 3-step returns; pbmarl's
DQN has 1-step targets (the one setting it does not have). Both train for the same env steps (every move
of either player counts) and are then played greedily for `--episodes` episodes against the random
opponent; the win, draw and loss rates are printed side by side with the random-vs-random reference.
Rows go to benchmarks/results/marl.csv (slice ``tictactoe``; ``summed_return`` is the learner's mean
episode reward, win 1 / draw 0 / loss -1; the rates are in ``reference``) with date, commit, command
and load average.

    python benchmarks/tictactoe_parity.py --steps 20000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl import append_rows, git_commit  # noqa: E402  (benchmarks/marl.py: the same results/marl.csv)

import pbmarl as pb  # noqa: E402

PEER = Path("/work/venvs/tianshou/bin/python")


def play(game: pb.games.Game, learner: pb.policies.Policy | None, episodes: int, seed: int) -> dict[str, float]:
    """The greedy `learner` (None: uniformly random) as player_2 against a uniformly random legal opponent."""
    rng = np.random.default_rng(seed)
    outcome = []
    for e in range(episodes):
        state = game.new_initial_state(seed=int(seed * 100_000 + e))
        while not state.is_terminal():
            p = state.current_player()
            mask = state.legal_mask(p)
            if p == 1 and learner is not None:
                probs = learner.action_probabilities(state.observation(p)[None], mask[None])[0]
                action = int(np.argmax(probs))
            else:
                action = int(rng.choice(np.flatnonzero(mask)))
            state.apply_action(action)
        outcome.append(state.returns()[1])
    r = np.asarray(outcome)
    return {"win": float((r > 0).mean()), "draw": float((r == 0).mean()), "loss": float((r < 0).mean()),
            "mean_reward": float(r.mean())}


def pbmarl_dqn(seed: int, steps: int, episodes: int) -> dict[str, Any]:
    game = pb.load_game("pettingzoo:tictactoe_v3")
    learner = pb.DQN(game, seed=seed, hidden=(128, 128, 128, 128), lr=1e-4, gamma=0.9, buffer_size=20_000,
                     batch_size=64, target_update_interval=320, epsilon_start=0.1, epsilon_end=0.1,
                     learning_starts=320, steps_per_round=50, updates_per_round=10, num_envs=10)
    t0 = time.perf_counter()
    task = learner.start(1, [pb.RandomPolicy(game), None], budget=10**9)
    while task.env_steps < steps:
        learner.step()
    policy, _ = learner.finish()
    wall = time.perf_counter() - t0
    return {"method": "pbmarl DQN (seat player_2)", "seed": seed, "env_steps": task.env_steps, "wall_s": round(wall, 1),
            **play(game, policy, episodes, seed)}


def tianshou(seed: int, steps: int, episodes: int) -> dict[str, Any] | None:
    if not PEER.exists():
        print(f"peer: Tianshou not run: its venv {PEER.parent.parent} does not exist here")
        return None
    script = Path(__file__).resolve().parent / "peers" / "tianshou_tictactoe.py"
    done = subprocess.run([str(PEER), str(script), "--steps", str(steps), "--seed", str(seed),
                           "--episodes", str(episodes)], capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        print("peer: Tianshou failed: " + " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:]))
        return None
    out = json.loads(lines[-1])
    return {"method": f"{out['peer']} MultiAgentOffPolicyAlgorithm DQN", "seed": seed, "env_steps": out["env_steps"],
            "wall_s": round(out["wall_s"], 1), **{k: out[k] for k in ("win", "draw", "loss", "mean_reward")}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--only", nargs="+", choices=("random", "pbmarl", "tianshou"),
                        default=["random", "pbmarl", "tianshou"])
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    base = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "commit": git_commit(),
            "command": "python benchmarks/tictactoe_parity.py " + " ".join(shlex.quote(a) for a in
                                                                            (argv or sys.argv[1:]))}
    rows = []
    for seed in args.seeds:
        found: list[dict[str, Any] | None] = []
        if "random" in args.only:
            found.append({"method": "uniform random (reference)", "seed": seed, "env_steps": 0, "wall_s": 0.0,
                          **play(pb.load_game("pettingzoo:tictactoe_v3"), None, args.episodes, seed)})
        if "pbmarl" in args.only:
            found.append(pbmarl_dqn(seed, args.steps, args.episodes))
        if "tianshou" in args.only:
            found.append(tianshou(seed, args.steps, args.episodes))
        for row in found:
            if row is None:
                continue
            row = {**base, "load_avg": " ".join(f"{x:.2f}" for x in os.getloadavg()), **row}
            rows.append(row)
            print(f"{row['method']:>48} seed {seed}: {row['env_steps']:>6} env steps | win {row['win']:.3f} "
                  f"draw {row['draw']:.3f} loss {row['loss']:.3f} | mean reward {row['mean_reward']:+.3f} | "
                  f"{row['wall_s']} s | load {row['load_avg']}", flush=True)
    if rows and not args.no_record:
        append_rows([r | {
            "slice": "tictactoe", "game": "pettingzoo:tictactoe_v3", "summed_return": r["mean_reward"],
            "reference": f"learner as player_2 vs uniform random, greedy over {args.episodes} episodes: "
                         f"win {r['win']:.3f} draw {r['draw']:.3f} loss {r['loss']:.3f}"} for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
