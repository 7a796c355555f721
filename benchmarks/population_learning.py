"""Population learning beyond PSRO: NFSP on Kuhn, P2SRO against sequential PSRO on Leduc, and a
League on Connect Four, each beside a reference measured in the same run.

Slices (run one at a time on a shared machine, ``--only``):

- ``nfsp``: NFSP's exact exploitability on Kuhn at 10k, 20k, 30k, 40k episodes, beside OpenSpiel's
  PyTorch NFSP numbers on the same settings (0.407, 0.275, 0.232, 0.220; the bar is <= 0.25 at 40k)
  and OpenSpiel's CFR+ run here for the same wall time.
- ``p2sro``: P2SRO(active=3) and sequential PSRO with the same DQN oracle on Leduc: wall time until
  exploitability 0.3 (``--minutes`` each), with CFR+ for reference.
- ``league``: a League (DQN agents) on ``pettingzoo:connect_four_v3`` and, with the same env-step
  budget, a self-play run and a PSRO run; then the league's main agent plays both.

Every run appends rows (date, commit, command, seed, numbers) to
``benchmarks/results/population_learning.csv``.

    python benchmarks/population_learning.py --only nfsp --seeds 0
    python benchmarks/population_learning.py --only p2sro --minutes 10
    python benchmarks/population_learning.py --only league --steps 200000
"""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pbmarl as pb  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "population_learning.csv"
FIELDS = ["date", "commit", "command", "slice", "game", "method", "seed", "x", "x_unit", "value", "metric",
          "wall_s", "reference"]
