"""pbmarl's NFSP beside OpenSpiel's PyTorch NFSP, per episode, on liar's dice, with OpenSpiel's example settings.

Issue 47's NFSP check: both libraries train for ``--episodes`` episodes with the settings of OpenSpiel's
``open_spiel/python/examples/nfsp_leduc_pytorch.py`` (the PyTorch NFSP example; the Kuhn example differs only in
its game and budget), and every ``--eval-every`` episodes the average policies' exploitability is computed
exactly with pbmarl's engine on both (OpenSpiel's average network is copied into a pbmarl `MLPPolicy` of the
same shape: OpenSpiel's own `exploitability` walks liar's dice's tree in Python and takes minutes). Rows go to
``benchmarks/results/nfsp_parity.csv`` with the date, commit, machine and command.

    python benchmarks/nfsp_parity.py --only openspiel --seeds 0,1 --episodes 30000
    python benchmarks/nfsp_parity.py --only pbmarl --seeds 0,1 --episodes 30000
    python benchmarks/nfsp_parity.py --only pbmarl-defaults --seeds 0 --episodes 30000

Slices: ``openspiel`` (OpenSpiel's NFSP and DQN agents, its example's settings); ``pbmarl`` (`pb.NFSP` with the
same settings, `SETTINGS` below, line by line); ``pbmarl-defaults`` (`pb.NFSP` with its own defaults, the
Leduc settings of Heinrich & Silver 2016); ``pbmarl-cadence`` (the same settings with as many updates per
episode as OpenSpiel makes, `CADENCE`: OpenSpiel counts each episode's last step as a step).

Settings compared line by line (OpenSpiel example -> pbmarl option):
  hidden_layers_sizes [128]            -> hidden (128,)            (pbmarl default (64,))
  rl_learning_rate 0.01, SGD           -> rl_lr 0.01               (default 0.1)
  sl_learning_rate 0.01, SGD           -> sl_lr 0.01               (default 0.005)
  anticipatory_param 0.1               -> anticipatory 0.1
  replay 2e5, reservoir 2e6            -> replay_capacity, reservoir_capacity (same)
  batch_size 128, min_buffer 1000      -> batch_size, min_buffer (same)
  learn_every 64 (one RL and one SL update each time), counted over the agent's steps, which include the step
  each agent takes at every episode's end to see its reward
                                       -> learn_every 64, updates_per_learn 1 (default 128 and 2: the same rate),
                                          counted over the player's decisions only (so fewer updates per episode:
                                          ``pbmarl-cadence`` matches them)
  epsilon 0.06 -> 0.001, exponential over 20M of the DQN's own steps: 0.06 to within 0.3% over this budget
                                       -> epsilon_start 0.06, epsilon_decay_episodes 10**9 (constant; the default
                                          decays as 1/sqrt(1 + episodes/1000): 0.006 at 100k episodes)
  update_target_network_every 19200 of the DQN's own steps, which it counts only in best-response mode
  (about a tenth of the agent's steps): one soft copy (tau 0.995) per about 192k of the player's decisions,
  i.e. about 3000 RL updates   -> target_update_every 3000 (default 300)
  loss mse, discount 1.0       -> the same
  average policy: cross-entropy to the stored epsilon-greedy action *distribution* of best-response steps;
  pbmarl: to the sampled action (the same expectation)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rows import Stamp, append, load_avg  # noqa: E402

GAME = "liars_dice"
SLICES = ("openspiel", "pbmarl", "pbmarl-defaults", "pbmarl-cadence")
FIELDS = ["date", "commit", "machine", "command", "load_avg", "game", "library", "settings", "seed", "episodes",
          "decisions", "wall_time", "exploitability"]

#: OpenSpiel's nfsp_leduc_pytorch.py flags
OPENSPIEL = dict(hidden_layers_sizes=[128], replay_buffer_capacity=int(2e5), reservoir_buffer_capacity=int(2e6),
                 min_buffer_size_to_learn=1000, anticipatory_param=0.1, batch_size=128, learn_every=64,
                 rl_learning_rate=0.01, sl_learning_rate=0.01, optimizer_str="sgd", loss_str="mse",
                 update_target_network_every=19200, discount_factor=1.0, epsilon_decay_duration=int(20e6),
                 epsilon_start=0.06, epsilon_end=0.001)
#: the same settings as pb.NFSP options (see the module doc)
SETTINGS = dict(hidden=(128,), rl_lr=0.01, sl_lr=0.01, anticipatory=0.1, epsilon_start=0.06,
                epsilon_decay_episodes=10**9, replay_capacity=200_000, reservoir_capacity=2_000_000, batch_size=128,
                learn_every=64, updates_per_learn=1, target_update_every=3000, min_buffer=1000, gamma=1.0)
#: OpenSpiel counts the step every agent takes at the end of each episode (to see its reward) as one of its
#: `learn_every` steps, so it updates after (decisions + 1) / 64 of a player's steps, pbmarl after decisions / 64.
#: On liar's dice a player decides 1.30 times per episode (OpenSpiel's runs: 77,718 decisions in 30,000 episodes),
#: so OpenSpiel makes 2.30 / 1.30 = 1.8 times the updates per episode; learn_every 36 makes pbmarl's the same.
CADENCE = {**SETTINGS, "learn_every": 36}


def exploitability_of_nets(game: Any, nets: list[Any], hidden: tuple[int, ...]) -> float:
    """Exact exploitability (pbmarl's engine) of one torch MLP per player, read as `MLPPolicy` s.

    The nets map information-state tensors to logits (Linear-ReLU blocks, then a Linear head, as both
    libraries build them); their Linear layers' weights are copied in order.
    """
    import torch

    import pbmarl as pb

    policies = []
    for net in nets:
        policy = pb.MLPPolicy(game, hidden=hidden, seed=None)
        ours = [m for m in policy.net.modules() if isinstance(m, torch.nn.Linear)]
        theirs = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
        if len(ours) != len(theirs):
            raise ValueError(f"network shapes differ: {len(ours)} and {len(theirs)} Linear layers")
        with torch.no_grad():
            for a, b in zip(ours, theirs):
                a.weight.copy_(b.weight)
                a.bias.copy_(b.bias)
        policies.append(policy)
    return float(pb.exploitability(game, policies).exploitability)


def _tree_module() -> None:
    """OpenSpiel's PyTorch NFSP and DQN import ``tree`` (dm-tree), which pbmarl's install does not carry; they use
    only ``tree.map_structure`` over their NamedTuples of arrays, which this stands in for when it is missing."""
    try:
        import tree  # noqa: F401
    except ImportError:
        import types

        def map_structure(fn: Any, *structures: Any) -> Any:
            first = structures[0]
            if isinstance(first, tuple) and hasattr(first, "_fields"):
                return type(first)(*(map_structure(fn, *parts) for parts in zip(*structures)))
            if isinstance(first, (tuple, list)):
                return type(first)(map_structure(fn, *parts) for parts in zip(*structures))
            if isinstance(first, dict):
                return {k: map_structure(fn, *(s[k] for s in structures)) for k in first}
            return fn(*structures)

        import importlib.machinery

        module = types.ModuleType("tree")
        module.__spec__ = importlib.machinery.ModuleSpec("tree", None)  # torch's import checks read it
        module.map_structure = map_structure  # type: ignore[attr-defined]
        sys.modules["tree"] = module


def run_openspiel(seed: int, episodes: int, every: int, emit: Any) -> None:
    """OpenSpiel's example loop (nfsp_leduc_pytorch.py main), on liar's dice."""
    import torch

    _tree_module()
    from open_spiel.python import rl_environment
    from open_spiel.python.pytorch import nfsp

    import pbmarl as pb

    np.random.seed(seed)
    torch.manual_seed(seed)
    game = pb.load_game(GAME)
    env = rl_environment.Environment(GAME)
    size = env.observation_spec()["info_state"][0]
    actions = env.action_spec()["num_actions"]
    kwargs = {k: v for k, v in OPENSPIEL.items() if k != "hidden_layers_sizes"}
    agents = [nfsp.NFSP(p, size, actions, OPENSPIEL["hidden_layers_sizes"], seed=seed * 100 + 10 * p, **kwargs)
              for p in range(2)]
    decisions, wall = 0, 0.0
    for ep in range(1, episodes + 1):
        start = time.perf_counter()
        time_step = env.reset()
        while not time_step.last():
            player = time_step.observations["current_player"]
            output = agents[player].step(time_step)
            time_step = env.step([output.action])
            decisions += 1
        for agent in agents:
            agent.step(time_step)
        wall += time.perf_counter() - start
        if ep % every == 0:
            nets = [agent._avg_network for agent in agents]
            emit("openspiel", "openspiel example", seed, ep, decisions, wall,
                 exploitability_of_nets(game, nets, tuple(OPENSPIEL["hidden_layers_sizes"])))


def run_pbmarl(seed: int, episodes: int, every: int, emit: Any, *, settings: str) -> None:
    import pbmarl as pb

    options = {"pbmarl defaults": {}, "openspiel example": SETTINGS, "openspiel cadence": CADENCE}[settings]
    run = pb.NFSP(GAME, seed=seed, episodes_per_step=every, measure=True, **options)
    while run.episodes < episodes:
        record = run.step()
        play = sum(r.times["play"] for r in run.records)  # the measurements' time left out, as for OpenSpiel
        emit("pbmarl", settings, seed, record.episodes, record.env_steps, play, record.exploitability)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=SLICES, help="slices to run (default: all)")
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (default: 0,1)")
    parser.add_argument("--episodes", type=int, default=30_000, help="episodes per run (default: 30000)")
    parser.add_argument("--eval-every", type=int, default=None, help="episodes between measurements "
                        "(default: episodes / 6)")
    parser.add_argument("--no-write", action="store_true", help="print rows without appending them")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    every = args.eval_every or max(args.episodes // 6, 1)
    if args.episodes < 1 or every < 1:
        parser.error(f"--episodes and --eval-every must be positive, got {args.episodes} and {every}")
    stamp = Stamp("benchmarks/nfsp_parity.py", argv)

    def emit(library: str, settings: str, seed: int, episodes: int, decisions: int, wall: float, expl: float) -> None:
        print(f"{library:<9} {settings:<18} seed {seed}  episodes {episodes:>8,}  decisions {decisions:>9,}  "
              f"{wall:7.1f} s  exploitability {expl:.4f}", flush=True)
        if not args.no_write:
            append("nfsp_parity", [stamp.row(load_avg=load_avg(minutes=1), game=GAME, library=library,
                                             settings=settings, seed=seed, episodes=episodes, decisions=decisions,
                                             wall_time=f"{wall:.2f}", exploitability=f"{expl:.6g}")], FIELDS)

    for name in args.only or SLICES:
        for seed in seeds:
            if name == "openspiel":
                run_openspiel(seed, args.episodes, every, emit)
            else:
                run_pbmarl(seed, args.episodes, every, emit, settings={
                    "pbmarl": "openspiel example", "pbmarl-defaults": "pbmarl defaults",
                    "pbmarl-cadence": "openspiel cadence"}[name])


if __name__ == "__main__":
    main()
