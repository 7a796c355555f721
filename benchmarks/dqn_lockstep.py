"""One burst of CartPole DQN updates in lockstep: pbmarl's update against Stable-Baselines3's, from the same state.

`benchmarks/control.py` compares the two libraries' DQN by where whole runs end, and a run's end on CartPole
is a lottery (see `benchmarks/dqn_snapshots.py`). This script takes chance out: SB3's DQN (the control row's
settings, in its own environment) trains for ``--steps`` env steps, then runs one more burst of 128 updates
with its minibatch indices recorded. pbmarl's DQN row (a `Rainbow` with every part off) is then given SB3's
weights, Adam moments and step count, replay contents and those indices, and runs its own burst. Printed: the
largest difference between the two libraries' losses and weights after the burst, beside how far the burst
moved the weights. Differences at float rounding mean the two updates are the same arithmetic.

    python benchmarks/dqn_lockstep.py --seeds 0 1 2 --steps 20000     # under a minute a seed

Rows go to ``benchmarks/results/dqn_lockstep.csv``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.control import CASES, DQN_OFF, SB3_MODEL, sb3_arguments
from benchmarks.dqn_snapshots import append_row

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "dqn_lockstep.csv")
HEADER = ["date", "commit", "command", "seed", "env_steps", "updates", "max_loss_diff", "max_weight_diff",
          "max_weight_move"]
CASE = ("CartPole-v1", "dqn")
LAYERS = ("q_net.0", "q_net.2", "q_net.4")  # SB3's QNetwork: Linear, ReLU, Linear, ReLU, Linear

#: after `SB3_MODEL` builds the control row's DQN: train, then one recorded burst; everything to an .npz
SB3_BURST = SB3_MODEL + r"""
model.learn(int(sys.argv[2]))
model.q_net_target.load_state_dict(model.q_net.state_dict())  # the target as the next burst finds it (synced)
before = {k: v.detach().clone().numpy() for k, v in model.q_net.state_dict().items()}
adam = {}
for i, st in model.policy.optimizer.state_dict()["state"].items():
    adam.update({f"m{i}": st["exp_avg"].numpy().copy(), f"v{i}": st["exp_avg_sq"].numpy().copy(),
                 f"s{i}": np.array(float(st["step"]))})
rb, picked, losses = model.replay_buffer, [], []
def sample(batch_size, env=None):  # ReplayBuffer.sample's draw, recorded
    inds = np.random.randint(0, rb.buffer_size if rb.full else rb.pos, size=batch_size)
    picked.append(inds)
    return rb._get_samples(inds, env=env)
rb.sample = sample
import stable_baselines3.dqn.dqn as dqn_module
huber = dqn_module.F.smooth_l1_loss
class F:  # the module's F with its Huber loss recorded
    def __getattr__(self, name):
        return getattr(dqn_module.torch.nn.functional, name)
    @staticmethod
    def smooth_l1_loss(a, b, *args, **kw):
        loss = huber(a, b, *args, **kw)
        losses.append(float(loss.detach()))
        return loss
dqn_module.F = F()
model.train(gradient_steps=params["gradient_steps"], batch_size=params["batch_size"])
n = rb.pos
np.savez(sys.argv[3], obs=rb.observations[:n, 0], next_obs=rb.next_observations[:n, 0], action=rb.actions[:n, 0, 0],
         reward=rb.rewards[:n, 0], terminated=rb.dones[:n, 0] * (1 - rb.timeouts[:n, 0]), index=np.stack(picked),
         losses=np.array(losses), **{f"before/{k}": v for k, v in before.items()},
         **{f"after/{k}": v.detach().numpy() for k, v in model.q_net.state_dict().items()}, **adam)