#: OpenSpiel 2.0.2's PyTorch NFSP on Kuhn (nfsp_kuhn_pytorch.py settings), /work/shared/reference
OPENSPIEL_NFSP_KUHN = {10_000: 0.407, 20_000: 0.275, 30_000: 0.232, 40_000: 0.220}
#: the settings of OpenSpiel's Kuhn example (hidden 128, SGD 0.01 / 0.01, learn every 64, eps 0.06 -> 0.001)
OPENSPIEL_KUHN = dict(hidden=(128,), rl_lr=0.01, sl_lr=0.01, learn_every=64, target_update_every=1000,
                      epsilon_decay_episodes=10_000)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1], check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Sink:
    """Collects result rows and appends them to the CSV."""

    def __init__(self, command: str) -> None:
        self.base = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                     "commit": _commit(), "command": command}
        self.rows: list[dict[str, Any]] = []

    def add(self, **row: Any) -> None:
        self.rows.append({**self.base, **row})

    def write(self) -> None:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        new = not RESULTS.exists()
        with open(RESULTS, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            writer.writerows({k: r.get(k) for k in FIELDS} for r in self.rows)
        print(f"appended {len(self.rows)} rows to {RESULTS}")


def cfr_plus(game: Any, seconds: float, sink: Sink, slice_: str) -> float:
    """OpenSpiel's CFR+ for `seconds` of wall time (doubling iterations); returns its last exploitability."""
    import pyspiel
    from open_spiel.python.algorithms import exploitability

    solver = pyspiel.CFRPlusSolver(game.pyspiel_game)
    start, done, checkpoint, expl = time.perf_counter(), 0, 1, float("nan")
    while time.perf_counter() - start < seconds and done < 100_000:
        while done < checkpoint:
            solver.evaluate_and_update_policy()
            done += 1
        expl = exploitability.exploitability(game.pyspiel_game, solver.average_policy())
        checkpoint *= 2
    wall = time.perf_counter() - start
    sink.add(slice=slice_, game=game.name, method="cfr+", seed="", x=done, x_unit="iterations", value=expl,
             metric="exploitability", wall_s=round(wall, 2), reference="exact CFR+ (OpenSpiel C++)")
    print(f"  cfr+        {done:>7d} iterations  {wall:7.1f}s  exploitability {expl:.5f}")
    return expl


def nfsp_slice(args: argparse.Namespace, sink: Sink) -> None:
    game = pb.load_game("kuhn_poker")
    print(f"NFSP on Kuhn, exact exploitability every {args.episodes_per_step:,} episodes, "
          f"settings {args.nfsp_settings!r}")
    options = OPENSPIEL_KUHN if args.nfsp_settings == "openspiel" else {}
    for seed in args.seeds:
        nfsp = pb.NFSP(game, seed=seed, episodes_per_step=args.episodes_per_step, **options)
        start = time.perf_counter()
        while nfsp.episodes < args.episodes:
            rec = nfsp.step()
            ref = OPENSPIEL_NFSP_KUHN.get(rec.episodes)
            sink.add(slice="nfsp", game=game.name, method=f"pbmarl NFSP ({args.nfsp_settings})", seed=seed,
                     x=rec.episodes, x_unit="episodes", value=rec.exploitability, metric="exploitability",
                     wall_s=round(time.perf_counter() - start, 2),
                     reference="" if ref is None else f"OpenSpiel PyTorch NFSP {ref}")
            print(f"  seed {seed}  {rec.episodes:>7,d} episodes  {time.perf_counter() - start:7.1f}s  "
                  f"exploitability {rec.exploitability:.4f}   OpenSpiel PyTorch NFSP {ref if ref else '-'}", flush=True)
        wall = time.perf_counter() - start
    cfr_plus(game, min(wall, 60.0), sink, "nfsp")
    print("bar: exploitability <= 0.25 at 40k episodes (stretch <= 0.15)")


def p2sro_slice(args: argparse.Namespace, sink: Sink) -> None:
    def _leduc_dqn(game: Any, seed: int) -> Any:  # the rl_psro benchmark's Leduc DQN settings
        return pb.DQN(game, seed=seed, budget=args.budget, lr=1e-3, batch_size=256, hidden=(128, 128))

    game = pb.load_game("leduc_poker")
    print(f"Leduc: P2SRO(active=3) vs sequential PSRO, DQN oracle budget {args.budget:,}, "
          f"{args.minutes} min each, target exploitability {args.target}")
    for seed in args.seeds:
        p2 = f"p2sro(active=3, {args.p2sro_backend})"
        for label, make in (("psro", lambda s: pb.PSRO(game, learner=_leduc_dqn(game, s), seed=s)),
                            (p2, lambda s: pb.P2SRO(game, learner=_leduc_dqn(game, s), seed=s,
                                                                   active=3, refresh_every=args.refresh_every,
                                                                   backend=args.p2sro_backend))):
            run = make(seed)
            start, hit = time.perf_counter(), None
            while time.perf_counter() - start < args.minutes * 60:
                rec = run.step()
                wall = time.perf_counter() - start
                sink.add(slice="p2sro", game=game.name, method=label, seed=seed, x=round(wall, 2), x_unit="wall_s",
                         value=rec.exploitability, metric="exploitability", wall_s=round(wall, 2), reference="")
                print(f"  seed {seed} {label:16s} it {rec.iteration:3d} {wall:7.1f}s {rec.env_steps:>11,d} env steps "
                      f"exploitability {rec.exploitability:.4f}", flush=True)
                if rec.exploitability is not None and rec.exploitability <= args.target:
                    hit = wall
                    break
            print(f"  -> {label}: " + (f"reached {args.target} at {hit:.1f}s" if hit else "not reached"))
    cfr_plus(game, 60.0, sink, "p2sro")


def league_slice(args: argparse.Namespace, sink: Sink) -> None:
    game = pb.load_game("pettingzoo:connect_four_v3")
    budget = args.steps
    dqn = dict(budget=args.match_steps, hidden=(128, 128), steps_per_round=512, num_envs=64, learning_starts=500)
    print(f"Connect Four: League vs self-play vs PSRO at about {budget:,} env steps each")
    for seed in args.seeds:
        start = time.perf_counter()
        league = pb.League(game, learner=pb.DQN(game, seed=seed, **dqn), evaluator=pb.RolloutPool(game, seed=seed),
                           main_exploiters=1, league_exploiters=1, seed=seed, steps_per_match=args.match_steps,
                           match_episodes=100, snapshot_min_steps=2 * args.match_steps,
                           snapshot_max_steps=6 * args.match_steps)
        while league.records[-1].env_steps < budget:
            rec = league.step()
            print(f"  league round {rec.iteration}: {rec.env_steps:,} env steps, league {rec.league_size}", flush=True)
        league_wall = time.perf_counter() - start
        runs = {}
        for label, solver in (("self-play", "last"), ("psro", "nash")):
            start = time.perf_counter()
            run = pb.PSRO(game, solver=solver, learner=pb.DQN(game, seed=seed, **{**dqn, "budget": 4 * args.match_steps}),
                          evaluator=pb.RolloutPool(game, seed=seed), eval_episodes=100, seed=seed)
            while run.records[-1].env_steps < budget:
                run.step()
            runs[label] = (run, time.perf_counter() - start)
        pool = pb.RolloutPool(game, seed=seed)
        main = league.policies[league.matchmaker.of_role("main")[0]]
        for label, (run, wall) in runs.items():
            opp = run.population.mixture(run.meta_strategy)
            rates = []
            for seat, profile in ((0, [main[0], opp[1]]), (1, [opp[0], main[1]])):
                res = pool.evaluate(profile, args.eval_episodes, seed=seed)
                rates.append((res.mean[seat] + 1) / 2)
            rate = sum(rates) / 2
            sink.add(slice="league", game=game.name, method=f"league main vs {label}", seed=seed,
                     x=run.records[-1].env_steps, x_unit="opponent env steps", value=round(rate, 4),
                     metric="win rate (draw = 1/2)", wall_s=round(league_wall + wall, 1),
                     reference=f"league env steps {league.records[-1].env_steps}")
            print(f"  seed {seed}: league main agent vs {label} ({run.records[-1].env_steps:,} env steps, "
                  f"{wall:.0f}s): win rate {rate:.3f} over {args.eval_episodes} games per seat")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["nfsp", "p2sro", "league"], required=True)
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0])
    parser.add_argument("--episodes", type=int, default=40_000, help="nfsp: episodes per seed")
    parser.add_argument("--episodes-per-step", type=int, default=10_000)
    parser.add_argument("--nfsp-settings", choices=["openspiel", "paper"], default="openspiel",
                        help="openspiel: its Kuhn example's settings; paper: NFSPConfig defaults (Leduc, 2016)")
    parser.add_argument("--minutes", type=float, default=10.0, help="p2sro: wall minutes per run")
    parser.add_argument("--budget", type=int, default=60_000, help="p2sro: DQN learner steps per best response")
    parser.add_argument("--refresh-every", type=int, default=8)
    parser.add_argument("--target", type=float, default=0.3)
    parser.add_argument("--p2sro-backend", choices=["local", "ray"], default="local",
                        help="ray: every active level a learner actor (needs free cores)")
    parser.add_argument("--steps", type=int, default=200_000, help="league: env-step budget per method")
    parser.add_argument("--match-steps", type=int, default=5_000)
    parser.add_argument("--eval-episodes", type=int, default=500)
    parser.add_argument("--no-record", action="store_true", help="print only; append nothing to the CSV")
    args = parser.parse_args()
    sink = Sink("python benchmarks/population_learning.py " + " ".join(sys.argv[1:]))
    {"nfsp": nfsp_slice, "p2sro": p2sro_slice, "league": league_slice}[args.only](args, sink)
    if not args.no_record:
        sink.write()


if __name__ == "__main__":
    main()
