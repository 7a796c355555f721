"""Population learning beyond PSRO: NFSP on Kuhn, P2SRO against sequential PSRO on Leduc, and a
League on Connect Four, each beside a reference measured in the same run.

Slices (run one at a time on a shared machine, ``--only``):

- ``nfsp``: NFSP's exact exploitability on Kuhn at 10k, 20k, 30k, 40k episodes, beside OpenSpiel's
  PyTorch NFSP numbers on the same settings (0.407, 0.275, 0.232, 0.220; the bar is <= 0.25 at 40k)
  and OpenSpiel's CFR+ run here for the same wall time.
- ``psro`` / ``p2sro`` / ``xdo``: sequential PSRO, P2SRO(active=3), or XDO (restricted games solved
  exactly by CFR+), with the same DQN oracle on Leduc for ``--minutes``: wall time to exploitability
  1, 0.5, 0.3, 0.2, 0.1, beside exact-oracle PSRO (the iterations each level needs with perfect best
  responses) and CFR+, in the same process. ``--parallel-oracle`` (psro, xdo) trains the two players' best
  responses side by side, one DQN per player in its own Ray actor (`pb.algorithms.ParallelOracle`).
- ``nfsp-peer``: OpenSpiel's PyTorch NFSP example on Kuhn, run in its own venv
  (``OPENSPIEL_NFSP_VENV``), exploitability at 10k..40k episodes.
- ``oracle``: the DQN oracle's best-response gap on Leduc (exact BR value minus the exact value of
  the learned policy) along one best response, for the settings in ``ORACLE_SETTINGS``.
- ``exact``: exact-oracle PSRO on Leduc with the meta-solvers of ``--solvers`` (nash, prd, rm, uniform): the
  iterations each needs to reach 1, 0.5, 0.3, 0.2, 0.1 with perfect best responses.
- ``league``: a League (DQN agents) on ``pettingzoo:connect_four_v3`` and, with the same env-step
  budget, a self-play run and a PSRO run; then the league's main agent plays both.

Every run appends rows (date, commit, command, seed, numbers) to
``benchmarks/results/population_learning.csv``.

    python benchmarks/population_learning.py --only nfsp --seeds 0
    python benchmarks/population_learning.py --only psro --minutes 10
    python benchmarks/population_learning.py --only psro --minutes 10 --parallel-oracle --solver prd
    python benchmarks/population_learning.py --only psro --solver prd:iterations=500 --parallel-oracle --minutes 10 \\
        --target 0.1 --seeds 0,1,2 --budget 160000 --dqn batch_size=1024 --dqn lr=3e-3 --dqn steps_per_round=4096 \\
        --dqn buffer_size=200000 --dqn "hidden=(64,64)"
    python benchmarks/population_learning.py --only p2sro --minutes 10
    python benchmarks/population_learning.py --only xdo --minutes 10
    python benchmarks/population_learning.py --only oracle --settings u64,d8-b1024-lr3e-3 --seeds 0,1,2 \\
        --target-iterations 5,10,20,30,45
    python benchmarks/population_learning.py --only league --steps 200000
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import datetime
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

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


def cfr_plus(game: Any, seconds: float, sink: Sink, slice_: str) -> list[tuple[float, float]]:
    """OpenSpiel's CFR+ for `seconds` of wall time (doubling iterations); returns its (wall, exploitability) curve."""
    import pyspiel
    from open_spiel.python.algorithms import exploitability

    solver = pyspiel.CFRPlusSolver(game.pyspiel_game)
    start, done, checkpoint, curve = time.perf_counter(), 0, 1, []
    while time.perf_counter() - start < seconds and done < 100_000:
        while done < checkpoint:
            solver.evaluate_and_update_policy()
            done += 1
        expl = exploitability.exploitability(game.pyspiel_game, solver.average_policy())
        curve.append((time.perf_counter() - start, float(expl)))
        checkpoint *= 2
    wall, expl = curve[-1]
    sink.add(slice=slice_, game=game.name, method="cfr+", seed="", x=done, x_unit="iterations", value=expl,
             metric="exploitability", wall_s=round(wall, 2), reference="exact CFR+ (OpenSpiel C++)")
    print(f"  cfr+        {done:>7d} iterations  {wall:7.1f}s  exploitability {expl:.5f}")
    return curve


