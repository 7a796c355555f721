"""``pbmarl train``: plain RL on a one-player game, written to a run folder that ``pbmarl resume`` continues.

``--algo mmd``, ``ppo-selfplay`` and ``deep-mmd`` instead train a two-player game's self-play baseline
(`pbmarl.cli.selfplay`): a plain run folder whose history holds the exact exploitability.

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
    $ pbmarl train --game kuhn_poker --algo ppo-selfplay --steps 100000
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pbmarl.cli.drive import CliError, add_training_options, add_training_parser, default_out, drive, int_at_least
from pbmarl.cli.selfplay import ALGOS as SELFPLAY_ALGOS
from pbmarl.cli.selfplay import DEFAULT_ITERATIONS, DEFAULT_STEPS
from pbmarl.fmt import fmt
from pbmarl.learners.control.config import PRECISIONS

#: control learners (one agent); the self-play baselines (`pbmarl.cli.selfplay`) come after them
CONTROL_ALGOS = ("sac", "td3", "ddpg", "hddpg", "rainbow")
ALGOS = CONTROL_ALGOS + tuple(SELFPLAY_ALGOS)
MARKER = "train.json"


def add_train_parser(sub: Any) -> None:
    """Register ``pbmarl train`` on the CLI's subparsers."""
    train = add_training_parser(sub, "train", help="train one agent with a control learner, or a two-player "
                                "game's self-play baseline (mmd, ppo-selfplay, deep-mmd), and write a run folder",
                                game="a one-player game for the control learners (gym:Pendulum-v1, gym:CartPole-v1, "
                                     "mdp:two_round_dmdp); a two-player zero-sum game for mmd, ppo-selfplay and "
                                     "deep-mmd (kuhn_poker, leduc_poker, liars_dice)",
                                algos=ALGOS, algo="the learner, or the self-play baseline")
    train.add_argument("--steps", type=int_at_least(1, "--steps"), default=None,
                       help=f"env steps (default: {DEFAULT_STEPS}; mmd takes --iterations instead)")
    train.add_argument("--iterations", type=int_at_least(1, "--iterations"), default=None,
                       help=f"mmd: exact MMD updates (default: {DEFAULT_ITERATIONS})")
    train.add_argument("--alpha", type=float, default=None,
                       help="mmd and deep-mmd: the magnet's temperature (default: the run's, 0.05)")
    train.add_argument("--stepsize", type=float, default=None,
                       help="mmd: the step size (default: OpenSpiel's alpha / max|M|^2); deep-mmd: eta (default 1)")
    train.add_argument("--preset", default=None, choices=("iig_liars_dice",),
                       help="ppo-selfplay: a tuned setting of the IIG benchmark (Rudolph et al. 2026)")
    train.add_argument("--stop", type=float, default=None,
                       help="mmd: stop once the last iterate's exploitability is at or below this")
    train.add_argument("--seed", type=int_at_least(0, "--seed"), default=0)
    train.add_argument("--eval-episodes", type=int_at_least(1, "--eval-episodes"), default=None,
                       help="control learners: deterministic episodes of the final evaluation (default: 10)")
    train.add_argument("--matmul-precision", choices=PRECISIONS, default="float32",
                       help="bfloat16: the updates' hidden-to-hidden products in bfloat16 by autocast; medium: every "
                            "product of the updates from bfloat16-rounded inputs (oneDNN's math mode). Both are "
                            "faster on CPUs with bfloat16 instructions and networks of 256 units or more; "
                            "default: float32")
    add_training_options(train)


def is_train_folder(folder: Path) -> bool:
    return (folder / MARKER).exists()


def cmd_train(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import pbmarl as pb
    from pbmarl.io import ensure_writable_folder, write_json
    from pbmarl.learners.common.registry import make_learner
    from pbmarl.learners.control.base import ControlLearner

    if args.algo in SELFPLAY_ALGOS:
        from pbmarl.cli.selfplay import cmd_selfplay

        return cmd_selfplay(args, argv)
    for name, value in (("--iterations", args.iterations), ("--alpha", args.alpha), ("--stepsize", args.stepsize),
                        ("--preset", args.preset), ("--stop", args.stop)):
        if value is not None:
            raise CliError(f"{name} is for the self-play baselines (--algo {', '.join(SELFPLAY_ALGOS)}), not "
                           f"--algo {args.algo}")
    args.steps = DEFAULT_STEPS if args.steps is None else args.steps
    args.eval_episodes = 10 if args.eval_episodes is None else args.eval_episodes
    game = pb.load_game(args.game)
    out = args.out or default_out(args.game.split(":")[-1], args.algo)
    if is_train_folder(out) or (out / "run.json").exists():
        raise CliError(f"run folder {str(out)!r} already holds a run; continue it with: pbmarl resume {out}")
    learner = make_learner(game, {"name": args.algo, "seed": args.seed, "budget": args.steps,
                                  "workers": args.workers, "sync": args.sync, "staleness": args.staleness,
                                  "backend": args.backend, "matmul_precision": args.matmul_precision})
    if isinstance(learner, ControlLearner) and learner.multi_seat:
        raise CliError(f"pbmarl train trains one agent, and {game.name!r} has {game.num_players} seats; use "
                       "pb.learners.Independent with pb.MARL for independent agents, the learner as a PSRO oracle, "
                       "or, on a two-player game, --algo mmd, ppo-selfplay or deep-mmd")
    ensure_writable_folder(out, what="run folder")
    write_json(out / MARKER, {"argv": ["pbmarl", *argv], "game": game.name, "algo": args.algo,
                              "eval_episodes": args.eval_episodes})
    first = f"{type(learner).__name__} on {game.name}: {args.steps} env steps, seed {args.seed}" + (
        f", {args.workers} workers ({args.sync}, {args.backend})" if args.workers > 1 else "")
    drive(learner, f"{first}; run folder {out}", save=lambda: learner.save(out), quiet=args.quiet, line=train_line)
    return finish_train(learner, out, args.eval_episodes)


def train_line(record: Any) -> str:
    """The line a round of ``pbmarl train`` prints."""
    return (f"env steps {record.env_steps}: mean return {fmt(record['return/0'])}, loss "
            f"{fmt(record.loss)}, {record.seconds:.1f} s")


def finish_train(learner: Any, out: Path, eval_episodes: int) -> int:
    """After the drive loop: the learning curve, the trained policy and a deterministic evaluation."""
    from pbmarl.io import write_json

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
