"""``pbmarl train --algo mmd | ppo-selfplay | deep-mmd``: the self-play baselines on a two-player game.

These three are runs (`pb.MMD`, `pb.PPOSelfPlay`, `pb.DeepMMD`), not control learners, so their
folder is a plain run folder (`pbmarl.runs.folder`; ``pb.load_run(folder)`` rebuilds the run), as
``pbmarl psro`` writes::

    run.json, state-NNNNNN/   the run's whole state after its last completed step
    history.csv               one row per step; ``exploitability`` and ``nash_conv`` of the last iterate
    exploitability.png        exploitability against iterations (mmd) or env steps (ppo-selfplay, deep-mmd)

``pbmarl resume DIR`` continues it: MMD to its ``--iterations`` (or ``--iterations N`` more), the
deep ones to their env-step budget (or ``--steps N`` more, the budget moved with them).

Tabular MMD needs the exact engine, so a game it cannot hold is refused. The deep ones train on
any two-player game; where the exact engine cannot hold the game, the exploitability column stays
empty (as `pb.PPOSelfPlay` itself does without ``br_budget``) and the command says so.

Example:
    $ pbmarl train --game leduc_poker --algo mmd --iterations 500 --alpha 0.05
    $ pbmarl train --game kuhn_poker --algo ppo-selfplay --steps 200000
    $ pbmarl train --game liars_dice --algo ppo-selfplay --preset iig_liars_dice --steps 1000000
    $ pbmarl resume runs/kuhn_poker-ppo-selfplay-... --steps 100000
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pbmarl.cli.drive import STARTED, CliError, default_out, drive, set_up_in

#: ``--algo`` names of the self-play baselines, and the run type each builds
ALGOS = {"mmd": "MMD", "ppo-selfplay": "PPOSelfPlay", "deep-mmd": "DeepMMD"}
#: the deep runs' env steps when --steps is not given
DEFAULT_STEPS = 20_000
#: tabular MMD's iterations when --iterations is not given
DEFAULT_ITERATIONS = 1000


def check_options(args: argparse.Namespace) -> None:
    """Refuse the options of ``pbmarl train`` that the chosen self-play algo has no use for (by name)."""
    algo = args.algo
    if args.workers != 1 or args.backend != "local":
        raise CliError(f"--workers and --backend train a control learner on a parameter server; --algo {algo} "
                       "runs in one process")
    if args.matmul_precision != "float32":
        raise CliError(f"--matmul-precision applies to the control learners (sac, td3, ...), not --algo {algo}")
    if args.eval_episodes is not None:
        raise CliError(f"--eval-episodes is the control learners' final evaluation; --algo {algo} is measured by "
                       "its exploitability every step")
    if algo == "mmd":
        if args.steps is not None:
            raise CliError("--algo mmd takes no env steps (it updates the whole game tree exactly); give "
                           "--iterations N")
        if args.preset is not None:
            raise CliError(f"--preset names a tuned setting of --algo ppo-selfplay; --algo mmd takes --alpha "
                           f"and --stepsize, got --preset {args.preset}")
    else:
        if args.iterations is not None:
            raise CliError(f"--iterations is tabular MMD's budget; --algo {algo} trains for --steps env steps")
        if args.stepsize is not None and algo == "ppo-selfplay":
            raise CliError("--stepsize is MMD's (--algo mmd or deep-mmd); ppo-selfplay has none")
        if args.alpha is not None and algo == "ppo-selfplay":
            raise CliError("--alpha is MMD's temperature (--algo mmd or deep-mmd); ppo-selfplay has none")
        if args.preset is not None and algo != "ppo-selfplay":
            raise CliError(f"--preset names a tuned setting of --algo ppo-selfplay, not --algo {algo}")


def build_run(game: Any, args: argparse.Namespace, out: Path) -> tuple[Any, str]:
    """The run `args` ask for, and a note for the first line (what is not measured, or '')."""
    import pbmarl as pb
    from pbmarl.games.tree import NotExact

    if game.num_players != 2:
        raise CliError(f"--algo {args.algo} trains two-player games in self-play; {game.name!r} has "
                       f"{game.num_players} player{'s' * (game.num_players != 1)}"
                       + (" (for one agent, --algo sac, td3, ddpg, hddpg or rainbow)" if game.num_players == 1
                          else " (pbmarl psro or pb.JPSRO take n-player games)"))
    options: dict[str, Any] = {}
    if args.alpha is not None:
        options["alpha"] = args.alpha
    if args.stepsize is not None:
        options["stepsize"] = args.stepsize
    if args.algo == "mmd":
        try:
            run = pb.MMD(game, seed=args.seed, max_iterations=args.iterations or DEFAULT_ITERATIONS,
                         stop_exploitability=args.stop, **options)
        except NotExact as exc:
            raise CliError(f"--algo mmd updates the whole game tree, and {exc}; --algo ppo-selfplay or deep-mmd "
                           "train on it by sampling") from None
        return run, ""
    budget = args.steps or DEFAULT_STEPS
    if args.algo == "ppo-selfplay":
        run = pb.PPOSelfPlay(game, seed=args.seed, budget=budget, preset=args.preset)
    else:
        run = pb.DeepMMD(game, seed=args.seed, budget=budget, **options)
    from pbmarl.algorithms.psro.parts import exact_capable

    if exact_capable(game):
        return run, ""
    return run, (f"{game.name} is too large for the exact engine, so exploitability is not measured; the history "
                 "holds returns and losses")


def cmd_selfplay(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``pbmarl train`` with a self-play algo: build the run, drive it to its budget, report."""
    import pbmarl as pb
    from pbmarl.cli.psro import _check_out, describe, first_line, report, save_into
    from pbmarl.io import write_json

    check_options(args)
    game = pb.load_game(args.game)
    out = args.out or default_out(args.game.split(":")[-1], args.algo)
    with set_up_in(out):
        _check_out(out, game.name)
        run, note = build_run(game, args, out)
        write_json(out / STARTED, {"argv": ["pbmarl", *argv]})
    first = describe(run) + (f" ({note})" if note else "")
    budget = (f"{run.config.max_iterations} iterations" if args.algo == "mmd"
              else f"{run.config.budget:,} env steps")
    records = drive(run, first_line(run, f"{first}: {budget}, seed {args.seed}", out, args.quiet),
                    save=save_into(run, out), quiet=args.quiet,
                    total=run.config.max_iterations if args.algo == "mmd" else None)
    return report(run, records, out)
