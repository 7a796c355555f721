"""The `pbmarl` command line: ``pbmarl psro --game kuhn_poker`` and ``pbmarl resume RUN_DIR``."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pbmarl.fmt import fmt
from pbmarl.protocols import Specified

ORACLES = ("exact", "dqn", "ppo", "a2c")
SOLVERS = ("nash", "uniform", "last", "prd", "rm", "alpharank", "rectified_nash")
#: the oracle chosen for games the exact engine cannot walk, when --oracle is not given
SAMPLED_ORACLE = "ppo"
#: written when `pbmarl psro` starts, so `pbmarl resume` can say how to start a run that never finished iteration 0
STARTED = "started.json"
#: most episodes per cell the command line accepts (see `PSRO.MAX_EPISODES`)
MAX_EPISODES = 10_000_000


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def _int_at_least(low: int, what: str) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= {low}, got {value}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pbmarl", description="Population-based multi-agent RL from the command line.")
    sub = parser.add_subparsers(dest="command", required=True)

    psro = sub.add_parser("psro", help="run PSRO and write a run folder")
    psro.add_argument("--game", required=True, help="an OpenSpiel name such as kuhn_poker, leduc_poker, 'goofspiel(num_cards=4,imp_info=True)'")
    psro.add_argument("--solver", default="nash", choices=SOLVERS, help="meta-solver (default: nash)")
    psro.add_argument("--oracle", default=None, choices=ORACLES,
                      help=f"best-response oracle (default: exact, or {SAMPLED_ORACLE} for games too large for it)")
    psro.add_argument("--budget", type=_int_at_least(1, "--budget"), default=None,
                      help="learner decisions per RL best response (default: the learner's own)")
    psro.add_argument("--parallel-oracle", action="store_true",
                      help="train the players' RL best responses side by side, one Ray actor (1 CPU) per player "
                           "(pb.ParallelOracle)")
    psro.add_argument("--evaluator", default=None, choices=("exact", "rollout"),
                      help="how payoff-table cells are filled: exactly, or sampled with a RolloutPool "
                           "(default: exact, or rollout for games too large for the exact engine)")
    psro.add_argument("--episodes", type=_int_at_least(1, "--episodes"), default=1000,
                      help="episodes per cell with --evaluator rollout")
    psro.add_argument("--workers", type=_int_at_least(1, "--workers"), default=1,
                      help="rollout workers with --evaluator rollout")
    psro.add_argument("--backend", default="local", choices=("local", "ray"), help="rollout backend (default: local)")
    psro.add_argument("--iterations", type=_int_at_least(0, "--iterations"), default=50,
                      help="most iterations to run (default: 50)")
    psro.add_argument("--stop", type=float, default=1e-6, help="stop once exploitability <= this (default: 1e-6)")
    psro.add_argument("--seed", type=_int_at_least(0, "--seed"), default=0)
    psro.add_argument("--out", type=Path, default=None, help="run folder (default: runs/GAME-SOLVER-TIME)")
    psro.add_argument("--quiet", action="store_true", help="only the first and the final line")

    from pbmarl.train_cli import add_train_parser

    add_train_parser(sub, _int_at_least)

    from pbmarl.marl_cli import add_marl_parser

    add_marl_parser(sub, _int_at_least)

    resume = sub.add_parser("resume", help="continue a run folder from its last completed iteration")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--steps", type=_int_at_least(1, "--steps"), default=None,
                        help="more env steps (runs written by pbmarl train)")
    resume.add_argument("--iterations", type=_int_at_least(0, "--iterations"), default=None,
                        help="more iterations (default: up to the run's own --iterations budget)")
    resume.add_argument("--stop", type=float, default=None, help="replace the run's stopping exploitability")
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
        raise CliError(f"the {oracle!r} oracle needs torch, which this installation lacks "
                       "(pip install 'pbmarl[torch]' or the full install)") from None
    spec: dict[str, Any] = {"name": oracle, "seed": seed}
    if budget is not None:
        spec["budget"] = budget
    try:
        return make_learner(game, spec)
    except ImportError as exc:
        raise CliError(f"the {oracle!r} oracle needs torch, which this installation lacks ({exc}); "
                       "pip install 'pbmarl[torch]' or the full install") from None


def _check_out(out: Path, game_name: str) -> None:
    from pbmarl.io import ensure_writable_folder, read_json

    if (out / "run.json").exists():
        saved = read_json(out / "run.json")["game"]["name"]
        if saved != game_name:
            raise CliError(f"run folder {str(out)!r} holds a run of {saved!r}, not {game_name!r}; pick another --out")
        raise CliError(f"run folder {str(out)!r} already holds a run of {saved!r}; continue it with: pbmarl resume {out}")
    ensure_writable_folder(out, what="run folder")


def _describe(run: Any) -> str:
    """One line: what runs (algorithm, game, solver, oracle, evaluator)."""
    evaluator = run.evaluator.spec().get("kind", "?") if isinstance(run.evaluator, Specified) else type(run.evaluator).__name__
    return (f"{type(run).__name__} on {run.game.name}: solver {getattr(run.solver, 'name', run.solver)}, "
            f"oracle {run.learner.name}, evaluator {'exact' if evaluator in ('exact', 'ExactEvaluator') else evaluator}")


def _measured(record: Any) -> str:
    if record.exploitability is not None:
        return f"exploitability {fmt(record.exploitability)} (NashConv {fmt(record.nash_conv)})"
    gain = sum(record.br_gains) if record.br_gains else None
    stderr = (sum(s * s for s in record.br_gain_stderr) ** 0.5) if record.br_gain_stderr else None
    return (f"sampled: meta-game NashConv {fmt(record.meta_nash_conv)}, best-response gain "
            f"{fmt(gain)} ± {fmt(stderr)} (no exact exploitability for this game)")


def _drive(run: Any, iterations: int, out: Path, quiet: bool, first: str) -> int:
    from tqdm.auto import tqdm

    print(f"{first}; run folder {out}", flush=True)
    if not quiet:
        print(run.records[-1], flush=True)
    # a bar only on a terminal: in a log file its redraws would mix into the per-iteration lines
    bar = tqdm(total=iterations, disable=quiet or not sys.stderr.isatty(), unit="it", dynamic_ncols=True,
               file=sys.stderr)
    try:
        for record in run.run(iterations):
            bar.update(1)
            if record.exploitability is not None:
                bar.set_postfix(exploitability=fmt(record.exploitability))
            if not quiet:
                tqdm.write(str(record), file=sys.stdout)
    finally:
        bar.close()
    written = ["run.json", "history.csv", "population/"]
    if _write_plot(run, out):
        written.append("exploitability.png")
    last = run.records[-1]
    status = "converged" if run.converged else "stopped"
    print(f"{status} after iteration {last.iteration}: {_measured(last)}; wrote {', '.join(written)} in {out}")
    return 0


def _write_plot(run: Any, out: Path) -> bool:
    """Write exploitability.png: the exact exploitability, or for sampled runs the sampled measures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pbmarl.io import write_atomic
    from pbmarl.plots.curves import plot_exploitability

    history = run.history
    title = f"{_describe(run).replace(': ', ' · ')}"
    if history["exploitability"].notna().any():
        fig = plot_exploitability(history, title=title)
    else:
        columns = [c for c in ("meta_nash_conv", "br_gain") if c in history and history[c].notna().any()]
        log = all(float(v) > 0 for c in columns for v in history[c].dropna())
        fig = plot_exploitability(history, y=columns or ["meta_nash_conv"], log=log, title=title)
    write_atomic(out / "exploitability.png", lambda fh: fig.savefig(fh, dpi=100, format="png"))
    plt.close(fig)
    return True


