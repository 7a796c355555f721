"""``pbmarl train``: plain RL on a one-player game, written to a run folder that ``pbmarl resume`` continues.

A train folder is a run folder (`pbmarl.runs.folder`; ``pb.load_run(folder)`` rebuilds the learner) with::

    train.json            what was asked (argv, game, algorithm, steps); marks the folder as a train run
    run.json, state-NNNNNN/   the learner's whole state after its last completed round (`ControlLearner.save`)
    history.csv           one row per round: env_steps, episodes, wall_time, return/0, loss/..., time/round, ...
    learning_curve.png    mean episode return (``return/0``) against env steps
    policy.npz, policy.json   the trained policy (`Policy.arrays()` / `meta()`; `policy_from_state` loads it)
    evaluation.json       deterministic return over fresh episodes at the end

Example:
    $ pbmarl train --game gym:Pendulum-v1 --algo sac --steps 20000
    $ pbmarl train --game gym:Pendulum-v1 --algo td3 --workers 4 --sync bap --staleness 1
    $ pbmarl train --game gym:Pendulum-v1 --algo td3 --matmul-precision bfloat16
    $ pbmarl resume runs/Pendulum-v1-sac-... --steps 10000
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pbmarl.fmt import fmt
from pbmarl.learners.control.config import PRECISIONS

ALGOS = ("sac", "td3", "ddpg", "hddpg", "rainbow")
MARKER = "train.json"


def add_train_parser(sub: Any, positive: Any) -> None:
    """Register ``pbmarl train`` on the CLI's subparsers (`positive` parses ints >= 1)."""
    train = sub.add_parser("train", help="train one agent with a control learner and write a run folder")
    train.add_argument("--game", required=True, help="a one-player game: gym:Pendulum-v1, gym:CartPole-v1, "
                                                     "mdp:two_round_dmdp")
    train.add_argument("--algo", required=True, choices=ALGOS, help="the learner")
    train.add_argument("--steps", type=positive(1, "--steps"), default=20_000, help="env steps (default: 20000)")
    train.add_argument("--seed", type=positive(0, "--seed"), default=0)
    train.add_argument("--eval-episodes", type=positive(1, "--eval-episodes"), default=10,
                       help="deterministic episodes of the final evaluation (default: 10)")
    train.add_argument("--matmul-precision", choices=PRECISIONS, default="float32",
                       help="bfloat16: the updates' hidden-to-hidden products in bfloat16 by autocast; medium: every "
                            "product of the updates from bfloat16-rounded inputs (oneDNN's math mode). Both are "
                            "faster on CPUs with bfloat16 instructions and networks of 256 units or more; "
                            "default: float32")
    add_server_options(train, positive)
    train.add_argument("--out", type=Path, default=None, help="run folder (default: runs/GAME-ALGO-TIME)")
    train.add_argument("--quiet", action="store_true", help="only the first and the final line")


def add_server_options(parser: Any, positive: Any) -> None:
    """``--workers``, ``--sync``, ``--staleness``, ``--backend``: a learner on the parameter server
    (``pbmarl train`` and ``pbmarl marl``)."""
    parser.add_argument("--workers", type=positive(1, "--workers"), default=1,
                        help="gradient workers; more than 1 trains on a parameter server (default: 1)")
    parser.add_argument("--sync", choices=("bsp", "asp", "bap"), default="bsp",
                        help="how the server applies the workers' gradients (with --workers > 1)")
    parser.add_argument("--staleness", type=positive(0, "--staleness"), default=1, help="the BAP bound")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="workers in this process or as Ray actors (default: local)")


def is_train_folder(folder: Path) -> bool:
    return (folder / MARKER).exists()


