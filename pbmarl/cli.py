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
        saved = (read_json(out / "run.json").get("game") or {}).get("name")
        if saved != game_name:
            raise CliError(f"run folder {str(out)!r} holds a run of {saved!r}, not {game_name!r}; pick another --out")
        raise CliError(f"run folder {str(out)!r} already holds a run of {saved!r}; continue it with: pbmarl resume {out}")
    ensure_writable_folder(out, what="run folder")


def _describe(run: Any) -> str:
    """One line: what runs (algorithm, game; for PSRO and its relatives, solver, oracle, evaluator)."""
    from pbmarl.algorithms.psro.psro import PSRO

    game = getattr(run, "game", None)
    where = f"{type(run).__name__} on {game.name}" if game is not None else type(run).__name__
    if not isinstance(run, PSRO):
        return where
    evaluator = run.evaluator.spec().get("kind", "?") if isinstance(run.evaluator, Specified) else type(run.evaluator).__name__
    return (f"{where}: solver {getattr(run.solver, 'name', run.solver)}, oracle {run.learner.name}, "
            f"evaluator {'exact' if evaluator in ('exact', 'ExactEvaluator') else evaluator}")


def _measured(record: Any) -> str:
    """What the last record measured, in words: exploitability, else PSRO's sampled measures, else returns."""
    row = record.as_row()
    if row.get("exploitability") is not None:
        return f"exploitability {fmt(row['exploitability'])} (NashConv {fmt(row.get('nash_conv'))})"
    if "br_gain" in row:
        return (f"sampled: meta-game NashConv {fmt(row.get('meta_nash_conv'))}, best-response gain "
                f"{fmt(row['br_gain'])} ± {fmt(row.get('br_gain_stderr'))} (no exact exploitability for this game)")
    returns = ", ".join(f"{k} {fmt(v)}" for k, v in row.items() if str(k).startswith("return/"))
    return f"{row['env_steps']:,} env steps" + (f", {returns}" if returns else "")


def _drive(run: Any, steps: int | None, out: Path, quiet: bool, first: str, *, until: Any = None,
           total: int | None = None) -> int:
    """Step `run` (`steps` more, or to `until`, or to its own budget), printing a line per record; the
    run is saved into `out` after every step (a PSRO-family run with ``save_dir`` saves itself)."""
    from tqdm.auto import tqdm

    print(f"{first}; run folder {out}", flush=True)
    if not quiet and run.records:
        print(run.records[-1], flush=True)
    saves_itself = getattr(run.config, "save_dir", None) is not None
    # a bar only on a terminal: in a log file its redraws would mix into the per-iteration lines
    bar = tqdm(total=total if steps is None else steps, disable=quiet or not sys.stderr.isatty(), unit="it",
               dynamic_ncols=True, file=sys.stderr)

    def show(record: Any) -> None:
        if not saves_itself:
            run.save(out)
        bar.update(1)
        row = record.as_row()
        if row.get("exploitability") is not None:
            bar.set_postfix(exploitability=fmt(row["exploitability"]))
        if not quiet:
            tqdm.write(str(record), file=sys.stdout)

    if steps is None and until is None:
        try:
            run.done  # noqa: B018 - a run without a budget of its own says so before any work
        except ValueError as exc:
            bar.close()
            raise CliError(f"{exc}; with pbmarl resume: --iterations N or --steps N") from None
    try:
        records = run.run(steps, until=until, progress=False, callback=show)
    finally:
        bar.close()
    written = ["run.json", "history.csv", "state-*/"]
    if _write_plot(run, out):
        written.append("exploitability.png")
    last = run.records[-1]
    converged = getattr(run, "converged", False) or "exploitability" in records.stopped_by
    status = "converged" if converged else "stopped"
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
    if not any(c in history for c in ("exploitability", "meta_nash_conv", "br_gain")):
        return False
    title = f"{_describe(run).replace(': ', ' · ')}"
    if "exploitability" in history and history["exploitability"].notna().any():
        fig = plot_exploitability(history, title=title)
    else:
        columns = [c for c in ("meta_nash_conv", "br_gain") if c in history and history[c].notna().any()]
        log = all(float(v) > 0 for c in columns for v in history[c].dropna())
        fig = plot_exploitability(history, y=columns or ["meta_nash_conv"], log=log, title=title)
    write_atomic(out / "exploitability.png", lambda fh: fig.savefig(fh, dpi=100, format="png"))
    plt.close(fig)
    return True


def _exact_capable(game: Any) -> bool:
    from pbmarl.algorithms.psro.psro import _exact_capable as capable

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
    return _drive(run, None, out, args.quiet, first, total=args.iterations)


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
    from pbmarl.algorithms.psro.psro import PSRO
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
    """Continue any run folder (``pb.load_run``): to the run's own budget, or ``--iterations`` / ``--steps`` more."""
    import pbmarl as pb
    from pbmarl.io import ensure_writable_folder
    from pbmarl.runs.folder import FORMAT, open_run

    out = args.run_dir
    meta = _peek(out)
    if meta is None or meta.get("format") != FORMAT:
        from pbmarl.train_cli import is_train_folder, resume_train

        if is_train_folder(out):
            return resume_train(out, args.steps, args.quiet)
        from pbmarl.marl_cli import is_marl_folder, resume_marl

        if is_marl_folder(out):
            return resume_marl(out, args.steps, args.quiet)
        if meta is None:
            raise CliError(_not_started(out))
    ensure_writable_folder(out, what="run folder")  # before any work: a read-only folder could not keep it
    config = open_run(out).config
    overrides: dict[str, Any] = {}
    if args.stop is not None:
        if "stop_exploitability" not in config:
            raise CliError(f"--stop replaces a run's stop_exploitability; a {meta.get('type')} run has none")
        overrides["stop_exploitability"] = args.stop
    steps = None
    if args.iterations is not None:
        if "max_iterations" in config:
            overrides["max_iterations"] = int(meta.get("iteration", 0)) + args.iterations
        else:
            steps = args.iterations
    run = pb.load_run(out, **overrides)
    until = None
    if args.steps is not None:
        until = pb.Stop(env_steps=int(run.records[-1].env_steps if run.records else 0) + args.steps)
    elif steps is None and _finished(run):
        last = run.records[-1]
        converged = getattr(run, "converged", False)
        why = (f"it converged ({_measured(last)})" if converged else f"it reached its last iteration ({run.iteration})")
        extend = f"pbmarl resume {shlex.quote(str(out))} --iterations N"
        if converged and "stop_exploitability" in config:
            extend += " --stop 0"
        print(f"the run in {out} is complete: {why}; {_measured(last)}. Extend it with: {extend}")
        return 0
    max_iterations = getattr(run.config, "max_iterations", None)
    total = None if max_iterations is None else max(max_iterations - run.iteration, 0)
    with run:
        return _drive(run, steps, out, args.quiet, f"resuming {_describe(run)} at iteration {run.iteration}",
                      until=until, total=total)


def _peek(out: Path) -> dict[str, Any] | None:
    """`out`'s run.json as a dict, or None when there is none (or it is not a JSON object)."""
    from pbmarl.io import read_json

    if not (out / "run.json").is_file():
        return None
    try:
        data = read_json(out / "run.json")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return data if isinstance(data, dict) else None


def _finished(run: Any) -> bool:
    """Whether `run` has reached its own budget (a run without one is never finished)."""
    try:
        return bool(run.done)
    except ValueError:
        return False


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
