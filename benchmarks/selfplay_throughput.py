"""Env steps per second of PPO self-play on liar's dice: pbmarl's `PPOSelfPlay` beside the IIG benchmark's own code.

Issue 47's target: pbmarl's env steps per second at least 2x the paper's code (Rudolph, Lichtlé,
Mohammadpour et al., ICLR 2026, arXiv 2502.08938; GitHub nathanlct/IIG-RL-Benchmark) on the same
machine. Both train PPO in self-play with the paper's tuned liar's dice setting
(``best_hyperparameters/min_final_expl_hparams/ppo/liars_dice/best_hparams.yaml``: 8 envs x 256 steps,
8 epochs, 1 minibatch) for the same env steps, with no exploitability measured in between, one torch
thread each (the machine is shared). Env steps count every player's decisions, as both codes do.

* ``pbmarl``: `pb.PPOSelfPlay(game, preset="iig_liars_dice", eval_every=0)` twice: with the preset's
  networks (pbmarl's default, two hidden layers of 128) and with the paper's width (three hidden layers
  of 512, for actor and critic; the paper's use tanh, pbmarl's ReLU). The second is the like-for-like row.
* ``paper``: the repository's ``algorithms/ppo/run_ppo.py`` ``RunPPO`` (its ``main.py`` imports the
  exp-a-spiel C++ extension, which liar's dice does not use, and at 591d35d lists no liar's dice game, so
  the runner is driven directly, its exploitability callback None), in a
  venv of its own found by ``--peer-python``, from a checkout at ``--peer-dir`` (neither is part of pbmarl;
  the peer's code is never imported here). Its ``configs/algorithm/ppo.yaml`` defaults under the tuned
  yaml, as hydra composes them.

* ``floor``: torch alone doing the same arithmetic as the like-for-like rows, with no game, no rollout
  storage and no loss bookkeeping: the paper width's actor and critic (three hidden layers of 512) acting
  on 8 observations 256 times a round, then 8 epochs of one 2048-sample minibatch with Adam. No PPO at this
  width that trains on every decision it plays, as the paper's does, can run faster on the machine, so
  ``floor / paper`` bounds the speed-up such an implementation can show against the paper's code.

**Read the ratio with this in mind.** Both count env steps the same way, but they do not learn from them
alike: the paper's round trains on all 2048 decisions it played; pbmarl's round collects 1024 decisions of
each seat, in games where the other seat's decisions (played by the same current policy) count as env steps
but are not trained on, so it plays about 4,200 env steps a round for its 2048 training samples. For the
same env steps pbmarl takes half the gradient steps; per trained sample, the two run at about the same
speed at the paper's width (measured 2026-11-29: 42.8 s for 25 rounds against the paper's 87.2 s for 50,
and the torch-only floor 68.5 s for 50). The ``floor`` row shows what an implementation that trains on
every decision could reach at most.

The paper's liar's dice is ``liars_dice(numdice=2,dice_sides=5)`` ("LD2D5F", 15.73M information states, as
a summary of the ICLR version has it; the paper's code names no variant); ``--game`` defaults to OpenSpiel's ``liars_dice`` (1 die, 6 sides), the game
``benchmarks/selfplay.py`` measures exactly.

    python benchmarks/selfplay_throughput.py --steps 102400                     # both sides, 50 rounds each
    python benchmarks/selfplay_throughput.py --steps 102400 --game 'liars_dice(numdice=2,dice_sides=5)'
    python benchmarks/selfplay_throughput.py --only paper --peer-python /tmp/iigvenv/bin/python

Rows go to ``benchmarks/results/selfplay_throughput.csv`` with the date, commit, machine and command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rows import Stamp, append, load_avg  # noqa: E402

FIELDS = ["date", "commit", "machine", "command", "game", "impl", "net", "seed", "env_steps", "wall_s",
          "env_steps_per_s", "threads", "load_avg", "versions"]
IMPLS = ("pbmarl", "paper", "floor")
PAPER_NET = (512, 512, 512)

# Run by the peer's python (-c), with the checkout on sys.path: builds the runner's config from the two yaml
# files and times RunPPO.run(). Prints one JSON line.
PEER_DRIVER = r"""
import json, sys, tempfile, time, types
args = json.loads(sys.argv[1])
sys.path.insert(0, args["peer_dir"])
import yaml, torch, pyspiel, numpy as np, random
torch.set_num_threads(args["threads"])
from algorithms.ppo.run_ppo import RunPPO
algo = yaml.safe_load(open(args["peer_dir"] + "/configs/algorithm/ppo.yaml"))
algo.update(yaml.safe_load(open(args["peer_dir"] + "/" + args["hparams"])))
algo["cuda"] = False
seed = args["seed"]
torch.manual_seed(seed); np.random.seed(seed); random.seed(seed)
with tempfile.TemporaryDirectory() as tmp:
    cfg = types.SimpleNamespace(algorithm=types.SimpleNamespace(**algo), seed=seed, max_steps=args["steps"],
                                compute_exploitability_every=10**12, experiment_dir=tmp)
    runner = RunPPO(cfg, pyspiel.load_game(args["game"]), None)
    t0 = time.perf_counter()
    runner.run()
    wall = time.perf_counter() - t0