def nfsp_slice(args: argparse.Namespace, sink: Sink) -> None:
    game = pb.load_game("kuhn_poker")
    print(f"NFSP on Kuhn, exact exploitability every {args.episodes_per_step:,} episodes, "
          f"settings {args.nfsp_settings!r}")
    options = OPENSPIEL_KUHN if args.nfsp_settings == "openspiel" else {}
    curves: dict[str, list[tuple[float, float]]] = {}
    for seed in args.seeds:
        nfsp = pb.NFSP(game, seed=seed, episodes_per_step=args.episodes_per_step, **options)
        start = time.perf_counter()
        curve = curves.setdefault(f"NFSP seed {seed}", [])
        while nfsp.episodes < args.episodes:
            rec = nfsp.step()
            curve.append((time.perf_counter() - start, rec.exploitability))
            ref = OPENSPIEL_NFSP_KUHN.get(rec.episodes)
            sink.add(slice="nfsp", game=game.name, method=f"pbmarl NFSP ({args.nfsp_settings})", seed=seed,
                     x=rec.episodes, x_unit="episodes", value=rec.exploitability, metric="exploitability",
                     wall_s=round(time.perf_counter() - start, 2),
                     reference="" if ref is None else f"OpenSpiel PyTorch NFSP {ref}")
            print(f"  seed {seed}  {rec.episodes:>7,d} episodes  {time.perf_counter() - start:7.1f}s  "
                  f"exploitability {rec.exploitability:.4f}   OpenSpiel PyTorch NFSP {ref if ref else '-'}", flush=True)
        wall = time.perf_counter() - start
    curves["cfr+ (OpenSpiel)"] = cfr_plus(game, min(wall, 60.0), sink, "nfsp")
    print("bar: exploitability <= 0.25 at 40k episodes (stretch <= 0.15)")
    _plot(curves, game.name, "nfsp", bar=0.25)


#: the peer's own venv (open_spiel==2.0.2, torch==2.13.0, dm-tree), never a pbmarl dependency
OPENSPIEL_NFSP_VENV = Path("/work/venvs/openspiel-nfsp")