def cmd_train(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import pbmarl as pb
    from pbmarl.io import ensure_writable_folder, write_json
    from pbmarl.learners.common.registry import make_learner
    from pbmarl.learners.control.base import ControlLearner

    game = pb.load_game(args.game)
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", args.game.split(":")[-1]).strip("_")
    out = args.out or Path("runs") / f"{slug}-{args.algo}-{time.strftime('%Y%m%d-%H%M%S')}"
    if is_train_folder(out) or (out / "run.json").exists():
        from pbmarl.cli import CliError

        raise CliError(f"run folder {str(out)!r} already holds a run; continue it with: pbmarl resume {out}")
    learner = make_learner(game, {"name": args.algo, "seed": args.seed, "budget": args.steps,
                                  "workers": args.workers, "sync": args.sync, "staleness": args.staleness,
                                  "backend": args.backend, "matmul_precision": args.matmul_precision})
    if isinstance(learner, ControlLearner) and learner.multi_seat:
        from pbmarl.cli import CliError

        raise CliError(f"pbmarl train trains one agent, and {game.name!r} has {game.num_players} seats; use "
                       "pb.Independent with pb.MARL for independent agents, or the learner as a PSRO oracle")
    ensure_writable_folder(out, what="run folder")
    write_json(out / MARKER, {"argv": ["pbmarl", *argv], "game": game.name, "algo": args.algo,
                              "eval_episodes": args.eval_episodes})
    first = f"{type(learner).__name__} on {game.name}: {args.steps} env steps, seed {args.seed}" + (
        f", {args.workers} workers ({args.sync}, {args.backend})" if args.workers > 1 else "")
    return _drive(learner, out, args.quiet, first, args.eval_episodes)


def resume_train(out: Path, steps: int | None, quiet: bool) -> int:
    from pbmarl.io import ensure_writable_folder, read_json
    from pbmarl.runs import load_run
    from pbmarl.runs.folder import open_run

    info = read_json(out / MARKER)
    if not (out / "run.json").exists():
        from pbmarl.cli import CliError

        raise CliError(f"no round of the run in {str(out)!r} completed, so there is nothing to resume; start it "
                       f"again with: {' '.join(info['argv'])}")
    ensure_writable_folder(out, what="run folder")
    overrides: dict[str, Any] = {} if steps is None else {"budget": int(open_run(out).data["env_steps"]) + steps}
    learner = load_run(out, **overrides)
    if learner.done:
        print(f"the run in {out} is complete at {learner.env_steps} env steps; extend it with: "
              f"pbmarl resume {out} --steps N")
        return 0
    first = f"resuming {type(learner).__name__} on {learner.game.name} at {learner.env_steps} of {learner.config.budget} env steps"
    return _drive(learner, out, quiet, first, int(info.get("eval_episodes", 10)))


def _drive(learner: Any, out: Path, quiet: bool, first: str, eval_episodes: int) -> int:
    from pbmarl.io import write_json

    print(f"{first}; run folder {out}", flush=True)

    def saved(record: Any) -> None:
        learner.save(out)  # one commit: run.json, history.csv and the state folder
        if not quiet:
            print(f"env steps {record.env_steps}: mean return {fmt(record['return/0'])}, loss "
                  f"{fmt(record.loss)}, {record.seconds:.1f} s", flush=True)

    try:
        learner.run(progress=None if not quiet else False, callback=saved)
    finally:
        learner.close()  # a parameter server's workers (--workers > 1) stop
    _write_plot(learner, out)
    policy = learner.policy()
    written = ["train.json", "run.json", "state-NNNNNN/", "history.csv", "learning_curve.png"]
    if hasattr(policy, "arrays"):
        from pbmarl.io import write_npz

        write_npz(out / "policy.npz", policy.arrays())
        write_json(out / "policy.json", policy.meta())
        written += ["policy.npz", "policy.json"]
    result = learner.evaluate(eval_episodes, deterministic=True)
    mean, stderr = float(result.mean[0]), float(result.stderr[0])
    write_json(out / "evaluation.json", {"mean": mean, "stderr": stderr, "episodes": result.episodes,
                                         "env_steps": learner.env_steps, "deterministic": True})
    print(f"done at {learner.env_steps} env steps: deterministic return {fmt(mean)} ± {fmt(stderr)} "
          f"over {eval_episodes} episodes; wrote {', '.join(written + ['evaluation.json'])} in {out}")
    return 0


def _write_plot(learner: Any, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pbmarl.io import write_atomic

    history = learner.history
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(history["env_steps"], history["return/0"], marker=".")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean episode return")
    ax.set_title(f"{type(learner).__name__} on {learner.game.name}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_atomic(out / "learning_curve.png", lambda fh: fig.savefig(fh, dpi=100, format="png"))
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
