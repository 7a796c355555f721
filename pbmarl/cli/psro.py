"""``pbmarl psro --game kuhn_poker``: PSRO from the command line, written to a run folder that ``pbmarl resume`` continues.

`report` ends every command that drives a run of the PSRO family or any other run folder (`pbmarl.cli.resume`):
the exploitability plot and the final line.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pbmarl.cli.drive import STARTED, CliError, add_run_folder_options, default_out, drive, int_at_least, set_up_in
from pbmarl.fmt import fmt
from pbmarl.protocols import Specified

ORACLES = ("exact", "dqn", "ppo", "a2c")
SOLVERS = ("nash", "uniform", "last", "prd", "rm", "mmd", "alpharank", "rectified_nash")
#: the oracle chosen for games the exact engine cannot walk, when --oracle is not given
SAMPLED_ORACLE = "ppo"
#: most episodes per cell the command line accepts (see `PSRO.MAX_EPISODES`)
MAX_EPISODES = 10_000_000


def add_psro_parser(sub: Any) -> None:
    """Register ``pbmarl psro`` on the CLI's subparsers."""
    psro = sub.add_parser("psro", help="run PSRO and write a run folder")
    psro.add_argument("--game", required=True, help="an OpenSpiel name such as kuhn_poker, leduc_poker, 'goofspiel(num_cards=4,imp_info=True)'")
    psro.add_argument("--solver", default="nash", choices=SOLVERS, help="meta-solver (default: nash)")
    psro.add_argument("--oracle", default=None, choices=ORACLES,
                      help=f"best-response oracle (default: exact, or {SAMPLED_ORACLE} for games too large for it)")
    psro.add_argument("--budget", type=int_at_least(1, "--budget"), default=None,
                      help="learner decisions per RL best response (default: the learner's own)")
    psro.add_argument("--parallel-oracle", action="store_true",
                      help="train the players' RL best responses side by side, one Ray actor (1 CPU) per player "
                           "(pb.algorithms.ParallelOracle)")
    psro.add_argument("--evaluator", default=None, choices=("exact", "rollout"),
                      help="how payoff-table cells are filled: exactly, or sampled with a RolloutPool "
                           "(default: exact, or rollout for games too large for the exact engine)")
    psro.add_argument("--episodes", type=int_at_least(1, "--episodes"), default=1000,
                      help="episodes per cell with --evaluator rollout")
    psro.add_argument("--workers", type=int_at_least(1, "--workers"), default=1,
                      help="rollout workers with --evaluator rollout")
    psro.add_argument("--backend", default="local", choices=("local", "ray"), help="rollout backend (default: local)")
    psro.add_argument("--iterations", type=int_at_least(0, "--iterations"), default=50,
                      help="most iterations to run (default: 50)")
    psro.add_argument("--stop", type=float, default=1e-6, help="stop once exploitability <= this (default: 1e-6)")
    psro.add_argument("--seed", type=int_at_least(0, "--seed"), default=0)
    add_run_folder_options(psro, "GAME-SOLVER")



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


def describe(run: Any) -> str:
    """One line: what runs (algorithm, game; for PSRO and its relatives, solver, oracle, evaluator)."""
    from pbmarl.algorithms.psro.psro import PSRO

    game = getattr(run, "game", None)
    where = f"{type(run).__name__} on {game.name}" if game is not None else type(run).__name__
    if not isinstance(run, PSRO):
        return where
    evaluator = run.evaluator.spec().get("kind", "?") if isinstance(run.evaluator, Specified) else type(run.evaluator).__name__
    return (f"{where}: solver {getattr(run.solver, 'name', run.solver)}, oracle {run.learner.name}, "
            f"evaluator {'exact' if evaluator in ('exact', 'ExactEvaluator') else evaluator}")


def measured(record: Any) -> str:
    """What the last record measured, in words: exploitability, else PSRO's sampled measures, else returns."""
    row = record.as_row()
    if row.get("exploitability") is not None:
        return f"exploitability {fmt(row['exploitability'])} (NashConv {fmt(row.get('nash_conv'))})"
    if "br_gain" in row:
        return (f"sampled: meta-game NashConv {fmt(row.get('meta_nash_conv'))}, best-response gain "
                f"{fmt(row['br_gain'])} ± {fmt(row.get('br_gain_stderr'))} (no exact exploitability for this game)")
    returns = ", ".join(f"{k} {fmt(v)}" for k, v in row.items() if str(k).startswith("return/"))
    return f"{row['env_steps']:,} env steps" + (f", {returns}" if returns else "")


def report(run: Any, records: Any, out: Path) -> int:
    """After the drive loop: write the exploitability plot and say how the run ended."""
    written = ["run.json", "history.csv", "state-*/"]
    if _write_plot(run, out):
        written.append("exploitability.png")
    last = run.records[-1]
    converged = getattr(run, "converged", False) or "exploitability" in records.stopped_by
    status = "converged" if converged else "stopped"
    print(f"{status} after iteration {last.iteration}: {measured(last)}; wrote {', '.join(written)} in {out}")
    return 0


def first_line(run: Any, first: str, out: Path, quiet: bool) -> str:
    """`first` and the run folder; a resumed run's last record after it (unless `quiet`)."""
    return f"{first}; run folder {out}" + (f"\n{run.records[-1]}" if not quiet and run.records else "")


def save_into(run: Any, out: Path) -> Any:
    """The drive loop's save: into `out`, unless the run saves itself there (a PSRO-family run with ``save_dir``)."""
    if getattr(run.config, "save_dir", None) is not None:
        return lambda: None
    return lambda: run.save(out)


def _write_plot(run: Any, out: Path) -> bool:
    """Write exploitability.png: the exact exploitability, or for sampled runs the sampled measures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pbmarl.io import write_atomic
    from pbmarl.plots.curves import plot_exploitability

    history = run.history
    if not any(c in history and history[c].notna().any() for c in ("exploitability", "meta_nash_conv", "br_gain")):
        return False  # nothing measured (a self-play run on a game too large for the exact engine)
    title = f"{describe(run).replace(': ', ' · ')}"
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
    out = args.out or default_out(args.game, args.solver)
    with set_up_in(out):
        run, notes = _set_up_psro(args, argv, game, out)
    first = describe(run)
    if notes:
        first += f" ({game.name} is too large for the exact engine: {', '.join(notes)})"
    records = drive(run, first_line(run, first, out, args.quiet), save=save_into(run, out), quiet=args.quiet,
                    total=args.iterations)
    return report(run, records, out)


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
        learner = pb.algorithms.ParallelOracle(learner, backend="ray")
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