"""


def pbmarl_burst(data: Any, seed: int) -> dict[str, float]:
    """pbmarl's DQN burst from the state in `data` (SB3's, as `SB3_BURST` saved it)."""
    import numpy as np
    import torch

    import pbmarl as pb

    budget, options = CASES[CASE][0], {**CASES[CASE][1], **DQN_OFF}
    learner = pb.Rainbow(pb.load_game(f"gym:{CASE[0]}"), seed=seed, budget=budget, num_threads=1, **options)
    net = learner.net
    linears = [m for m in net.torso if isinstance(m, torch.nn.Linear)] + [net.advantage]
    with torch.no_grad():
        for m, name in zip(linears, LAYERS):
            m.weight.copy_(torch.from_numpy(data[f"before/{name}.weight"]))
            m.bias.copy_(torch.from_numpy(data[f"before/{name}.bias"]))
    learner.target.load_state_dict(net.state_dict())
    if [id(p) for m in linears for p in (m.weight, m.bias)] != [id(p) for p in learner.params]:
        raise RuntimeError("pbmarl's parameter order is not SB3's: the Adam moments would land on other weights")
    state = learner.optimizer.state_dict()
    state["state"] = {i: {"step": torch.tensor(float(data[f"s{i}"])), "exp_avg": torch.from_numpy(data[f"m{i}"]),
                          "exp_avg_sq": torch.from_numpy(data[f"v{i}"])} for i in range(2 * len(linears))}
    learner.optimizer.load_state_dict(state)
    for o, a, r, t, o2 in zip(data["obs"], data["action"], data["reward"], data["terminated"], data["next_obs"]):
        learner._store(o, int(a), float(r), bool(t), o2, bool(t))  # replay and discount, as in training
    index = data["index"]

    class Recorded:  # hands `_burst` SB3's indices where it draws its minibatches
        def integers(self, high: int, size: tuple[int, int]) -> Any:
            if tuple(size) != index.shape or high != len(data["obs"]):
                raise RuntimeError(f"burst drew {size} of {high}, SB3's were {index.shape} of {len(data['obs'])}")
            return index

    interval = options["target_update_interval"]
    learner.updates = interval * 100  # the burst starts on a target sync, as SB3's does
    learner.rng, losses = Recorded(), {}  # type: ignore[assignment]
    learner._burst(len(index), losses)
    weight_diff = move = 0.0
    for m, name in zip(linears, LAYERS):
        for part in ("weight", "bias"):
            ours = getattr(m, part).detach().numpy()
            weight_diff = max(weight_diff, float(np.abs(ours - data[f"after/{name}.{part}"]).max()))
            move = max(move, float(np.abs(data[f"after/{name}.{part}"] - data[f"before/{name}.{part}"]).max()))
    return {"updates": len(index), "max_loss_diff": float(np.abs(np.array(losses["loss"]) - data["losses"]).max()),
            "max_weight_diff": weight_diff, "max_weight_move": move}


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps SB3 trains before the recorded burst")
    parser.add_argument("--sb3-python", default="/work/venvs/sb3/bin/python")
    parser.add_argument("--no-record", action="store_true", help="print only; append nothing to the CSV")
    args = parser.parse_args(argv)
    if args.steps < CASES[CASE][1]["learning_starts"]:
        parser.error(f"--steps must be at least learning_starts ({CASES[CASE][1]['learning_starts']}), got {args.steps}")
    command = "python benchmarks/dqn_lockstep.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"{'seed':>5} {'updates':>8} {'max |loss diff|':>16} {'max |weight diff|':>18} {'weights moved':>14}")
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sb3.npz")
            out = subprocess.run([args.sb3_python, "-c", SB3_BURST, sb3_arguments(*CASE, seed, CASES[CASE][0]),
                                  str(args.steps), path], capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"SB3 run failed (seed {seed}):\n{out.stderr[-2000:]}")
            with np.load(path) as data:
                row = pbmarl_burst({k: data[k] for k in data.files}, seed)
        print(f"{seed:>5} {row['updates']:>8} {row['max_loss_diff']:>16.2e} {row['max_weight_diff']:>18.2e} "
              f"{row['max_weight_move']:>14.3f}", flush=True)
        if not args.no_record:
            append_row(RESULTS, HEADER, [command, seed, args.steps, row["updates"], f"{row['max_loss_diff']:.3g}",
                                         f"{row['max_weight_diff']:.3g}", f"{row['max_weight_move']:.4g}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
