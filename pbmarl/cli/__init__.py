"""The `pbmarl` command line: ``pbmarl psro``, ``pbmarl train``, ``pbmarl marl``, ``pbmarl resume RUN_DIR``,
``pbmarl experiment SPEC.yaml`` / ``--resume DIR`` and ``pbmarl report DIR`` (`pbmarl.cli.experiment`).

Each command sets a run up (`pbmarl.cli.psro`, `.train`, `.marl`) or loads one (`.resume`) and hands
it to the one drive loop (`pbmarl.cli.drive.drive`), which steps it and saves the run folder after
every step.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pbmarl.cli.drive import CliError
from pbmarl.cli.experiment import add_experiment_parser, add_report_parser, cmd_experiment, cmd_report
from pbmarl.cli.marl import add_marl_parser, cmd_marl
from pbmarl.cli.psro import add_psro_parser, cmd_psro
from pbmarl.cli.resume import add_resume_parser, cmd_resume
from pbmarl.cli.train import add_train_parser, cmd_train

__all__ = ["CliError", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pbmarl", description="Population-based multi-agent RL from the command line.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_psro_parser(sub)
    add_train_parser(sub)
    add_marl_parser(sub)
    add_resume_parser(sub)
    add_experiment_parser(sub)
    add_report_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        if args.command == "psro":
            return cmd_psro(args, argv)
        if args.command == "train":
            return cmd_train(args, argv)
        if args.command == "marl":
            return cmd_marl(args, argv)
        if args.command == "experiment":
            return cmd_experiment(args)
        if args.command == "report":
            return cmd_report(args)
        return cmd_resume(args)
    except (CliError, ValueError, TypeError, FileNotFoundError, OSError, ConnectionError) as exc:
        print(f"pbmarl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pbmarl: interrupted; the run folder holds the last completed iteration", file=sys.stderr)
        return 130
