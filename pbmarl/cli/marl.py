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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pbmarl.cli.drive import CliError, add_training_options, add_training_parser, default_out, drive, int_at_least
from pbmarl.fmt import fmt
from pbmarl.runs.stop import Stop

ALGOS = ("mappo", "rmappo", "ippo", "qmix", "vdn", "iql", "maddpg")
MAPPINGS = ("role", "shared", "independent")
MARKER = "marl.json"


def add_marl_parser(sub: Any) -> None:
    """Register ``pbmarl marl`` on the CLI's subparsers."""
    p = add_training_parser(sub, "marl", help="train teams of agents together (MAPPO, QMIX, MADDPG, ...) and write a "
                            "run folder", game="a PettingZoo Parallel game, e.g. pettingzoo:simple_spread_v3 or "
                            "'pettingzoo:simple_spread_v3(N=3, local_ratio=0.5)'", algos=ALGOS,
                            algo="the learner of every group")
    p.add_argument("--mapping", default="role", choices=MAPPINGS,
                   help="agents to groups: by role (default), all shared, or one group per agent")
    p.add_argument("--agent-id", action="store_true", help="append a one-hot agent id to shared groups' observations")
    p.add_argument("--steps", type=int_at_least(1, "--steps"), default=100_000, help="env steps (default: 100000)")
    p.add_argument("--steps-per-round", type=int_at_least(1, "--steps-per-round"), default=None,
                   help="env steps collected per step (default: the learner's own)")
    p.add_argument("--seed", type=int_at_least(0, "--seed"), default=0)
    p.add_argument("--num-envs", type=int_at_least(1, "--num-envs"), default=32, help="environments stepped together")
    p.add_argument("--eval-episodes", type=int_at_least(1, "--eval-episodes"), default=50)
    add_training_options(p)  # every learning group on one parameter server


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
    from pbmarl.algorithms.teams.marl import MARL, make_group_learner
    from pbmarl.io import ensure_writable_folder, write_json

    game = pb.load_game(args.game)
    out = args.out or default_out(args.game.split(":")[-1], args.algo)
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
    drive(run, first, save=marl_saver(run, out), quiet=args.quiet, until=Stop(env_steps=args.steps))
    return evaluate_marl(run, out, args.eval_episodes)


def marl_saver(run: Any, out: Path) -> Callable[[], None]:
    """The drive loop's save for a marl folder: the `MARL` run folder in ``run/`` and ``history.csv`` beside it."""
    from pbmarl.io import write_atomic

    def save() -> None:
        run.save(out / "run")
        history = run.history
        write_atomic(out / "history.csv", lambda fh: history.to_csv(fh), "w")  # replaces a symlink, never follows it

    return save


def evaluate_marl(run: Any, out: Path, eval_episodes: int) -> int:
    """After the drive loop: evaluate the final policies into ``evaluation.json`` and say so."""
    from pbmarl.io import write_json

    result = run.evaluate(eval_episodes)
    write_json(out / "evaluation.json", {"episodes": result.episodes, "mean": result.mean.to_dict(),
                                         "stderr": result.stderr.to_dict()})
    said = ", ".join(f"{k} {fmt(v)}" for k, v in result.mean.items())
    print(f"done: {run.env_steps} env steps; mean return over {eval_episodes} episodes: {said}", flush=True)
    return 0
