"""The `pbmarl` command line: ``pbmarl psro --game kuhn_poker`` and ``pbmarl resume RUN_DIR``."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ORACLES = ("exact", "dqn", "ppo", "a2c")
SOLVERS = ("nash", "uniform", "last", "prd", "rm", "alpharank", "rectified_nash")


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pbmarl", description="Population-based multi-agent RL from the command line.")
    sub = parser.add_subparsers(dest="command", required=True)

    psro = sub.add_parser("psro", help="run PSRO and write a run folder")
    psro.add_argument("--game", required=True, help="an OpenSpiel name such as kuhn_poker, leduc_poker, 'goofspiel(num_cards=4,imp_info=True)'")
    psro.add_argument("--solver", default="nash", choices=SOLVERS, help="meta-solver (default: nash)")
    psro.add_argument("--oracle", default="exact", choices=ORACLES, help="best-response oracle (default: exact)")
    psro.add_argument("--budget", type=int, default=None,
                      help="learner decisions per RL best response (default: the learner's own)")
    psro.add_argument("--evaluator", default="exact", choices=("exact", "rollout"),
                      help="how payoff-table cells are filled: exactly, or sampled with a RolloutPool (default: exact)")
    psro.add_argument("--episodes", type=int, default=1000, help="episodes per cell with --evaluator rollout")
    psro.add_argument("--workers", type=int, default=1, help="rollout workers with --evaluator rollout")
    psro.add_argument("--backend", default="local", choices=("local", "ray"), help="rollout backend (default: local)")
    psro.add_argument("--iterations", type=int, default=50, help="most iterations to run (default: 50)")
    psro.add_argument("--stop", type=float, default=1e-6, help="stop once exploitability <= this (default: 1e-6)")
    psro.add_argument("--seed", type=int, default=0)
    psro.add_argument("--out", type=Path, default=None, help="run folder (default: runs/GAME-SOLVER-TIME)")
    psro.add_argument("--quiet", action="store_true", help="no progress bar or per-iteration lines")

    resume = sub.add_parser("resume", help="continue a run folder from its last completed iteration")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--iterations", type=int, default=None,
                        help="more iterations (default: up to the run's own --iterations budget)")
    resume.add_argument("--quiet", action="store_true")
    return parser


def _default_out(game: str, solver: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", game).strip("_")
    return Path("runs") / f"{slug}-{solver}-{time.strftime('%Y%m%d-%H%M%S')}"


def _make_learner(game: Any, oracle: str, seed: int, budget: int | None) -> Any:
    if oracle == "exact":
        if budget is not None:
            raise CliError("--budget is for RL oracles (--oracle dqn, ppo or a2c); the exact oracle has none")
        return None  # PSRO's default, with a clear error where the exact engine cannot go
    try:
        from pbmarl.learners import make_learner
    except ImportError:
        raise CliError(f"the {oracle!r} oracle is not available in this installation") from None
    spec: dict[str, Any] = {"name": oracle, "seed": seed}
    if budget is not None:
        spec["budget"] = budget
    return make_learner(game, spec)


def _check_out(out: Path, game_name: str) -> None:
    from pbmarl.io import ensure_writable_folder, read_json

    if (out / "run.json").exists():
        saved = read_json(out / "run.json")["game"]["name"]
        if saved != game_name:
            raise CliError(f"run folder {str(out)!r} holds a run of {saved!r}, not {game_name!r}; pick another --out")
        raise CliError(f"run folder {str(out)!r} already holds a run of {saved!r}; continue it with: pbmarl resume {out}")
    ensure_writable_folder(out, what="run folder")


def _drive(run: Any, iterations: int, out: Path, quiet: bool) -> int:
    from tqdm.auto import tqdm

    if not quiet:
        print(f"{run!r}\nrun folder: {out}")
        print(run.records[-1])
    bar = tqdm(total=iterations, disable=quiet, unit="it", dynamic_ncols=True, file=sys.stderr)
    try:
        for record in run.run(iterations):
            bar.update(1)
            if record.exploitability is not None:
                bar.set_postfix(exploitability=f"{record.exploitability:.3g}")
            if not quiet:
                tqdm.write(str(record))
    finally:
        bar.close()
    _write_plot(run, out)
    last = run.records[-1]
    if not quiet:
        status = "converged" if run.converged else "stopped"
        measured = (f"exploitability {last.exploitability:.3g} (NashConv {last.nash_conv:.3g})"
                    if last.exploitability is not None else "no exact exploitability for this game")
        print(f"{status} after iteration {last.iteration}: {measured}; wrote {out / 'history.csv'}"
              + (f" and {out / 'exploitability.png'}" if (out / "exploitability.png").exists() else ""))
    return 0


def _write_plot(run: Any, out: Path) -> None:
    history = run.history
    if history["exploitability"].notna().any():
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from pbmarl.plot import plot_exploitability

        fig = plot_exploitability(history, title=f"PSRO-{run.solver.name} on {run.game.name}")
        tmp = out / ".exploitability.png.tmp.png"
        fig.savefig(tmp, dpi=100)
        plt.close(fig)
        os.replace(tmp, out / "exploitability.png")


def cmd_psro(args: argparse.Namespace) -> int:
    import pbmarl as pb
    from pbmarl.algorithms.psro import PSRO

    if args.iterations < 0:
        raise CliError(f"--iterations must be >= 0, got {args.iterations}")
    game = pb.load_game(args.game)
    out = args.out or _default_out(args.game, args.solver)
    _check_out(out, game.name)
    learner = _make_learner(game, args.oracle, args.seed, args.budget)
    evaluator = None
    if args.evaluator == "rollout":
        if args.backend == "ray":
            pb.init_ray()
        evaluator = pb.RolloutPool(game, num_workers=args.workers, backend=args.backend, seed=args.seed)
    run = PSRO(game, solver=args.solver, learner=learner, evaluator=evaluator, stop_exploitability=args.stop,
               max_iterations=args.iterations, eval_episodes=args.episodes, seed=args.seed, save_dir=out)
    return _drive(run, args.iterations, out, args.quiet)


def cmd_resume(args: argparse.Namespace) -> int:
    from pbmarl.algorithms.psro import PSRO

    out = args.run_dir
    if not (out / "run.json").exists():
        raise CliError(f"{str(out)!r} is not a pbmarl run folder (no run.json)")
    if args.iterations is not None:
        if args.iterations < 0:
            raise CliError(f"--iterations must be >= 0, got {args.iterations}")
        run = PSRO.load(out)
        run.max_iterations = run.iteration + args.iterations
    else:
        run = PSRO.load(out)
    remaining = max((run.max_iterations or run.iteration) - run.iteration, 0)
    return _drive(run, remaining, out, args.quiet)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "psro":
            return cmd_psro(args)
        return cmd_resume(args)
    except (CliError, ValueError, FileNotFoundError, OSError) as exc:
        print(f"pbmarl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pbmarl: interrupted; the run folder holds the last completed iteration", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
