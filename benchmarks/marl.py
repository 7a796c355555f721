"""Cooperative MARL on MPE ``simple_spread_v3`` (N=3, local_ratio 0.5, max_cycles 25): pbmarl's MAPPO,
IPPO, QMIX and MADDPG at one env-step budget, a uniform-random reference in the same run, and the peer.

Three conventions are printed side by side for every method, all from the same evaluation episodes:

* **per agent x 25**: the mean per-agent step reward x 25 (= the mean per-agent episode return; what
  BenchMARL logs as its mean return);
* **summed return**: the team's episode return summed over the 3 agents (what PettingZoo returns);
* **MAPPO paper**: what Yu et al. 2022 plot as "average episode rewards" (their curve reaches about -120;
  the bar here is >= -135). Their MPE (marlbenchmark/on-policy, envs/mpe) gives every agent the *sum* of
  all agents' rewards (``shared_reward``), each agent's reward being ``-C - sum_b collide(a, b)`` with
  ``C`` the summed landmark distances and the agent's collision with *itself* counted (-1 every step),
  and logs ``mean(rewards) * episode_length``. PettingZoo's agent reward is ``(1 - l) (-C) + l (-col_a)``
  without the self-collision, so with ``l = local_ratio = 0.5``: ``sum_a r_a = -(N C + sum_a col_a) / 2``
  and the paper's number is ``sum_t (-N C - N - sum_a col_a) = 2 * summed_return - N * T`` (N = 3
  agents, T = 25 steps: ``2 * summed - 75``). One difference stays: their landmarks start in
  ``0.8 * [-1, 1]^2``, PettingZoo's in ``[-1, 1]^2``.

Env steps per second are whole training runs (collect and train) for pbmarl and the peer alike; the
peer's return is its own training return (BenchMARL's mean return of the last batch's episodes), set
beside pbmarl's last-round training return per agent at the same env steps.

Slices (``--only``): ``random`` (``random_continuous``: the reference for MADDPG), ``scripted`` (a scripted
landmark-assignment policy and a full-speed bound no policy can beat: what the bar asks for is reachable), ``mappo``, ``ippo``, ``qmix``, ``maddpg`` (continuous actions), ``peer``
(BenchMARL 1.5's MAPPO from its own venv /work/venvs/benchmarl; the reason is printed where it cannot run).
Every seed appends a row (date, commit, command) to ``benchmarks/results/marl.csv``.

    python benchmarks/marl.py --only mappo --seeds 0 1 2 --steps 200000
    python benchmarks/marl.py --only mappo --seeds 0 --steps 200000 --workers 2 --sync asp --backend ray
    python benchmarks/marl.py --only mappo --seeds 0 --steps 20000000 --eval-every 2000000 --activation tanh --epochs 10

    python benchmarks/marl.py --only mappo --seeds 0 --steps 25000000 --eval-every 2500000 --activation tanh \
        --epochs 10 --value-clip --clip-apart --deterministic-eval --lr-decay --eval-episodes 1000

The third is the MAPPO authors' own simple_spread run (``train_mpe_spread.sh``: tanh, 10 epochs, 20M env steps).
The fourth (each seed its own process, side by side) adds their value clipping, separate gradient clips and
linear learning-rate decay, over 25M env steps: the run whose 3-seed mean meets the bar (README, "Teams
trained together").
``--save-dir DIR`` saves every learner run at each checkpoint and at the end, and continues a run saved
there before up to ``--steps`` (a budget longer than one session, in parts).
``--deterministic-eval`` adds, beside every MAPPO / IPPO evaluation, one with the actors playing their most
likely action (``MARL.evaluate(deterministic=True)``: BenchMARL's evaluation default and the MAPPO
authors' ``eval``), method label suffixed ``[most likely action]``.

With ``--workers N`` the learner runs on a parameter server (`pbmarl.algorithms.teams.rounds`): each
worker job collects ``steps_per_round`` env steps and pushes one gradient per optimiser (MAPPO: one
epoch of one minibatch instead of 15 epochs), so its env steps per second and its return at the budget
show what the server trades: more data per second, less learning per sample.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _rows import Stamp, append, git_commit  # noqa: F401  (tictactoe_parity.py imports git_commit from here)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pbmarl as pb  # noqa: E402

FIELDS = ["date", "commit", "command", "load_avg", "slice", "game", "method", "seed", "env_steps", "per_agent_x25",
          "summed_return", "mappo_paper", "env_steps_per_s", "wall_s", "reference"]
SLICES = ("random", "random_continuous", "scripted", "mappo", "ippo", "qmix", "maddpg", "peer")
BAR = -135.0
#: the method label's suffix for evaluations with every actor playing its most likely action
MOST_LIKELY = "[most likely action]"
PEER_VENV = Path("/work/venvs/benchmarl")
ENV: dict[str, Any] = dict(N=3, local_ratio=0.5, max_cycles=25)
#: evaluation episodes are seeded ``run seed + EVAL_SEED``, the seed MARL.evaluate drew before it took seed=0 by
#: default, so rows evaluated since read the same episodes as the rows logged before
EVAL_SEED = 7919


def mappo_paper(summed_return: float, *, n_agents: int = ENV["N"], steps: int = ENV["max_cycles"],
                local_ratio: float = ENV["local_ratio"]) -> float:
    """The MAPPO paper's "average episode rewards" from PettingZoo's summed return: ``2 * summed - N * T``.

    Exact for ``local_ratio = 0.5`` (see the module doc for the derivation from both reward functions).
    """
    if local_ratio != 0.5:
        raise ValueError(f"the conversion is derived for local_ratio 0.5, got {local_ratio}")
    return 2.0 * summed_return - n_agents * steps


def append_rows(rows: list[dict[str, Any]]) -> None:
    """Append `rows` (keys beyond FIELDS ignored) to results/marl.csv, writing the header to a new file."""
    print(f"appended {len(rows)} rows to {append('marl', rows, FIELDS)}")


def _learner(slice_: str, seed: int, server: dict[str, Any] | None = None, *,
             ppo: dict[str, Any] | None = None) -> Any:
    """The slice's learner; `server` (``workers``, ``sync``, ``backend``) puts it on a parameter server;
    `ppo` holds MAPPO / IPPO options (``team_reward``, ``bootstrap_truncated``, ``activation``, ``epochs``,
    ``value_clip``, ``clip_apart``, ``recurrent``, ``lr_decay_steps``)."""
    options: dict[str, Any] = dict(server or {})
    if ppo:
        if slice_ not in ("mappo", "ippo"):
            raise ValueError(f"{sorted(ppo)} are MAPPO / IPPO options, not {slice_!r}'s")
        options.update(ppo)
    if slice_ == "mappo":
        return pb.MAPPO(seed=seed, **options)
    if slice_ == "ippo":
        return pb.learners.IPPO(seed=seed, **options)
    if slice_ == "qmix":
        return pb.QMIX(seed=seed, **options)
    if slice_ == "maddpg":
        return pb.MADDPG(seed=seed, **options)
    raise ValueError(slice_)


def run_slice(slice_: str, seed: int, steps: int, eval_episodes: int, *, every: int | None = None,
              checkpoint: Callable[[dict[str, Any]], None] | None = None,
              server: dict[str, Any] | None = None, ppo: dict[str, Any] | None = None,
              deterministic: bool = False, save_dir: Path | None = None) -> dict[str, Any]:
    """Train (or, for the random slices, only evaluate) and return the row; with `every`, evaluate every
    `every` env steps on the way and hand each of those rows to `checkpoint` (so a long run that is
    stopped keeps its curve). With `deterministic` (MAPPO, IPPO) every evaluation is also made with the
    actors playing their most likely action: that row is the returned row's ``"deterministic"`` entry,
    and at a checkpoint it goes to `checkpoint` after the sampled one. With `save_dir` the run is saved
    to ``save_dir / "{label} seed {seed}"`` at every checkpoint and at the end, and a run saved there
    before is loaded and continued to `steps` (its own options, not the call's)."""
    continuous = slice_ in ("maddpg", "random_continuous")
    game = pb.load_game("pettingzoo:simple_spread_v3", continuous_actions=continuous, **ENV)
    mapping = pb.AgentMapping.shared(game, agent_id=True)
    t0 = time.perf_counter()
    if slice_.startswith("random"):
        marl = pb.MARL(game, {"shared": pb.MADDPG(seed=seed) if continuous else pb.MAPPO(seed=seed)}, mapping, seed=seed)
        result = marl.evaluate(eval_episodes, seed=seed + EVAL_SEED,
                               policies={"shared": pb.RandomPolicy(mapping.group_game("shared"))})
        return _row(slice_, seed, game, marl, result, time.perf_counter() - t0)
    label = slice_ if not server else f"{slice_} ({server['workers']} workers, {server['sync']}, {server['backend']})"
    if ppo:
        label += " (" + ", ".join(f"{k}={v}" for k, v in ppo.items()) + ")"
    folder = save_dir / f"{label} seed {seed}".replace(" ", "_") if save_dir is not None else None
    if folder is not None and (folder / "run.json").exists():
        marl = pb.load_run(folder)
        print(f"  continuing {folder} from {marl.env_steps} env steps", flush=True)
    else:
        marl = pb.MARL(game, {"shared": _learner(slice_, seed, server, ppo=ppo)}, mapping, seed=seed)
    next_check = None if every is None else every * (1 + marl.env_steps // every)

    def rows_now(note: str = "") -> list[dict[str, Any]]:
        wall = time.perf_counter() - t0
        out = [_row(label, seed, game, marl, marl.evaluate(eval_episodes, seed=marl.seed + EVAL_SEED), wall, note=note)]
        if deterministic:
            out.append(_row(f"{label} {MOST_LIKELY}", seed, game, marl,
                            marl.evaluate(eval_episodes, seed=marl.seed + EVAL_SEED, deterministic=True), wall,
                            note=note))
        return out

    try:
        while marl.env_steps < steps:
            rec = marl.step()
            print(f"  {label} seed {seed}: {rec.env_steps} env steps, train return {rec.returns['shared']:.1f}",
                  flush=True)
            if next_check is not None and checkpoint is not None and next_check <= marl.env_steps < steps:
                for row in rows_now("checkpoint"):
                    checkpoint(row)
                if folder is not None:
                    marl.save(folder)
                next_check += every * (1 + (marl.env_steps - next_check) // every)
    finally:
        marl.close()
    if folder is not None:
        marl.save(folder)
    final = rows_now()
    return {**final[0], "deterministic": final[1]} if deterministic else final[0]


def _row(slice_: str, seed: int, game: Any, marl: Any, result: pb.EvalResult, wall: float, *,
         note: str = "") -> dict[str, Any]:
    env_steps = 0 if slice_.startswith("random") else marl.env_steps
    busy = sum(sum(r.times.values()) for r in marl.records) if marl.records else 0.0  # collect + train, or a round
    train_return = marl.records[-1].returns["shared"] / ENV["N"] if marl.records else None
    summed = float(result.mean["shared"])
    assert result.returns is not None and result.lengths is not None
    mean_step_reward = float(result.returns.sum() / result.lengths.sum() / ENV["N"])  # per agent per env step
    said = f"; last-round training return per agent {train_return:.2f}" if train_return is not None else ""
    return {"slice": slice_.split(" ")[0], "game": game.name,
            "method": "uniform random" if slice_.startswith("random") else f"pbmarl {slice_}",
            "seed": seed, "env_steps": env_steps, "per_agent_x25": 25 * mean_step_reward,
            "summed_return": summed, "mappo_paper": mappo_paper(summed),
            "env_steps_per_s": env_steps / busy if busy else None, "train_return": train_return,
            "wall_s": round(wall, 1),
            "reference": f"{note + '; ' if note else ''}MAPPO paper curve about -120; bar {BAR} (paper convention){said}"}


#: MPE's motion of one agent per step: ``v <- KEEP * v + PUSH * move``, ``p <- p + DT * v`` (damping 0.25,
#: force 5 = the agents' default sensitivity, mass 1, dt 0.1)
KEEP, PUSH, DT = 0.75, 0.5, 0.1


def _full_speed_travel(steps: int = ENV["max_cycles"]) -> list[float]:
    """How far an agent pushing one way from rest can have moved after each step (about 0.2 a step at full speed)."""
    v, x, out = 0.0, 0.0, []
    for _ in range(steps):
        v = KEEP * v + PUSH
        x += DT * v
        out.append(x)
    return out


def scripted(seed: int, episodes: int, *, landmark_scale: float = 1.0) -> dict[str, Any]:
    """Two references no learner is needed for, on the same environment (discrete actions):

    * a scripted policy: at the first step each agent is assigned a landmark (the assignment of least total
      distance), then every step it takes the move that brings it closest to its landmark, counting where
      its momentum carries it (one step of MPE's dynamics looked ahead);
    * a bound no policy can beat: each landmark's distance to its nearest agent can shrink at most at full
      speed from the start, as if every agent ran to every landmark at once, with no collisions.

    ``landmark_scale`` moves the landmarks to ``landmark_scale`` times their drawn positions right after each
    reset (0.8: the MAPPO authors' layout, ``0.8 * [-1, 1]^2``). Neither reference reads an observation, and
    the rewards are computed from the world's positions, so this is their game exactly.
    """
    import itertools

    import numpy as np
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(continuous_actions=False, **ENV)
    travel = np.array(_full_speed_travel())
    moves = [np.array(m, float) for m in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))]  # MPE's discrete actions
    rng = np.random.default_rng(seed)
    summed, bound = [], []
    t0 = time.perf_counter()
    for _ in range(episodes):
        env.reset(seed=int(rng.integers(2**31)))
        world = env.unwrapped.world
        for landmark in world.landmarks:
            landmark.state.p_pos = landmark_scale * landmark.state.p_pos
        agents, marks = world.agents, [lm.state.p_pos.copy() for lm in world.landmarks]
        d0 = np.array([[np.linalg.norm(a.state.p_pos - m) for m in marks] for a in agents])
        reach = sum(np.maximum(d0[:, j][:, None] - travel[None, :], 0).min(0) for j in range(len(marks)))
        bound.append(-0.5 * len(agents) * float(reach.sum()))  # PettingZoo's summed return with l = 0.5, no collisions
        n = len(agents)
        perm = min(itertools.permutations(range(n)), key=lambda p: sum(d0[i, p[i]] for i in range(n)))
        total = 0.0
        while env.agents:
            acts = {}
            for i, name in enumerate(env.agents):
                pos, vel, goal = agents[i].state.p_pos, agents[i].state.p_vel, marks[perm[i]]
                vs = [KEEP * vel + PUSH * m for m in moves]  # the velocity, then the position, after each move
                acts[name] = int(np.argmin([np.linalg.norm(pos + DT * v - goal)
                                            + 0.3 * np.linalg.norm(pos + DT * v + 0.3 * v - goal) for v in vs]))
            _, rewards, _, _, _ = env.step(acts)
            total += sum(rewards.values())
        summed.append(total)
    mean, best = float(np.mean(summed)), float(np.mean(bound))
    layout = "" if landmark_scale == 1.0 else f", landmarks at {landmark_scale:g} x their positions"
    return {"slice": "scripted", "game": f"pettingzoo:simple_spread_v3 (mpe2, discrete actions{layout})",
            "method": "scripted assignment", "seed": seed, "env_steps": 0, "per_agent_x25": mean / ENV["N"],
            "summed_return": mean, "mappo_paper": mappo_paper(mean), "env_steps_per_s": None,
            "wall_s": round(time.perf_counter() - t0, 1),
            "reference": f"{episodes} episodes; no policy beats the full-speed bound: summed {best:.1f}, "
                         f"paper convention {mappo_paper(best):.1f}"}


def peer(seed: int, steps: int) -> dict[str, Any] | None:
    """BenchMARL's MAPPO in its own venv (benchmarks/peers/benchmarl_mappo.py); None, with the reason printed, if it cannot run."""
    import json

    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        print(f"peer: BenchMARL not run: its venv {PEER_VENV} does not exist here (install it with "
              f"`python -m venv {PEER_VENV} && {PEER_VENV}/bin/pip install -c constraints.txt benchmarl==1.5.2 "
              f"pettingzoo==1.24.3`: BenchMARL 1.5 imports pettingzoo.mpe, which later PettingZoo moved to mpe2)")
        return None
    script = Path(__file__).resolve().parent / "peers" / "benchmarl_mappo.py"
    t0 = time.perf_counter()
    done = subprocess.run([str(python), str(script), "--frames", str(steps), "--seed", str(seed)],
                          capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"peer: BenchMARL failed to run here (exit {done.returncode}): " + " | ".join(tail))
        return None
    out = json.loads(lines[-1])
    per_agent = float(out["mean_return"])  # BenchMARL: episode return averaged over agents, last batch's episodes
    return {"slice": "peer", "game": "pettingzoo simple_spread_v3 (N=3, local_ratio=0.5, max_cycles=25)",
            "method": "BenchMARL 1.5 MAPPO", "seed": seed, "env_steps": out["frames"],
            "per_agent_x25": None, "summed_return": None, "mappo_paper": None, "train_return": per_agent,
            "env_steps_per_s": out["frames_per_s"], "wall_s": round(time.perf_counter() - t0, 1),
            "reference": f"BenchMARL training return per agent (last batch) {per_agent:.2f}, i.e. summed "
                         f"{ENV['N'] * per_agent:.1f}, paper convention {mappo_paper(ENV['N'] * per_agent):.1f}"}


def _compare(rows: list[dict[str, Any]]) -> None:
    """pbmarl MAPPO beside the peer, seed by seed, where both ran in this call: training return and speed."""
    ours = {r["seed"]: r for r in rows if r["slice"] == "mappo" and MOST_LIKELY not in r["method"]}
    for r in rows:
        mine = ours.get(r["seed"])
        if r["slice"] != "peer" or mine is None or not mine["env_steps_per_s"]:
            continue
        print(f"seed {r['seed']}: training return per agent pbmarl {mine['train_return']:.2f} at {mine['env_steps']} "
              f"env steps vs BenchMARL {r['train_return']:.2f} at {r['env_steps']}; env steps/s "
              f"{mine['env_steps_per_s']:.0f} vs {r['env_steps_per_s']:.0f}: "
              f"{mine['env_steps_per_s'] / r['env_steps_per_s']:.2f}x", flush=True)


def _print_row(row: dict[str, Any], seed: int, load: str) -> None:
    rate = f"{row['env_steps_per_s']:.0f} env steps/s (collect and train)" if row["env_steps_per_s"] else ""
    if row["mappo_paper"] is None:
        print(f"{row['method']:>20} seed {seed}: {row['env_steps']} env steps | {row['reference']} | {rate} | "
              f"load {load}", flush=True)
        return
    ok = "meets" if row["mappo_paper"] >= BAR else "below"
    print(f"{row['method']:>20} seed {seed}: {row['env_steps']} env steps | MAPPO paper convention "
          f"{row['mappo_paper']:.1f} ({ok} the bar {BAR}) | summed return {row['summed_return']:.1f} | "
          f"per agent x 25 {row['per_agent_x25']:.2f} | {rate} | load {load}", flush=True)


def ppo_options(args: argparse.Namespace) -> dict[str, Any]:
    """The MAPPO / IPPO options the flags ask for (none: the defaults)."""
    options: dict[str, Any] = {}
    if args.team_reward:
        options["team_reward"] = True
    if args.no_truncation_bootstrap:
        options["bootstrap_truncated"] = False
    if args.activation is not None:
        options["activation"] = args.activation
    if args.epochs is not None:
        options["epochs"] = args.epochs
    if args.value_clip:
        options["value_clip"] = True
    if args.clip_apart:
        options["clip_apart"] = True
    if args.recurrent:
        options["recurrent"] = True
    if args.lr_decay:
        options["lr_decay_steps"] = args.steps
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=SLICES, default=list(SLICES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per learner run")
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--workers", type=int, default=1,
                        help="more than 1 trains the learner on a parameter server (one gradient per worker job)")
    parser.add_argument("--sync", choices=("bsp", "asp", "bap"), default="asp")
    parser.add_argument("--backend", choices=("local", "ray"), default="ray")
    parser.add_argument("--team-reward", action="store_true",
                        help="train MAPPO / IPPO on the team's summed reward, as the MAPPO paper's MPE does")
    parser.add_argument("--no-truncation-bootstrap", action="store_true",
                        help="MAPPO / IPPO treat the time limit as the episode's end, as the MAPPO paper's code does")
    parser.add_argument("--activation", choices=("relu", "tanh"), default=None,
                        help="MAPPO / IPPO hidden activation (the MAPPO authors' simple_spread run: tanh)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="MAPPO / IPPO epochs per round (default 15, the paper's table; its authors' simple_spread "
                             "script: 10)")
    parser.add_argument("--value-clip", action="store_true",
                        help="MAPPO / IPPO clip the value change per round (the MAPPO authors' use_clipped_value_loss)")
    parser.add_argument("--clip-apart", action="store_true",
                        help="MAPPO / IPPO clip actor and critic gradient norms separately, as the MAPPO authors' code does")
    parser.add_argument("--recurrent", action="store_true",
                        help="MAPPO / IPPO with a GRU in actor and critic (rMAPPO: the MAPPO authors' simple_spread "
                             "script runs algo=rmappo)")
    parser.add_argument("--lr-decay", action="store_true",
                        help="MAPPO / IPPO decay the learning rate linearly to 0 over --steps (the MAPPO authors' "
                             "use_linear_lr_decay; off in their MPE scripts)")
    parser.add_argument("--deterministic-eval", action="store_true",
                        help="MAPPO / IPPO: also evaluate with the actors playing their most likely action (BenchMARL's "
                             "and the MAPPO authors' eval), a second row per evaluation")
    parser.add_argument("--save-dir", type=Path, default=None,
                        help="save each learner run there at every checkpoint and at the end; a run saved there "
                             "before is continued to --steps (so a long run can go on in a later session)")
    parser.add_argument("--landmark-scale", type=float, default=1.0,
                        help="scripted: landmarks at this multiple of PettingZoo's positions (0.8: the MAPPO authors' "
                             "layout, where they start in 0.8 * [-1, 1]^2)")
    parser.add_argument("--eval-every", type=int, default=None,
                        help="also evaluate every N env steps and append that row at once (a stopped run keeps its curve)")
    args = parser.parse_args(argv)
    if args.landmark_scale != 1.0 and args.only != ["scripted"]:
        parser.error(f"--landmark-scale applies to --only scripted, not {args.only}: the learners train on "
                     "PettingZoo's own layout")
    if not 0 < args.landmark_scale <= 1:
        parser.error(f"--landmark-scale must be in (0, 1], got {args.landmark_scale}")
    import os

    base = Stamp("benchmarks/marl.py", argv).row()
    rows = []

    def checkpoint(row: dict[str, Any]) -> None:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"  checkpoint {row['method']} seed {row['seed']}: {row['env_steps']} env steps, MAPPO paper convention "
              f"{row['mappo_paper']:.1f}, summed {row['summed_return']:.1f}", flush=True)
        if not args.no_record:
            append_rows([{**base, "load_avg": load, **row}])

    for slice_ in args.only:
        for seed in args.seeds:
            if slice_ == "peer":
                row = peer(seed, args.steps)
            elif slice_ == "scripted":
                row = scripted(seed, args.eval_episodes, landmark_scale=args.landmark_scale)
            else:
                server = ({"workers": args.workers, "sync": args.sync, "backend": args.backend}
                          if args.workers > 1 else None)
                if args.deterministic_eval and slice_ not in ("mappo", "ippo"):
                    parser.error(f"--deterministic-eval applies to mappo and ippo (stochastic actors), not {slice_!r}")
                row = run_slice(slice_, seed, args.steps, args.eval_episodes, every=args.eval_every,
                                checkpoint=checkpoint, server=server, ppo=ppo_options(args),
                                deterministic=args.deterministic_eval, save_dir=args.save_dir)
            if row is None:
                continue
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            extra = row.pop("deterministic", None)
            for r in [row] + ([extra] if extra is not None else []):
                rows.append({**base, "load_avg": load, **r})
                _print_row(r, seed, load)
    _compare(rows)
    if rows and not args.no_record:
        append_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
