"""``pbmarl resume RUN_DIR``: continue any run folder a command wrote, from its last completed step.

A run folder (`pbmarl.runs.folder`) is loaded with ``pb.load_run`` and driven to its own budget, or
``--iterations`` / ``--steps`` more; a ``pbmarl train`` or ``pbmarl marl`` folder goes on to the env
steps it was asked for (or ``--steps`` more) and is evaluated again at the end.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from pbmarl.cli.drive import STARTED, CliError, drive, int_at_least
from pbmarl.cli.marl import MARKER as MARL_MARKER
from pbmarl.cli.marl import evaluate_marl, is_marl_folder, marl_saver
from pbmarl.cli.psro import describe, first_line, measured, report, save_into
from pbmarl.cli.train import MARKER as TRAIN_MARKER
from pbmarl.cli.train import finish_train, is_train_folder, train_line
from pbmarl.runs.stop import Stop

#: run types that never play an episode, so ``--steps`` could never be reached
PLAYS_NO_STEPS = ("MMD",)


def add_resume_parser(sub: Any) -> None:
    """Register ``pbmarl resume`` on the CLI's subparsers."""
    resume = sub.add_parser("resume", help="continue a run folder from its last completed iteration")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--steps", type=int_at_least(1, "--steps"), default=None,
                        help="more env steps (runs written by pbmarl train)")
    resume.add_argument("--iterations", type=int_at_least(0, "--iterations"), default=None,
                        help="more iterations (default: up to the run's own --iterations budget)")
    resume.add_argument("--stop", type=float, default=None, help="replace the run's stopping exploitability")
    resume.add_argument("--quiet", action="store_true")


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
        if is_train_folder(out):
            return resume_train(out, args.steps, args.quiet)
        if is_marl_folder(out):
            return resume_marl(out, args.steps, args.quiet)
        if meta is None:
            raise CliError(_not_started(out))
    ensure_writable_folder(out, what="run folder")  # before any work: a read-only folder could not keep it
    saved = open_run(out)
    config = saved.config
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
    steps_budget = args.steps is not None and "budget" in config and "max_iterations" not in config
    if args.steps is not None and meta.get("type") in PLAYS_NO_STEPS:
        raise CliError(f"--steps counts env steps, and {meta.get('type')} plays none (it computes on the game "
                       f"tree); continue it with: pbmarl resume {shlex.quote(str(out))} --iterations N")
    if steps_budget:  # a self-play run's env-step budget moves with --steps (its learning rate anneals over it)
        records = saved.data.get("records") or [{}]
        overrides["budget"] = int(records[-1].get("env_steps", 0)) + args.steps
    run = pb.load_run(out, **overrides)
    until = None
    if args.steps is not None and not steps_budget:
        until = pb.Stop(env_steps=int(run.records[-1].env_steps if run.records else 0) + args.steps)
    elif steps is None and _finished(run):
        last = run.records[-1]
        converged = getattr(run, "converged", False)
        why = (f"it converged ({measured(last)})" if converged else f"it reached its last iteration ({run.iteration})")
        more = "--steps N" if "budget" in config and "max_iterations" not in config else "--iterations N"
        extend = f"pbmarl resume {shlex.quote(str(out))} {more}"
        if converged and "stop_exploitability" in config:
            extend += " --stop 0"
        print(f"the run in {out} is complete: {why}; {measured(last)}. Extend it with: {extend}")
        return 0
    max_iterations = getattr(run.config, "max_iterations", None)
    total = None if max_iterations is None else max(max_iterations - run.iteration, 0)
    first = first_line(run, f"resuming {describe(run)} at iteration {run.iteration}", out, args.quiet)
    records = drive(run, first, save=save_into(run, out), quiet=args.quiet, steps=steps, until=until, total=total)
    return report(run, records, out)


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


def resume_train(out: Path, steps: int | None, quiet: bool) -> int:
    """Continue a ``pbmarl train`` folder to its budget (or `steps` more env steps), then evaluate again."""
    from pbmarl.io import ensure_writable_folder, read_json
    from pbmarl.runs import load_run
    from pbmarl.runs.folder import open_run

    info = _marker(read_json(out / TRAIN_MARKER), out / TRAIN_MARKER)
    if not (out / "run.json").exists():
        raise CliError(f"no round of the run in {str(out)!r} completed, so there is nothing to resume; start it "
                       f"again with: {_start_again(info, out / TRAIN_MARKER)}")
    ensure_writable_folder(out, what="run folder")
    overrides: dict[str, Any] = {} if steps is None else {"budget": int(open_run(out).data["env_steps"]) + steps}
    learner = load_run(out, **overrides)
    if learner.done:
        print(f"the run in {out} is complete at {learner.env_steps} env steps; extend it with: "
              f"pbmarl resume {out} --steps N")
        return 0
    first = f"resuming {type(learner).__name__} on {learner.game.name} at {learner.env_steps} of {learner.config.budget} env steps"
    drive(learner, f"{first}; run folder {out}", save=lambda: learner.save(out), quiet=quiet, line=train_line)
    return finish_train(learner, out, int(info.get("eval_episodes", 10)))


def resume_marl(out: Path, steps: int | None, quiet: bool) -> int:
    """Continue a ``pbmarl marl`` folder to its env steps (or `steps` more), then evaluate again."""
    from pbmarl.algorithms.teams.marl import MARL
    from pbmarl.io import ensure_writable_folder, read_json, write_json

    info = _marker(read_json(out / MARL_MARKER), out / MARL_MARKER)
    if (out / "run").is_symlink():  # loading and saving through it would read and write outside the folder
        raise CliError(f"{str(out / 'run')!r} is a symlink; a run folder holds none, so pbmarl resume does not "
                       "follow it (copy the run folder into place instead)")
    if not (out / "run" / "run.json").exists():
        raise CliError(f"no step of the run in {str(out)!r} completed, so there is nothing to resume; start it "
                       f"again with: {_start_again(info, out / MARL_MARKER)}")
    if steps is None and not isinstance(info.get("steps"), int):
        raise CliError(f"{str(out / MARL_MARKER)!r} holds no 'steps' (the env steps the run was asked for), got "
                       f"{info.get('steps')!r}; give the steps to run with: pbmarl resume {shlex.quote(str(out))} --steps N")
    ensure_writable_folder(out, what="run folder")
    run = MARL.load(out / "run")
    budget = int(info["steps"]) if steps is None else run.env_steps + int(steps)
    if budget <= run.env_steps:
        print(f"the run in {out} is complete ({run.env_steps} env steps); extend it with: "
              f"pbmarl resume {out} --steps N")
        return 0
    write_json(out / MARL_MARKER, {**info, "steps": budget})
    first = f"resuming {run!r} up to {budget} env steps"
    drive(run, first, save=marl_saver(run, out), quiet=quiet, until=Stop(env_steps=budget))
    return evaluate_marl(run, out, int(info.get("eval_episodes", 50)))


def _marker(info: Any, path: Path) -> dict[str, Any]:
    """A train.json / marl.json as a dict; anything else is refused, naming the file."""
    if not isinstance(info, dict):
        raise CliError(f"{str(path)!r} must hold a JSON object (what pbmarl wrote when the run started), "
                       f"got {type(info).__name__}")
    return info


def _start_again(info: dict[str, Any], path: Path) -> str:
    """The command that started the run, from its marker; a marker without one says so."""
    argv = info.get("argv")
    if isinstance(argv, list) and argv:
        return " ".join(str(a) for a in argv)
    return f"the command that started it ({str(path)!r} records none: its 'argv' is {argv!r})"
