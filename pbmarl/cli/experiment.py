"""``pbmarl experiment SPEC.yaml``, ``pbmarl experiment --resume DIR`` and ``pbmarl report DIR``.

An experiment spec is YAML with the keys of `pb.Experiment` (name, game, run, seeds, stop,
resources, max_failures, loggers); see ``examples/experiments/``. The grid is checked whole before
any trial starts; the trials run on Ray Tune (embedded locally, or ``--address`` a cluster); the
report is one Markdown file with its figures in ``<experiment>/report/``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pbmarl.cli.drive import CliError


def add_experiment_parser(sub: Any) -> None:
    """Register ``pbmarl experiment`` on the CLI's subparsers."""
    p = sub.add_parser("experiment", help="run a grid of runs (games x methods x seeds) from a YAML spec on Ray Tune")
    p.add_argument("spec", nargs="?", type=Path, help="the experiment's YAML spec")
    p.add_argument("--resume", type=Path, default=None, metavar="DIR", help="resume the experiment folder DIR")
    p.add_argument("--root", type=Path, default=None, help="where experiment folders go (default: the spec's root, "
                   "else ./experiments)")
    p.add_argument("--address", default=None, help="a Ray cluster to join ('auto' or host:port); default local")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    p.add_argument("--report", action="store_true", help="write the report when the trials are done")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_report_parser(sub: Any) -> None:
    """Register ``pbmarl report`` on the CLI's subparsers."""
    p = sub.add_parser("report", help="write an experiment folder's Markdown report (tables and figures)")
    p.add_argument("experiment_dir", type=Path)
    p.add_argument("--metric", default=None, help="a history column (default: exploitability, else the return)")
    p.add_argument("--out", type=Path, default=None, help="the report's folder (default: DIR/report)")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap resamples (rliable's paper uses 50000)")


def cmd_experiment(args: argparse.Namespace) -> int:
    from pbmarl.experiments import Experiment
    from pbmarl.experiments.report import write_report

    if (args.spec is None) == (args.resume is None):
        raise CliError("give a spec file (pbmarl experiment SPEC.yaml) or --resume DIR, one of them")
    if args.resume is not None:
        exp = Experiment.load(args.resume)
    else:
        if not args.spec.is_file():
            raise FileNotFoundError(f"no experiment spec at {args.spec}")
        exp = Experiment.from_yaml(args.spec, root=args.root)
    print(exp)
    exp.run(address=args.address, num_cpus=args.num_cpus, progress=False if args.quiet else None)
    status = exp.status
    print(status.groupby("state").size().to_string())
    for key, error in exp.errors.items():
        print(f"failed: {key}: {error}")
    if args.report:
        print(f"report: {write_report(exp)}")
    return 1 if (status["state"] == "failed").any() else 0


def cmd_report(args: argparse.Namespace) -> int:
    from pbmarl.experiments.report import write_report

    print(write_report(args.experiment_dir, metric=args.metric, out=args.out, reps=args.reps))
    return 0
