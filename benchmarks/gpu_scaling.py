"""Where a GPU starts to pay for pbmarl's update steps: one gradient step of three learners' networks, timed
on the CPU (one thread, and every thread) and on CUDA where there is one, for growing minibatches.

pbmarl's learners train on the CPU: their networks are small MLPs and their minibatches hundreds of rows,
where a GPU's kernel launches cost more than the arithmetic. This measures that trade with pbmarl's own
parts (`RainbowNet`, `Critic`, `build_mlp`, `adam`, `clip_grad_norm`, MAPPO's `value_loss`), each step the
one the learner takes, the data already on the device:

- ``dqn``: the CartPole DQN row's TD update (4-256-256-2, Huber loss, target network, clip 10, Adam);
- ``td3``: Pendulum TD3's critic update of twin 400-300 critics and its actor update through the first;
- ``mappo``: one MAPPO minibatch on simple_spread (tanh 64-64 actor and critic with LayerNorm, the
  clipped surrogate, entropy and clipped Huber value loss), a round being 3,200 steps x 3 agents = 9,600 rows.

Beside each, in the same run, the same update with torch's own parts (``torch.optim.Adam`` with its default
step, ``torch.nn.utils.clip_grad_norm_``) in place of pbmarl's `adam` and `clip_grad_norm`: the reference; and
the raw floor, the same forward and backward passes with no optimiser step and no clip, which no update can beat.
Prints milliseconds per update and rows per second; appends rows to ``benchmarks/results/gpu_scaling.csv``
(``--out`` elsewhere). It needs no pbmarl extras beyond torch, numpy and pandas.

The ``mappo-device`` slice is a whole run instead: `pb.MARL` training `pb.MAPPO` (``device="cpu"`` on every core,
then ``device="cuda"``) on simple_spread (N=3), a round of ``--mappo-steps`` env steps (x 3 agents rows; 15 epochs
of one minibatch, the paper's MPE setting), timed over ``--mappo-rounds`` rounds after one warm-up round. It prints
env steps per second and the seconds of a round's update (``time/train``) for both devices side by side, and
writes one row per device (``ms_per_update``: one minibatch step; ``env_steps_per_s``). Without CUDA it says so
and exits 0 without a row. It needs the ``pettingzoo`` extra.

    python benchmarks/gpu_scaling.py                       # every workload, cpu:1, cpu:all, cuda if present
    python benchmarks/gpu_scaling.py --only dqn --devices cpu:1
    python benchmarks/gpu_scaling.py --only mappo-device --mappo-steps 12800 --mappo-rounds 3
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pbmarl.learners.common.nets import RainbowNet, adam, build_mlp  # noqa: E402
from pbmarl.learners.control.critics import Critic, Critics  # noqa: E402
from pbmarl.learners.multiagent.mappo import value_loss  # noqa: E402
from pbmarl.torchutil import clip_grad_norm

RESULTS = Path(__file__).resolve().parent / "results" / "gpu_scaling.csv"
FIELDS = ["date", "commit", "command", "machine", "device", "threads", "workload", "batch", "ms_per_update",
          "rows_per_s", "updates_timed", "torch_parts_ms_per_update", "floor_ms_per_update", "env_steps_per_s"]


class _NoStep:
    """The floor's optimiser: clears the gradients and takes no step (forward and backward alone remain)."""

    def __init__(self, params: Any, **_: Any) -> None:
        self.params = list(params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        pass


#: what each update is timed with: pbmarl's parts, torch's own (the reference), and no optimiser step and no
#: clip at all (the raw floor: the networks' forward and backward passes, which no update can undercut)
PARTS = ("pbmarl", "torch", "floor")


def _parts(parts: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(Adam factory, gradient clip): pbmarl's, torch's own for the reference, or none for the floor."""
    if parts == "floor":
        return _NoStep, lambda params, max_norm: None
    if parts == "torch":
        return torch.optim.Adam, torch.nn.utils.clip_grad_norm_
    return adam, clip_grad_norm


BATCHES = {"dqn": [64, 256, 1024, 4096, 16384], "td3": [256, 1024, 4096, 16384], "mappo": [9600, 38400, 153600]}


def dqn_step(device: torch.device, batch: int, parts: str = "pbmarl") -> Callable[[], None]:
    """The CartPole DQN update (`Rainbow` with its parts off): Huber TD loss against a target network."""
    make_adam, clip = _parts(parts)
    net = RainbowNet(4, (256, 256), 2, dueling=False).to(device)
    target, opt, params = copy.deepcopy(net), make_adam(net.parameters(), lr=2.3e-3), list(net.parameters())
    obs, next_obs = torch.randn(batch, 4, device=device), torch.randn(batch, 4, device=device)
    action = torch.randint(2, (batch,), device=device)
    reward, rows = torch.ones(batch, device=device), torch.arange(batch, device=device)

    def step() -> None:
        q = net(obs)[rows, action, 0]
        with torch.no_grad():
            y = reward + 0.99 * target(next_obs)[..., 0].max(-1).values
        loss = F.smooth_l1_loss(q, y)
        opt.zero_grad()
        loss.backward()
        clip(params, 10.0)
        opt.step()
    return step


def td3_step(device: torch.device, batch: int, parts: str = "pbmarl") -> Callable[[], None]:
    """Pendulum TD3's update: twin 400-300 critics against smoothed targets, then the actor through critic 0.
    pbmarl's (and the floor's) twins are one stacked `Critics` module; torch's reference keeps two networks."""
    actor = build_mlp(3, (400, 300), 1).to(device)
    members = [Critic(3, 1, (400, 300)) for _ in range(2)]
    if parts == "torch":
        critics: torch.nn.Module = torch.nn.ModuleList(members).to(device)
        both: Callable[..., torch.Tensor] = lambda m, o, a: torch.stack([c(o, a) for c in m])  # noqa: E731
        first: Callable[..., torch.Tensor] = lambda m, o, a: m[0](o, a)  # noqa: E731
    else:
        critics = Critics(members).to(device)
        both, first = (lambda m, o, a: m(o, a)), (lambda m, o, a: m.member(0, o, a))
    actor_t, critics_t = copy.deepcopy(actor), copy.deepcopy(critics)
    make_adam, _ = _parts(parts)
    actor_opt, critic_opt = make_adam(actor.parameters(), lr=1e-3), make_adam(critics.parameters(), lr=1e-3)
    obs, next_obs = torch.randn(batch, 3, device=device), torch.randn(batch, 3, device=device)
    action, reward = torch.rand(batch, 1, device=device) * 4 - 2, torch.randn(batch, device=device)

    def step() -> None:
        with torch.no_grad():
            noise = (torch.randn(batch, 1, device=device) * 0.2).clamp(-0.5, 0.5)
            a2 = (2 * torch.tanh(actor_t(next_obs)) + noise * 2).clamp(-2, 2)
            y = reward + 0.98 * both(critics_t, next_obs, a2).amin(0)
        loss = (both(critics, obs, action) - y).pow(2).mean(1).sum()
        critic_opt.zero_grad()
        loss.backward()
        critic_opt.step()
        for p in critics.parameters():
            p.requires_grad_(False)
        actor_loss = -first(critics, obs, 2 * torch.tanh(actor(obs))).mean()
        for p in critics.parameters():
            p.requires_grad_(True)
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
    return step


def mappo_step(device: torch.device, batch: int, parts: str = "pbmarl") -> Callable[[], None]:
    """One MAPPO minibatch on simple_spread (N=3): 18-dim observations + agent id, 5 actions, a 54 + 3 critic."""
    actor = build_mlp(21, (64, 64), 5, activation=torch.nn.Tanh, layer_norm=True).to(device)
    critic = build_mlp(57, (64, 64), 1, activation=torch.nn.Tanh, layer_norm=True).to(device)
    params = list(actor.parameters()) + list(critic.parameters())
    make_adam, clip = _parts(parts)
    # MAPPO steps torch's Adam with pbmarl's parts too; the floor takes no step
    opt = (make_adam if parts == "floor" else torch.optim.Adam)(params, lr=7e-4, eps=1e-5)
    obs, x = torch.randn(batch, 21, device=device), torch.randn(batch, 57, device=device)
    action, old_logp = torch.randint(5, (batch,), device=device), torch.full((batch,), -1.6, device=device)
    adv, ret, old_v = (torch.randn(batch, device=device) for _ in range(3))

    def step() -> None:
        logp_all = torch.log_softmax(actor(obs), -1)
        ratio = (logp_all.gather(1, action[:, None]).squeeze(1) - old_logp).exp()
        a = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean()
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        loss = pg + value_loss(critic(x).squeeze(-1), ret, 10.0, old_v, 0.2) - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        clip(params, 10.0)
        opt.step()
    return step


WORKLOADS: dict[str, Callable[[torch.device, int, str], Callable[[], None]]] = {
    "dqn": dqn_step, "td3": td3_step, "mappo": mappo_step}


def time_step(step: Callable[[], None], device: torch.device, *, seconds: float, warmup: int = 5) -> tuple[float, int]:
    """Mean wall seconds of `step` over as many calls as fit in `seconds` (at least 3), after `warmup` calls."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        step()
    sync()
    n, start = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - start < seconds:
        step()
        n += 1
        if n % 10 == 0:
            sync()
    sync()
    return (time.perf_counter() - start) / n, n


#: the ``mappo-device`` slice: a whole `pb.MARL` run of `pb.MAPPO` on each device (not a `WORKLOADS` update)
DEVICE_SLICE = "mappo-device"
SPREAD = "pettingzoo:simple_spread_v3(N=3, max_cycles=25)"


def mappo_device(steps: int, rounds: int, base: dict[str, Any]) -> list[dict[str, Any]] | None:
    """`pb.MAPPO` trained with ``device="cpu"`` (every core) and ``device="cuda"`` on rounds of `steps` env steps:
    one row per device, or None (and a line saying why) where CUDA is missing."""
    if not torch.cuda.is_available():
        print(f"{DEVICE_SLICE}: CUDA is not available here (torch.cuda.is_available() is False, torch "
              f"{torch.__version__}); nothing measured, no row written")
        return None
    import pbmarl as pb

    game = pb.load_game(SPREAD)
    epochs, minibatches, cores = 15, 1, os.cpu_count() or 1
    rows, shown = [], []
    for device in ("cpu", "cuda"):
        learner = pb.MAPPO(seed=0, steps_per_round=steps, epochs=epochs, minibatches=minibatches, device=device)
        label = f"cuda ({torch.cuda.get_device_name()})" if device == "cuda" else \
            f"cpu ({platform.processor() or platform.machine()})"
        with pb.MARL(game, {"shared": learner}, pb.AgentMapping.shared(game, agent_id=True), seed=0,
                     num_envs=32, num_threads=cores) as run:
            warm = run.step()  # warm-up: CUDA's context, the kernels' first launch, the pool's environments
            records = run.run(rounds, progress=False)
        times = [r.times for r in records]
        train = sum(t.get("train", 0.0) for t in times) / rounds
        wall = sum(sum(t.values()) for t in times)
        env_steps = records[-1].env_steps - warm.env_steps
        batch = env_steps // rounds * 3
        updates = epochs * minibatches
        rows.append({**base, "device": label, "threads": cores, "workload": DEVICE_SLICE, "batch": batch,
                     "ms_per_update": round(train / updates * 1e3, 4), "rows_per_s": round(batch * epochs / train),
                     "updates_timed": updates * rounds, "env_steps_per_s": round(env_steps / wall)})
        shown.append((device, env_steps / wall, train))
    (_, cpu_rate, cpu_train), (_, gpu_rate, gpu_train) = shown
    print(f"{DEVICE_SLICE}: simple_spread N=3, {rows[0]['batch'] // 3:,} env steps ({rows[0]['batch']:,} rows) a round, {epochs} epochs x "
          f"{minibatches} minibatch, {rounds} rounds timed")
    print(f"{'':14s}{'cpu (' + str(cores) + ' threads)':>22s}{'cuda':>14s}")
    print(f"{'env steps/s':14s}{cpu_rate:22,.0f}{gpu_rate:14,.0f}")
    print(f"{'update s/round':14s}{cpu_train:22.3f}{gpu_train:14.3f}   (cpu / cuda: {cpu_train / gpu_train:.2f}x)")
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append `rows` to the CSV at `path`; a file whose header lacks a column of `FIELDS` is rewritten with it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old: list[dict[str, Any]] = []
    if path.exists():
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is not None and list(reader.fieldnames) != FIELDS:
                old = list(reader)
    rewrite = bool(old) or not path.exists()
    with open(path, "w" if rewrite else "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if rewrite:
            writer.writeheader()
            writer.writerows(old)
        writer.writerows(rows)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1], check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _devices(names: list[str]) -> list[tuple[str, torch.device, int]]:
    """``cpu:1`` (one thread), ``cpu:all`` (every core), ``cuda`` (skipped, with a line, where there is none)."""
    out = []
    for name in names:
        if name == "cuda":
            if not torch.cuda.is_available():
                print("cuda: not available here, skipped")
                continue
            out.append((f"cuda ({torch.cuda.get_device_name()})", torch.device("cuda"), torch.get_num_threads()))
        elif name in ("cpu:1", "cpu:all"):
            threads = 1 if name == "cpu:1" else (os.cpu_count() or 1)
            out.append((f"cpu ({platform.processor() or platform.machine()})", torch.device("cpu"), threads))
        else:
            raise SystemExit(f"--devices: unknown device {name!r}; accepted: cpu:1, cpu:all, cuda")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=[*sorted(WORKLOADS), DEVICE_SLICE], default=list(WORKLOADS))
    parser.add_argument("--mappo-steps", type=int, default=12_800, help=f"{DEVICE_SLICE}: env steps per round")
    parser.add_argument("--mappo-rounds", type=int, default=3, help=f"{DEVICE_SLICE}: rounds timed")
    parser.add_argument("--devices", nargs="+", default=["cpu:1", "cpu:all", "cuda"])
    parser.add_argument("--seconds", type=float, default=0.5, help="timed wall seconds per (workload, batch, device)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    command = "python benchmarks/gpu_scaling.py " + " ".join(argv if argv is not None else sys.argv[1:])
    base = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "commit": _commit(),
            "command": command.strip(), "machine": f"{platform.node()}, {os.cpu_count()} cores"}
    rows = []
    print(f"torch {torch.__version__}; {base['machine']}")
    if DEVICE_SLICE in args.only:
        slice_rows = mappo_device(args.mappo_steps, args.mappo_rounds, base)
        if slice_rows is None and args.only == [DEVICE_SLICE]:
            return 0
        rows += slice_rows or []
    workloads = [w for w in args.only if w != DEVICE_SLICE]
    devices = _devices(args.devices) if workloads else []
    for workload in workloads:
        for label, device, threads in devices:
            torch.set_num_threads(threads)
            for batch in BATCHES[workload]:
                timed = []
                for parts in PARTS:
                    torch.manual_seed(0)
                    timed.append(time_step(WORKLOADS[workload](device, batch, parts), device, seconds=args.seconds))
                (seconds, n), (ref, _), (floor, _) = timed
                rows.append({**base, "device": label, "threads": threads, "workload": workload, "batch": batch,
                             "ms_per_update": round(seconds * 1e3, 4), "rows_per_s": round(batch / seconds),
                             "updates_timed": n, "torch_parts_ms_per_update": round(ref * 1e3, 4),
                             "floor_ms_per_update": round(floor * 1e3, 4)})
                print(f"{workload:6s} {label:32s} {threads:3d} threads  batch {batch:7,d}: {seconds * 1e3:9.3f} ms per "
                      f"update, {batch / seconds:13,.0f} rows/s | torch's Adam and clip {ref * 1e3:9.3f} ms "
                      f"({seconds / ref:.2f}x) | floor (forward and backward alone) {floor * 1e3:9.3f} ms", flush=True)
    if not args.no_record and rows:
        _write(args.out, rows)
        print(f"appended {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