def _exact_capable(game: Any) -> bool:
    from pbmarl.algorithms.psro import _exact_capable as capable

    return capable(game)


def cmd_psro(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import pbmarl as pb

    if args.episodes > MAX_EPISODES:
        raise CliError(f"--episodes must be at most {MAX_EPISODES:,} per cell, got {args.episodes}")
    game = pb.load_game(args.game)
    out = args.out or _default_out(args.game, args.solver)
    with set_up_in(out):
        run, notes = _set_up_psro(args, argv, game, out)
    first = _describe(run)
    if notes:
        first += f" ({game.name} is too large for the exact engine: {', '.join(notes)})"
    return _drive(run, args.iterations, out, args.quiet, first)


@contextlib.contextmanager
def set_up_in(out: Path) -> Iterator[None]:
    """Around a command's set-up: if it fails (bad input), a run folder it created is removed again,
    so a refused command leaves nothing behind (a folder it did not create is left as it was)."""
    fresh = not out.exists()
    try:
        yield
    except Exception:
        if fresh and out.is_dir() and {p.name for p in out.iterdir()} <= {STARTED}:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _set_up_psro(args: argparse.Namespace, argv: Sequence[str], game: Any, out: Path) -> tuple[Any, list[str]]:
    import pbmarl as pb
    from pbmarl.algorithms.psro import PSRO
    from pbmarl.io import write_json

    notes = []
    if not _exact_capable(game):
        if args.evaluator is None:
            args.evaluator = "rollout"
            notes.append(f"payoffs sampled (--evaluator rollout, {args.episodes} episodes per cell)")
        if args.oracle is None:
            args.oracle = SAMPLED_ORACLE
            notes.append(f"best responses learned (--oracle {SAMPLED_ORACLE})")
    oracle, evaluator_name = args.oracle or "exact", args.evaluator or "exact"
    if args.parallel_oracle and oracle == "exact":
        raise CliError("--parallel-oracle trains RL best responses side by side; add --oracle dqn, ppo or a2c "
                       "(the exact oracle is deterministic and fast)")
    _check_out(out, game.name)
    write_json(out / STARTED, {"argv": ["pbmarl", *argv]})
    learner = _make_learner(game, oracle, args.seed, args.budget)
    if args.parallel_oracle:
        learner = pb.ParallelOracle(learner, backend="ray")
        notes.append(f"best responses of the {game.num_players} players trained side by side (--parallel-oracle)")
    evaluator = None
    if evaluator_name == "rollout":
        if args.backend == "ray":
            pb.init_ray()
        evaluator = pb.RolloutPool(game, num_workers=args.workers, backend=args.backend, seed=args.seed)
    elif args.workers != 1 or args.backend != "local":
        raise CliError("--workers and --backend apply to sampled payoffs; add --evaluator rollout")
    run = PSRO(game, solver=args.solver, learner=learner, evaluator=evaluator, stop_exploitability=args.stop,
               max_iterations=args.iterations, eval_episodes=args.episodes, seed=args.seed, save_dir=out)
    return run, notes


def _not_started(out: Path) -> str:
    started = out / STARTED
    if started.is_file():
        try:
            argv = json.loads(started.read_text())["argv"]
            command = shlex.join(str(a) for a in argv)
        except (ValueError, KeyError, TypeError):
            command = f"pbmarl psro --game GAME --out {shlex.quote(str(out))}"
        return (f"no iteration of the run in {str(out)!r} completed before it stopped, so there is nothing to "
                f"resume; start it again with: {command}")
    return f"{str(out)!r} is not a pbmarl run folder (no run.json)"


def cmd_resume(args: argparse.Namespace) -> int:
    from pbmarl.algorithms.psro import PSRO
    from pbmarl.io import ensure_writable_folder

    out = args.run_dir
    from pbmarl.train_cli import is_train_folder, resume_train

    if is_train_folder(out):
        return resume_train(out, args.steps, args.quiet)
    from pbmarl.marl_cli import is_marl_folder, resume_marl

    if is_marl_folder(out):
        return resume_marl(out, args.steps, args.quiet)
    if not (out / "run.json").exists():
        raise CliError(_not_started(out))
    ensure_writable_folder(out, what="run folder")  # before any work: a read-only folder could not keep it
    overrides = {} if args.stop is None else {"stop_exploitability": args.stop}
    run = PSRO.load(out, **overrides)
    if args.iterations is not None:
        run.max_iterations = run.iteration + args.iterations
    remaining = max((run.max_iterations or run.iteration) - run.iteration, 0)
    if remaining == 0 or run.converged:
        last = run.records[-1]
        why = (f"it converged (exploitability {fmt(last.exploitability)} <= {fmt(run.stop_exploitability)})"
               if run.converged else f"it reached its last iteration ({run.iteration})")
        extend = f"pbmarl resume {shlex.quote(str(out))} --iterations N"
        if run.converged:
            extend += " --stop 0"
        print(f"the run in {out} is complete: {why}; {_measured(last)}. Extend it with: {extend}")
        return 0
    return _drive(run, remaining, out, args.quiet, f"resuming {_describe(run)} at iteration {run.iteration}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        if args.command == "psro":
            return cmd_psro(args, argv)
        if args.command == "train":
            from pbmarl.train_cli import cmd_train

            return cmd_train(args, argv)
        if args.command == "marl":
            from pbmarl.marl_cli import cmd_marl

            return cmd_marl(args, argv)
        return cmd_resume(args)
    except (CliError, ValueError, TypeError, FileNotFoundError, OSError, ConnectionError) as exc:
        print(f"pbmarl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pbmarl: interrupted; the run folder holds the last completed iteration", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
