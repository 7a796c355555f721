"""``pbmarl marl``: teams trained together by `pb.MARL`, written to a run folder that ``pbmarl resume`` continues.

A marl folder::

    marl.json           what was asked (argv, game, algorithm, mapping, env-step budget); marks the folder
    run/                the `MARL` run folder after its last completed step (`MARL.save`, `pb.load_run`)
    history.csv         one row per step: cumulative env steps, episodes and seconds, return per group, losses
    evaluation.json     mean return per group (and its standard error) of the final policies over fresh episodes

Agents are grouped by role (the name before the last ``_``: ``agent_0`` -> ``agent``,
``adversary_0`` -> ``adversary``), one learner of ``--algo`` per group, unless
``--mapping independent`` (one learner per agent) is asked.

Example:
    $ pbmarl marl --game pettingzoo:simple_spread_v3 --algo mappo --steps 200000
    $ pbmarl marl --game pettingzoo:simple_spread_v3 --algo mappo --workers 2 --sync asp
    $ pbmarl resume runs/simple_spread_v3-mappo-... --steps 100000
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pbmarl.fmt import fmt

ALGOS = ("mappo", "rmappo", "ippo", "qmix", "vdn", "iql", "maddpg")
MAPPINGS = ("role", "shared", "independent")
MARKER = "marl.json"


def add_marl_parser(sub: Any, positive: Any) -> None:
    """Register ``pbmarl marl`` on the CLI's subparsers (`positive(low, what)` parses ints >= low)."""
    from pbmarl.train_cli import add_server_options

    p = sub.add_parser("marl", help="train teams of agents together (MAPPO, QMIX, MADDPG, ...) and write a run folder")
    p.add_argument("--game", required=True, help="a PettingZoo Parallel game, e.g. pettingzoo:simple_spread_v3 or "
                                                 "'pettingzoo:simple_spread_v3(N=3, local_ratio=0.5)'")
    p.add_argument("--algo", required=True, choices=ALGOS, help="the learner of every group")
    p.add_argument("--mapping", default="role", choices=MAPPINGS,
                   help="agents to groups: by role (default), all shared, or one group per agent")
    p.add_argument("--agent-id", action="store_true", help="append a one-hot agent id to shared groups' observations")
    p.add_argument("--steps", type=positive(1, "--steps"), default=100_000, help="env steps (default: 100000)")
    p.add_argument("--steps-per-round", type=positive(1, "--steps-per-round"), default=None,
                   help="env steps collected per step (default: the learner's own)")
    p.add_argument("--seed", type=positive(0, "--seed"), default=0)
    p.add_argument("--num-envs", type=positive(1, "--num-envs"), default=32, help="environments stepped together")
    p.add_argument("--eval-episodes", type=positive(1, "--eval-episodes"), default=50)
    add_server_options(p, positive)  # every learning group on one parameter server
    p.add_argument("--out", type=Path, default=None, help="run folder (default: runs/GAME-ALGO-TIME)")
    p.add_argument("--quiet", action="store_true", help="only the first and the final line")


def is_marl_folder(folder: Path) -> bool:
    return (folder / MARKER).exists()


def make_mapping(game: Any, kind: str, *, agent_id: bool = False) -> Any:
    from pbmarl.rollout.mapping import AgentMapping

    if kind == "shared":
        return AgentMapping.shared(game, agent_id=agent_id)
    if kind == "independent":
        return AgentMapping.independent(game)
    if kind == "role":
        return AgentMapping(game, lambda a: a.rpartition("_")[0] or a, agent_id=agent_id)
    raise ValueError(f"unknown mapping {kind!r}; accepted are {list(MAPPINGS)}")


def cmd_marl(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import pbmarl as pb
    from pbmarl.algorithms.marl import MARL, make_group_learner
    from pbmarl.cli import CliError
    from pbmarl.io import ensure_writable_folder, write_json

    game = pb.load_game(args.game)
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", args.game.split(":")[-1]).strip("_")
    out = args.out or Path("runs") / f"{slug}-{args.algo}-{time.strftime('%Y%m%d-%H%M%S')}"
    if is_marl_folder(out) or (out / "run.json").exists():
        raise CliError(f"run folder {str(out)!r} already holds a run; continue it with: pbmarl resume {out}")
    mapping = make_mapping(game, args.mapping, agent_id=args.agent_id)
    options: dict[str, Any] = {} if args.steps_per_round is None else {"steps_per_round": args.steps_per_round}
    if args.workers > 1:
        options.update(workers=args.workers, sync=args.sync, staleness=args.staleness, backend=args.backend)
    learners = {g: make_group_learner(args.algo, seed=args.seed + i, **options) for i, g in enumerate(mapping.groups)}
    run = MARL(game, learners, mapping, seed=args.seed, num_envs=args.num_envs)
    ensure_writable_folder(out, what="run folder")  # after the set-up, so bad input leaves no folder behind
    write_json(out / MARKER, {"argv": ["pbmarl", *argv], "game": args.game, "algo": args.algo, "steps": args.steps,
                              "eval_episodes": args.eval_episodes})
    first = (f"pbmarl marl: {args.algo} on {game.name}, groups {list(mapping.groups)}, {args.steps} env steps"
             + (f", {args.workers} workers ({args.sync}, {args.backend})" if args.workers > 1 else "") + f" -> {out}")
    return drive(run, args.steps, out, args.quiet, first, args.eval_episodes)


def drive(run: Any, budget: int, out: Path, quiet: bool, first: str, eval_episodes: int) -> int:
    """Step `run` until it has taken `budget` env steps, saving after every step; evaluate at the end."""
    from pbmarl.io import write_json
    from pbmarl.runs import Stop

    def saved(record: Any) -> None:
        run.save(out / "run")
        run.history.to_csv(out / "history.csv")
        if not quiet:
            print(record, flush=True)

    print(first, flush=True)
    try:
        if run.env_steps < budget:
            run.run(until=Stop(env_steps=budget), progress=False, callback=saved)
    finally:
        run.close()  # a parameter server's workers (--workers > 1) stop
    result = run.evaluate(eval_episodes)
    write_json(out / "evaluation.json", {"episodes": result.episodes, "mean": result.mean.to_dict(),
                                         "stderr": result.stderr.to_dict()})
    said = ", ".join(f"{k} {fmt(v)}" for k, v in result.mean.items())
    print(f"done: {run.env_steps} env steps; mean return over {eval_episodes} episodes: {said}", flush=True)
    return 0


def resume_marl(out: Path, steps: int | None, quiet: bool) -> int:
    from pbmarl.algorithms.marl import MARL
    from pbmarl.cli import CliError
    from pbmarl.io import ensure_writable_folder, read_json, write_json

    info = read_json(out / MARKER)
    if not (out / "run" / "run.json").exists():
        raise CliError(f"no step of the run in {str(out)!r} completed, so there is nothing to resume; start it "
                       f"again with: {' '.join(info['argv'])}")
    ensure_writable_folder(out, what="run folder")
    run = MARL.load(out / "run")
    budget = int(info["steps"]) if steps is None else run.env_steps + int(steps)
    if budget <= run.env_steps:
        print(f"the run in {out} is complete ({run.env_steps} env steps); extend it with: "
              f"pbmarl resume {out} --steps N")
        return 0
    write_json(out / MARKER, {**info, "steps": budget})
    first = f"resuming {run!r} up to {budget} env steps"
    return drive(run, budget, out, quiet, first, int(info.get("eval_episodes", 50)))