def nfsp_peer_slice(args: argparse.Namespace, sink: Sink) -> None:
    """OpenSpiel's PyTorch NFSP example on Kuhn in its own venv, at 10k..40k episodes, for the side-by-side row."""
    import json
    import os

    python = OPENSPIEL_NFSP_VENV / "bin" / "python"
    script = Path(__file__).resolve().parent / "peers" / "openspiel_nfsp_kuhn.py"
    if not python.exists():
        print(f"OpenSpiel NFSP peer not run: no venv at {OPENSPIEL_NFSP_VENV} "
              f"(python -m venv {OPENSPIEL_NFSP_VENV} && {OPENSPIEL_NFSP_VENV}/bin/pip install "
              "open_spiel==2.0.2 torch==2.13.0 dm-tree)")
        return
    print(f"OpenSpiel PyTorch NFSP on Kuhn ({args.episodes:,} episodes per seed); load average {os.getloadavg()}")
    for seed in args.seeds:
        proc = subprocess.Popen([str(python), str(script), "--episodes", str(args.episodes), "--seed", str(seed),
                                 "--eval-every", str(args.episodes_per_step)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            row = json.loads(line)
            pbmarl_ref = OPENSPIEL_NFSP_KUHN.get(row["episodes"])
            sink.add(slice="nfsp", game="kuhn_poker", method="OpenSpiel PyTorch NFSP (measured)", seed=seed,
                     x=row["episodes"], x_unit="episodes", value=row["exploitability"], metric="exploitability",
                     wall_s=row["wall_s"], reference=f"probe {pbmarl_ref}; load {os.getloadavg()[0]:.2f}")
            print(f"  seed {seed} {row['episodes']:>7,d} episodes {row['wall_s']:7.1f}s exploitability "
                  f"{row['exploitability']:.4f}   (probe: {pbmarl_ref})", flush=True)
        if proc.wait() != 0:
            print(f"  the peer exited with status {proc.returncode}")
    print(f"load average {os.getloadavg()}")


#: the Leduc DQN oracle of the psro / p2sro slices, chosen with the ``oracle`` slice: the oracle is
#: bound by gradient steps (collection on the compiled tree is cheap), and 64 updates per round
#: at 20k learner steps matched the old 32 updates at 60k (BR gap about 0.2) for 2/3 of the updates
LEDUC_DQN: dict[str, Any] = dict(lr=1e-3, batch_size=256, hidden=(128, 128), updates_per_round=64)
#: exploitability levels whose first wall time each Leduc run reports
LEDUC_LEVELS = (1.0, 0.5, 0.3, 0.2, 0.1)


def exact_solvers_slice(args: argparse.Namespace, sink: Sink) -> None:
    """``--only exact``: exact-oracle PSRO on Leduc with each meta-solver of ``--solvers``: the first iteration
    at which it reaches each level. With perfect best responses these are the fewest iterations that meta-solver
    needs, so at a neural oracle's seconds per iteration they bound how soon a neural run can get there."""
    game = pb.load_game("leduc_poker")
    for solver in args.solvers:
        run = pb.PSRO(game, solver=meta_solver(solver), stop_exploitability=None)
        start, first, best = time.perf_counter(), {}, float("inf")
        while len(first) < len(LEDUC_LEVELS) and run.iteration < args.max_iterations:
            rec = run.step()
            best = min(best, rec.exploitability)
            for level in LEDUC_LEVELS:
                if level not in first and rec.exploitability <= level:
                    first[level] = rec.iteration
        wall = time.perf_counter() - start
        for level, it in first.items():
            sink.add(slice="exact", game=game.name, method=f"psro (exact oracle, {solver})", seed="", x=it,
                     x_unit="iterations", value=level, metric="first iteration with exploitability <= value",
                     wall_s=round(wall, 2), reference="exact (pure) best responses")
        print(f"  {solver:8s}: " + ", ".join(f"<= {lv} at iteration {it}" for lv, it in first.items())
              + f"; best {best:.4f} in {run.iteration} iterations ({wall:.1f}s)", flush=True)


def exact_psro_reference(game: Any, sink: Sink, target: float, solver: str = "nash") -> dict[float, int]:
    """Exact-oracle PSRO with `solver` on the same game: the iteration at which each level is first reached.

    Not a floor: exact best responses are pure (ties go to the lowest action), and on Leduc the
    DQN oracle's softer answers made more progress per iteration (0.37 at iteration 35, where
    exact-oracle PSRO was near 0.7); it shows how many iterations PSRO with that meta-solver needs."""
    run = pb.PSRO(game, solver=meta_solver(solver), stop_exploitability=None)
    start, first = time.perf_counter(), {}
    levels = sorted({*LEDUC_LEVELS, target}, reverse=True)
    while len(first) < len(levels) and run.iteration < 400:
        rec = run.step()
        for level in levels:
            if level not in first and rec.exploitability <= level:
                first[level] = rec.iteration
    wall = time.perf_counter() - start
    for level, it in first.items():
        sink.add(slice="leduc", game=game.name, method="psro (exact oracle" + (f", {solver})" if solver != "nash" else ")"),
                 seed="", x=it, x_unit="iterations",
                 value=level, metric="first iteration with exploitability <= value", wall_s=round(wall, 2),
                 reference="exact (pure) best responses")
    print(f"  exact-oracle PSRO ({solver}) first reaches " + ", ".join(f"{lv} at iteration {it}" for lv, it in first.items())
          + f" ({wall:.1f}s)")
    return first


def leduc_slice(args: argparse.Namespace, sink: Sink) -> None:
    """``--only psro`` / ``p2sro`` / ``xdo``: one neural run on Leduc for ``--minutes``, beside exact-oracle PSRO
    (iterations to each level) and CFR+, measured in the same process; a plot in benchmarks/out/."""
    import os

    game = pb.load_game("leduc_poker")
    options = {**LEDUC_DQN, "budget": args.budget, **args.dqn}
    cpus = f", {args.level_cpus:.2g} CPU per level" if args.p2sro_backend == "ray" and args.level_cpus != 1 else ""
    changed = "".join(f", {k}={v}" for k, v in args.dqn.items())
    psro_label = ("psro" if args.solver == "nash" else f"psro ({args.solver})") + (
        " parallel oracle" if args.parallel_oracle else "") + (f" (dqn{changed})" if changed else "")
    xdo_label = "xdo (dqn oracle" + (", parallel" if args.parallel_oracle else "") + changed + ")"
    label = {"psro": psro_label, "xdo": xdo_label}.get(
        args.only, f"p2sro(active={args.active}, {args.p2sro_backend}{cpus})")
    print(f"Leduc: {label}, DQN oracle {options}, {args.minutes} min, target exploitability {args.target}; "
          f"load average {os.getloadavg()}")
    reference_solver = args.solver if args.only == "psro" else "nash"  # p2sro and xdo levels solve for Nash
    first = exact_psro_reference(game, sink, args.target, reference_solver)
    curves: dict[str, list[tuple[float, float]]] = {}
    for seed in args.seeds:
        setup = time.perf_counter()  # Ray's start and the oracle actors fall before the run's clock: timed apart
        learner = pb.DQN(game, seed=seed, **options)
        # a parallel oracle: one DQN per player, seeded seed + player, each in its own Ray actor
        oracle = pb.algorithms.ParallelOracle(learner, backend="ray") if args.parallel_oracle else learner
        run: pb.PSRO | pb.XDO
        if args.only == "psro":
            run = pb.PSRO(game, learner=oracle, seed=seed, solver=meta_solver(args.solver))
        elif args.only == "xdo":
            run = pb.XDO(game, learner=oracle)  # its iteration 0 (answers to uniform) is made here, before the clock
        else:
            run = pb.P2SRO(game, learner=learner, seed=seed, active=args.active, refresh_every=args.refresh_every,
                           backend=args.p2sro_backend, level_cpus=args.level_cpus)
        start, hit, curve = time.perf_counter(), {}, []
        setup = start - setup
        sink.add(slice=args.only, game=game.name, method=label, seed=seed, x=0, x_unit="wall_s", value=round(setup, 2),
                 metric="setup seconds before the clock (Ray start, oracle actors, learners built)", wall_s=round(setup, 2),
                 reference="not counted in the wall times of this run's exploitability rows")
        while time.perf_counter() - start < args.minutes * 60:
            rec = run.step()
            wall = time.perf_counter() - start
            curve.append((wall, rec.exploitability))
            extra = f"; restricted actions {run.records[-1].restricted_actions}" if isinstance(run, pb.XDO) else ""
            sink.add(slice=args.only, game=game.name, method=label, seed=seed, x=round(wall, 2), x_unit="wall_s",
                     value=rec.exploitability, metric="exploitability", wall_s=round(wall, 2),
                     reference=f"iteration {rec.iteration}; load {os.getloadavg()[0]:.2f}{extra}")
            print(f"  seed {seed} {label:16s} it {rec.iteration:3d} {wall:7.1f}s {rec.env_steps:>11,d} env steps "
                  f"exploitability {rec.exploitability:.4f}", flush=True)
            for level in sorted({*LEDUC_LEVELS, args.target}, reverse=True):
                if level not in hit and rec.exploitability <= level:
                    hit[level] = wall
            if rec.exploitability <= min(args.target, 0.1):
                break
        if isinstance(run, pb.P2SRO):
            run.close()
        elif isinstance(oracle, pb.algorithms.ParallelOracle):
            oracle.close()
        if isinstance(run, pb.XDO):
            xdo_control(game, run, seed, sink)
        curves[f"{label} seed {seed}"] = curve
        per_it = curve[-1][0] / max(run.iteration, 1)
        print(f"  -> {label} seed {seed}: {run.iteration} iterations, {per_it:.1f}s each; best exploitability "
              f"{min(e for _, e in curve):.4f}; " + ", ".join(f"<= {lv} at {t:.0f}s" for lv, t in hit.items())
              + f" (after {setup:.1f}s of set-up before the clock)")
        if args.target in first:
            print(f"     exact-oracle PSRO ({reference_solver}) needs {first[args.target]} iterations for {args.target} "
                  f"({first[args.target] * per_it / 60:.1f} min at {per_it:.1f}s per iteration)")
    curves["cfr+ (OpenSpiel)"] = cfr_plus(game, 30.0, sink, args.only)
    print(f"load average {os.getloadavg()}")
    _plot(curves, game.name, args.only)


class RandomPureOracle:
    """A control for XDO: a uniformly random pure policy (one legal action per information state) as
    the "best response", with no learning at all."""

    name = "random-pure"

    def __init__(self, game: Any, seed: int) -> None:
        self.game, self.tree, self.rng = game, game.tree(), np.random.default_rng(seed)

    def respond(self, player: int, opponents: Any) -> Any:
        from pbmarl.protocols import BestResponse

        info, policy = self.tree.infosets[player], pb.TabularPolicy(self.game)
        for key, legal in zip(info.keys, info.legal):
            row = np.zeros(self.game.num_actions)
            row[self.rng.choice(np.flatnonzero(legal))] = 1.0
            policy.table[policy.index[key]] = row
        return BestResponse(policy, 0.0, 0)


def xdo_control(game: Any, run: Any, seed: int, sink: Sink) -> None:
    """XDO with `RandomPureOracle` for as many iterations as `run` took: how much of XDO's progress on
    this game comes from the restricted game filling up with actions rather than from the oracle."""
    tree = run.tree
    total = sum(int(i.legal.sum()) for i in tree.infosets)
    control = pb.XDO(game, learner=RandomPureOracle(game, seed))
    print(f"  control: XDO with a random pure oracle (no learning); the full game has {total} "
          "(information state, action) pairs")
    control.run(run.iteration, progress=False)  # iteration 0 comes with the run
    for rec, ours in zip(control.records, run.records):
        sink.add(slice="xdo", game=game.name, method="xdo (random pure oracle, control)", seed=seed, x=rec.iteration,
                 x_unit="iterations", value=rec.exploitability, metric="exploitability", wall_s=round(rec.wall_time, 2),
                 reference=f"restricted actions {rec.restricted_actions} of {total}; dqn oracle at this iteration "
                           f"{ours.exploitability:.4f} with {ours.restricted_actions}")
        print(f"    it {rec.iteration:3d}: random pure oracle {rec.exploitability:.4f} ({rec.restricted_actions} "
              f"actions) | dqn oracle {ours.exploitability:.4f} ({ours.restricted_actions} actions)")


def _plot(curves: dict[str, list[tuple[float, float]]], game: str, name: str, *, bar: float = 0.3) -> None:
    """Exploitability against wall seconds, the exact CFR+ curve dashed, the bar as a grey line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, curve in curves.items():
        ax.plot([max(w, 1e-2) for w, _ in curve], [max(e, 1e-5) for _, e in curve], marker=".", label=label,
                linestyle="--" if label.startswith("cfr+") else "-")
    ax.set(xscale="log", yscale="log", xlabel="wall seconds", ylabel="exploitability", title=f"{game}: {name}")
    ax.axhline(bar, color="grey", linewidth=0.5)
    ax.legend()
    out = Path(__file__).resolve().parent / "out" / f"population_learning_{name}.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    print(f"plot: {out}")


#: DQN settings compared by the ``oracle`` slice on Leduc (label -> DQN options)
ORACLE_SETTINGS: dict[str, dict[str, Any]] = {
    "bench (lr 1e-3, batch 256)": dict(lr=1e-3, batch_size=256, hidden=(128, 128)),
    "defaults (batch 128)": dict(hidden=(128, 128)),
    "lr 3e-4, batch 256": dict(lr=3e-4, batch_size=256, hidden=(128, 128)),
    "huber": dict(lr=1e-3, batch_size=256, hidden=(128, 128), loss="huber"),
    "updates 64/round": dict(lr=1e-3, batch_size=256, hidden=(128, 128), updates_per_round=64),
    "u16 (16 updates/round)": dict(lr=1e-3, batch_size=256, hidden=(128, 128), updates_per_round=16),
    "u8 (8 updates/round)": dict(lr=1e-3, batch_size=256, hidden=(128, 128), updates_per_round=8),
    "u8-lr3e-3 (8 updates/round, lr 3e-3)": dict(lr=3e-3, batch_size=256, hidden=(128, 128), updates_per_round=8),
    "u64 (64 updates/round)": dict(lr=1e-3, batch_size=256, hidden=(128, 128), updates_per_round=64),
    "u32-lr3e-3 (lr 3e-3)": dict(lr=3e-3, batch_size=256, hidden=(128, 128)),
    "d8-b1024-lr3e-3 (8x the data: 160k learner steps, 4096 a round; batch 1024, 64 updates/round, lr 3e-3)": dict(
        lr=3e-3, batch_size=1024, hidden=(128, 128), updates_per_round=64, budget=160_000, steps_per_round=4096,
        buffer_size=200_000),
    "b1024-u32 (batch 1024, 32 updates/round)": dict(lr=1e-3, batch_size=1024, hidden=(128, 128), updates_per_round=32),
}


def oracle_slice(args: argparse.Namespace, sink: Sink) -> None:
    """How good is the DQN oracle on Leduc? Gap between the exact best-response value and the exact
    value of the policy DQN has learned, against PSRO's real targets (the exact-PSRO meta-Nash after
    ``--target-iterations``), for every seed of ``--seeds`` and both players, along each best response's
    learner steps; cold, and with ``--warm`` also warm (from the previous BR). A setting's mean final gap
    over its best responses is printed last: one best response's gap swings by 0.1 and more between
    seeds and targets, so settings are compared on that mean."""
    game = pb.load_game("leduc_poker")
    ev = pb.ExactEvaluator(game)
    exact = pb.PSRO(game, evaluator=ev, stop_exploitability=None)
    targets = {}
    for it in range(1, max(args.target_iterations) + 2):
        exact.step()
        if it in args.target_iterations or it - 1 in args.target_iterations:
            targets[it] = exact.population.mixture(exact.meta_strategy)
    changed = "".join(f", {k}={v}" for k, v in args.dqn.items())
    settings = {k + (f" with {changed[2:]}" if changed else ""): {**v, **args.dqn}
                for k, v in ORACLE_SETTINGS.items() if not args.settings or k.split()[0] in args.settings}
    print(f"Leduc DQN oracle: gap = exact BR value - exact value of the learned policy, "
          f"budget {args.budget:,} unless a setting names its own, check every {args.check_every:,} learner steps")
    finals: dict[str, list[tuple[float, float]]] = {}
    for label, options in settings.items():
        options = {"budget": args.budget, **options}
        for seed in args.seeds:
            for it in args.target_iterations:
                for player in (0, 1):
                    learner = pb.DQN(game, seed=seed, **options)
                    for phase, target_it, warm in (("cold", it, False), ("warm", it + 1, True)):
                        if phase == "warm" and not args.warm:
                            continue
                        best, checks = _oracle_gaps(ev, learner, player, targets[target_it], warm, args.check_every)
                        for steps, gap, wall in checks:
                            sink.add(slice="oracle", game=game.name,
                                     method=f"dqn {label} {phase} @it{target_it} player {player}", seed=seed, x=steps,
                                     x_unit="learner steps", value=round(gap, 4),
                                     metric="BR gap (exact BR value - learned)", wall_s=round(wall, 2),
                                     reference=f"exact BR value {best:.4f}")
                        _, gap, wall = checks[-1]
                        finals.setdefault(f"{label} {phase}", []).append((gap, wall))
                        print(f"  {label:28s} seed {seed} {phase} @it{target_it:<3d} player {player}: gap {gap:.4f} "
                              f"in {wall:.1f}s", flush=True)
    for key, rows in finals.items():
        gaps = [g for g, _ in rows]
        print(f"{key:44s} mean final gap {np.mean(gaps):.4f} (median {np.median(gaps):.4f}, {len(gaps)} best "
              f"responses), {np.mean([w for _, w in rows]):.2f}s each")


def _oracle_gaps(ev: Any, learner: Any, player: int, opponents: Any, warm: bool,
                 check_every: int) -> tuple[float, list[tuple[int, float, float]]]:
    """Train one best response of `learner` for `player`: ``(exact BR value, [(learner steps, gap, oracle
    seconds)])``, a gap every `check_every` learner steps and at the end."""
    best, _ = ev.best_response(player, opponents)
    learner.start(player, opponents, warm_start=warm)
    start, next_check, clock, checks = time.perf_counter(), 0, 0.0, []
    while True:
        done = learner.done
        steps = learner.task.learner_steps if learner.task else 0
        if steps >= next_check or done:
            clock += time.perf_counter() - start  # the exact evaluation is not the oracle's time
            prof = list(opponents)
            prof[player] = learner.policy()
            checks.append((steps, float(best - ev.evaluate(prof)[player]), clock))
            next_check += check_every
            start = time.perf_counter()
        if done:
            learner.finish()
            return best, checks
        learner.step()


class RandomOpening(pb.policies.Policy):
    """`policy`, except that the first `plies` moves of a Connect Four game (pieces on the board, read from the
    observation's two 6x7 planes) are uniformly random: deterministic policies then meet in many games, not one.

    Without it the league's greedy DQN main agent and self-play's single greedy policy play the same game in
    every episode, so a seat's win rate can only read 0, 1/2 or 1.
    """

    def __init__(self, game: Any, policy: Any, plies: int) -> None:
        super().__init__(game)
        self.policy, self.plies = policy, plies

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Any) -> np.ndarray:
        probs = np.asarray(self.policy.action_probabilities(obs, legal_mask, keys), dtype=float)
        opening = np.asarray(obs).reshape(len(obs), -1).sum(axis=1) < self.plies
        probs[opening] = legal_mask[opening] / legal_mask[opening].sum(axis=1, keepdims=True)
        return probs


def _opened(game: Any, strategy: Any, plies: int) -> Any:
    """`strategy` (a policy or a mixture) with every member behind `RandomOpening`; as is for ``plies=0``."""
    if plies == 0:
        return strategy
    if isinstance(strategy, pb.Mixture):
        return pb.Mixture([RandomOpening(game, m, plies) for m in strategy.policies], strategy.weights)
    return RandomOpening(game, strategy, plies)


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
                opened = [_opened(game, member, args.opening_plies) for member in profile]
                res = pool.evaluate(opened, args.eval_episodes, seed=seed)
                rates.append((res.mean[seat] + 1) / 2)
            rate = sum(rates) / 2
            sink.add(slice="league", game=game.name, method=f"league main vs {label}", seed=seed,
                     x=run.records[-1].env_steps, x_unit="opponent env steps", value=round(rate, 4),
                     metric="win rate (draw = 1/2)", wall_s=round(league_wall + wall, 1),
                     reference=f"league env steps {league.records[-1].env_steps}; "
                               f"{args.opening_plies} random opening plies")
            print(f"  seed {seed}: league main agent vs {label} ({run.records[-1].env_steps:,} env steps, "
                  f"{wall:.0f}s): win rate {rate:.3f} over {args.eval_episodes} games per seat, "
                  f"each opened by {args.opening_plies} random plies")


def meta_solver(spec: str) -> Any:
    """``NAME`` or ``NAME:KEY=VALUE,...`` (``prd:iterations=500``): the meta-solver name, or a `pb.MetaSolver` with
    those options (Python literals), checked as `pb.MetaSolver` checks them."""
    name, _, opts = spec.partition(":")
    if not opts:
        return name
    options: dict[str, Any] = {}
    for item in opts.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"meta-solver option {item!r} of {spec!r} is not KEY=VALUE")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"meta-solver option {item!r} of {spec!r} is not KEY=VALUE with a Python literal value") from None
    return pb.MetaSolver(name, **options)


def _solver_spec(text: str) -> str:
    """``--solver`` / ``--solvers`` entries: kept as written (the rows' label), checked by building them."""
    try:
        solver = meta_solver(text)
        if isinstance(solver, str):
            pb.MetaSolver(solver)
    except (ValueError, TypeError, KeyError) as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None
    return text


def _dqn_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--dqn``: a DQNConfig field and a Python literal (``warm_start=True``, ``lr=3e-4``)."""
    key, sep, value = text.partition("=")
    fields = {f.name for f in dataclasses.fields(pb.learners.DQNConfig)}
    if not sep or key not in fields:
        raise argparse.ArgumentTypeError(f"--dqn takes KEY=VALUE with KEY a DQNConfig field ({', '.join(sorted(fields))}), "
                                         f"got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise argparse.ArgumentTypeError(f"--dqn {key}= takes a Python literal (True, 0.2, (64, 64)), got {value!r}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["nfsp", "nfsp-peer", "psro", "p2sro", "xdo", "league", "oracle", "exact"],
                        required=True)
    parser.add_argument("--solvers", type=_solver_spec, nargs="+", default=["nash", "prd", "rm", "uniform"],
                        help="exact: the meta-solvers to run exact-oracle PSRO with, each NAME or "
                             "NAME:KEY=VALUE,... (prd:iterations=500)")
    parser.add_argument("--max-iterations", type=int, default=200, help="exact: iterations per solver at most")
    parser.add_argument("--solver", type=_solver_spec, default="nash",
                        help="psro: the meta-solver (nash, prd, rm, ...), with options as NAME:KEY=VALUE,... "
                             "(prd:iterations=500)")
    parser.add_argument("--parallel-oracle", action="store_true",
                        help="psro, xdo: the players' best responses trained side by side (pb.algorithms.ParallelOracle on Ray)")
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0])
    parser.add_argument("--episodes", type=int, default=40_000, help="nfsp: episodes per seed")
    parser.add_argument("--episodes-per-step", type=int, default=10_000)
    parser.add_argument("--nfsp-settings", choices=["openspiel", "paper"], default="openspiel",
                        help="openspiel: its Kuhn example's settings; paper: NFSPConfig defaults (Leduc, 2016)")
    parser.add_argument("--minutes", type=float, default=10.0, help="psro, p2sro, xdo: wall minutes per run")
    parser.add_argument("--budget", type=int, default=20_000, help="psro, p2sro, xdo, oracle: DQN learner steps per BR")
    parser.add_argument("--dqn", type=_dqn_option, action="append", default=[], metavar="KEY=VALUE",
                        help="psro, p2sro, xdo: a DQNConfig field of the oracle changed from LEDUC_DQN "
                             "(e.g. warm_start=True, epsilon_start=0.2); oracle: changed in every setting; repeatable")
    parser.add_argument("--active", type=int, default=3, help="p2sro: active levels")
    parser.add_argument("--refresh-every", type=int, default=8)
    parser.add_argument("--target", type=float, default=0.3)
    parser.add_argument("--p2sro-backend", choices=["local", "ray"], default="local",
                        help="ray: every active level a learner actor (needs free cores)")
    parser.add_argument("--level-cpus", type=float, default=1.0,
                        help="p2sro with --p2sro-backend ray: CPUs each level actor asks for (2/3: three levels on two cores)")
    parser.add_argument("--steps", type=int, default=200_000, help="league: env-step budget per method")
    parser.add_argument("--match-steps", type=int, default=5_000)
    parser.add_argument("--eval-episodes", type=int, default=500)
    parser.add_argument("--opening-plies", type=int, default=2,
                        help="league: random moves that open every evaluation game (0: none; greedy agents then play "
                             "one game per seat)")
    parser.add_argument("--target-iterations", type=lambda s: [int(x) for x in s.split(",")], default=[10],
                        help="oracle: exact-PSRO iterations whose meta-Nash the DQN answers")
    parser.add_argument("--check-every", type=int, default=10_000, help="oracle: learner steps between gaps")
    parser.add_argument("--settings", type=lambda s: s.split(","), default=[],
                        help="oracle: first words of ORACLE_SETTINGS labels to run (default all)")
    parser.add_argument("--warm", action="store_true", help="oracle: also a warm-started BR to the next target")
    parser.add_argument("--no-record", action="store_true", help="print only; append nothing to the CSV")
    args = parser.parse_args()
    args.dqn = dict(args.dqn)
    if args.parallel_oracle and args.only not in ("psro", "xdo"):
        parser.error(f"--parallel-oracle applies to --only psro and xdo, not {args.only!r}")
    if args.dqn and args.only not in ("psro", "p2sro", "xdo", "oracle"):
        parser.error(f"--dqn applies to --only psro, p2sro, xdo and oracle, not {args.only!r}")
    if args.solver != "nash" and args.only != "psro":
        parser.error(f"--solver applies to --only psro, not {args.only!r}")
    sink = Sink("python benchmarks/population_learning.py " + " ".join(sys.argv[1:]))
    {"nfsp": nfsp_slice, "nfsp-peer": nfsp_peer_slice, "psro": leduc_slice, "p2sro": leduc_slice, "xdo": leduc_slice,
     "league": league_slice, "oracle": oracle_slice, "exact": exact_solvers_slice}[args.only](args, sink)
    if not args.no_record:
        sink.write()


if __name__ == "__main__":
    main()