from importlib.metadata import version
print(json.dumps({"env_steps": int(runner.agent.total_steps_done), "wall": wall,
                  "versions": f"torch {torch.__version__} open_spiel {version('open_spiel')}",
                  "net": "actor+critic 3x512 tanh"}))
"""
PEER_HPARAMS = "best_hyperparameters/min_final_expl_hparams/ppo/liars_dice/best_hparams.yaml"


def run_pbmarl(game: str, steps: int, seed: int, hidden: tuple[int, ...] | None) -> dict[str, object]:
    import torch

    import pbmarl as pb

    extra = {} if hidden is None else {"hidden": hidden}
    run = pb.PPOSelfPlay(game, seed=seed, preset="iig_liars_dice", budget=steps, eval_every=0, **extra)
    t0 = time.perf_counter()
    with run:
        while not run.done:
            record = run.step()
    wall = time.perf_counter() - t0
    net = "x".join(map(str, run.config.hidden)) + " relu"
    return {"env_steps": record.env_steps, "wall": wall, "net": f"actor+critic {net}",
            "versions": f"torch {torch.__version__} open_spiel {version('open_spiel')}"}


def run_floor(game: str, steps: int, seed: int) -> dict[str, object]:
    """The same networks and updates as the paper's setting, in torch alone (see the module doc)."""
    import pyspiel
    import torch

    from pbmarl.policies.neural import build_mlp  # Linear/ReLU layers, as pbmarl's own rows build them

    torch.manual_seed(seed)
    spiel = pyspiel.load_game(game)
    width, actions = spiel.information_state_tensor_size(), spiel.num_distinct_actions()

    actor, critic = build_mlp(width, PAPER_NET, actions), build_mlp(width, PAPER_NET, 1)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=6.25e-5)
    envs, horizon, epochs = 8, 256, 8
    small, batch = torch.randn(envs, width), torch.randn(envs * horizon, width)
    rounds = -(-steps // (envs * horizon))
    t0 = time.perf_counter()
    for _ in range(rounds):
        with torch.no_grad():
            for _ in range(horizon):
                actor(small), critic(small)
        for _ in range(epochs):
            loss = actor(batch).logsumexp(-1).mean() + critic(batch).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return {"env_steps": rounds * envs * horizon, "wall": time.perf_counter() - t0,
            "net": "actor+critic 512x512x512 relu, torch only",
            "versions": f"torch {torch.__version__} open_spiel {version('open_spiel')}"}


def run_paper(game: str, steps: int, seed: int, peer_python: str, peer_dir: str, threads: int) -> dict[str, object]:
    if not Path(peer_python).exists():
        raise SystemExit(f"--peer-python {peer_python!r} does not exist: make a venv with open_spiel, torch and "
                         "PyYAML (see the module doc), or run --only pbmarl")
    if not (Path(peer_dir) / "algorithms" / "ppo" / "run_ppo.py").exists():
        raise SystemExit(f"--peer-dir {peer_dir!r} holds no algorithms/ppo/run_ppo.py: check out "
                         "nathanlct/IIG-RL-Benchmark there, or run --only pbmarl")
    args = {"peer_dir": str(Path(peer_dir).resolve()), "game": game, "steps": steps, "seed": seed, "threads": threads,
            "hparams": PEER_HPARAMS}
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    proc = subprocess.run([peer_python, "-c", PEER_DRIVER, json.dumps(args)], capture_output=True, text=True, env=env,
                          cwd=peer_dir)
    if proc.returncode:
        raise SystemExit(f"the paper's PPO failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=IMPLS, help="run only this side (repeatable)")
    parser.add_argument("--steps", type=int, default=204_800, help="env steps per run (default 100 rounds of 2048)")
    parser.add_argument("--game", default="liars_dice", help="an OpenSpiel game string (default: liars_dice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peer-python", default="/tmp/iigvenv/bin/python", help="python of the paper code's venv")
    parser.add_argument("--peer-dir", default="/tmp/IIG-RL-Benchmark", help="checkout of nathanlct/IIG-RL-Benchmark")
    parser.add_argument("--pbmarl-nets", default="preset,paper",
                        help="pbmarl's network widths, comma-separated: preset (the preset's) and/or paper (3x512)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be a positive int, got {args.steps}")
    nets = [n.strip() for n in args.pbmarl_nets.split(",") if n.strip()]
    bad = [n for n in nets if n not in ("preset", "paper")]
    if bad or not nets:
        parser.error(f"--pbmarl-nets takes preset and/or paper, got {args.pbmarl_nets!r}")
    threads = 1
    import torch

    torch.set_num_threads(threads)  # pbmarl's side and the floor run here; the paper's gets it in its own process
    stamp = Stamp("benchmarks/selfplay_throughput.py", argv)
    rows = []
    for impl in args.only or IMPLS:
        for net in nets if impl == "pbmarl" else [impl]:
            load = load_avg(minutes=1)
            if impl == "pbmarl":
                out = run_pbmarl(args.game, args.steps, args.seed, None if net == "preset" else PAPER_NET)
            elif impl == "floor":
                out = run_floor(args.game, args.steps, args.seed)
            else:
                out = run_paper(args.game, args.steps, args.seed, args.peer_python, args.peer_dir, threads)
            sps = float(out["env_steps"]) / float(out["wall"])  # type: ignore[arg-type]
            print(f"{impl:>6} | {out['net']:<28} | {out['env_steps']:>9,} env steps | {float(out['wall']):7.1f} s "  # type: ignore[arg-type]
                  f"| {sps:8.0f} env steps/s | load {load}", flush=True)
            rows.append(stamp.row(game=args.game, impl=impl, net=out["net"], seed=args.seed, env_steps=out["env_steps"],
                                  wall_s=f"{float(out['wall']):.2f}", env_steps_per_s=f"{sps:.0f}",  # type: ignore[arg-type]
                                  threads=threads, load_avg=load, versions=out["versions"]))
            append("selfplay_throughput", rows[-1:], FIELDS)
    by = {(r["impl"], r["net"]): float(r["env_steps_per_s"]) for r in rows}
    paper = [v for (impl, _), v in by.items() if impl == "paper"]
    if paper:
        for (impl, net), v in by.items():
            if impl != "paper":
                print(f"{impl} ({net}) / paper: {v / paper[0]:.2f}x")


if __name__ == "__main__":
    main()
