"""The project's multi-seed benchmark rows as experiment results, in ``benchmarks/experiments/<name>/``.

    python benchmarks/to_experiments.py                    # convert every table below, and write their reports
    python benchmarks/to_experiments.py --only control-vs-sb3
    python benchmarks/to_experiments.py --run leduc-psro-xdo   # the one slice run end to end through pb.Experiment

Each folder holds ``results.csv`` (the long format of `pb.Experiment.results`: one row per trial and
iteration), ``results.json`` (the metric, what the rows are, and where they came from: file, commits,
dates, commands) and ``report/`` (``pbmarl report``: the IQM table with 95% stratified-bootstrap
intervals, curves, interval estimates, performance profiles, probability of improvement). The README's
results table reads these folders through `pb.compare` (``docs/gen_benchmarks.py``).

No benchmark is rerun: the rows are the ones ``benchmarks/results/*.csv`` hold, converted where that is
faithful: each trial is one seed of one method from one command; a peer's trial comes from the same
command as pbmarl's (each peer ran in its own environment); where one method and seed was run several
times, the latest command's rows are kept (as the results page does).

- ``leduc-rl-oracles`` (population_learning.csv, slices psro, xdo, p2sro): exploitability of Leduc poker
  against wall seconds for PSRO, XDO and P2SRO with DQN oracles, each method with 3 or more seeds.
- ``control-vs-sb3`` (control.csv): return at the end of the budget with several seeds, pbmarl and
  Stable-Baselines3 measured in the same command; wall time from the seconds per 1,000 env steps.
- ``spread-mappo`` (marl.csv): MAPPO, IPPO, QMIX and MADDPG on simple_spread, evaluation return in the
  MAPPO paper's convention against env steps, methods with 3 or more seeds.
- ``spread-mappo-vs-benchmarl`` (marl.csv, slice peer): pbmarl's MAPPO and BenchMARL 1.5's MAPPO at
  201,600 env steps in the same command, training return per agent of the last batch (what BenchMARL
  reports; the rows' reference column), wall seconds and env steps per second.
- ``selfplay-baselines`` (selfplay.csv): exact exploitability against env steps of PPO self-play, deep MMD, NFSP
  and PSRO on liar's dice (10M env steps), Kuhn, Leduc and liar's dice with 2 dice of 4 sides (1M), complete
  runs only (a run made in slices counts once), methods with 3 or more complete seeds.
- ``leduc-psro-xdo`` (run, not converted): PSRO with a Nash and a PRD meta-solver (payoff tables sampled,
  so seeds differ) and XDO on Leduc, exact best responses and exact exploitability, 3 seeds, 10
  iterations, on Ray Tune.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pbmarl.experiments.saved import save_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "benchmarks" / "experiments"
MIN_SEEDS = 3
ALGOS = {"sac": "SAC", "td3": "TD3", "ddpg": "DDPG", "ppo": "PPO", "dqn": "DQN", "rainbow": "Rainbow"}


def _source(rows: pd.DataFrame, file: str) -> dict[str, Any]:
    dates = rows["date"].astype(str)
    return {"file": f"benchmarks/results/{file}", "rows": len(rows), "dates": [dates.min(), dates.max()],
            "commits": sorted(rows["commit"].astype(str).unique()), "commands": sorted(rows["command"].unique())}


def _latest_command(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per `keys` (method and seed), the rows of the latest command (and commit) that measured them."""
    run = rows["command"].astype(str) + " @ " + rows["commit"].astype(str)
    last = rows.assign(_run=run).sort_values("date").groupby(keys)["_run"].last().rename("_last").reset_index()
    merged = rows.assign(_run=run).merge(last, on=keys)
    return merged[merged["_run"] == merged["_last"]].drop(columns=["_run", "_last"])


def leduc_rl_oracles() -> tuple[pd.DataFrame, dict[str, Any]]:
    df = pd.read_csv(RESULTS / "population_learning.csv")
    rows = df[df["slice"].isin(["psro", "xdo", "p2sro"]) & (df["metric"] == "exploitability")
              & (df["x_unit"] == "wall_s") & df["seed"].notna()].copy()
    rows["seed"] = rows["seed"].astype(int)
    rows = _latest_command(rows, ["slice", "method", "seed"])
    seeds = rows.groupby(["slice", "method"])["seed"].nunique()
    keep = seeds[seeds >= MIN_SEEDS].index
    rows = rows.set_index(["slice", "method"]).loc[keep].reset_index()
    rows["method"] = [m if m.startswith(s) else f"{s} ({m})" for s, m in zip(rows["slice"], rows["method"])]
    rows = rows.sort_values(["method", "seed", "x"])
    out = pd.DataFrame({"trial": [f"{m} s{s}" for m, s in zip(rows["method"], rows["seed"])], "game": rows["game"],
                        "method": rows["method"], "seed": rows["seed"], "wall_time": rows["x"],
                        "exploitability": rows["value"], "commit": rows["commit"]})
    out["iteration"] = out.groupby("trial").cumcount() + 1
    meta = {"metric": "exploitability",
            "description": "Exploitability of Leduc poker (exact, of the meta-strategy's mixture) against wall "
                           "seconds, PSRO, XDO and P2SRO with DQN best-response oracles; each run until its "
                           "minutes or its target (see each command). Compared at each run's end: the runs' budgets "
                           "differ by method, so compare methods at a common wall_time for a like-for-like figure.",
            "source": _source(rows, "population_learning.csv")}
    return out, meta


def control_vs_sb3() -> tuple[pd.DataFrame, dict[str, Any]]:
    df = pd.read_csv(RESULTS / "control.csv")
    budgets = df.groupby(["env", "algo"])["budget"].max().rename("top").reset_index()
    rows = df.merge(budgets, on=["env", "algo"])
    rows = rows[rows["budget"] == rows["top"]].sort_values("date").groupby(["env", "algo", "seed"]).tail(1)
    trials = []
    for r in rows.itertuples(index=False):
        name = ALGOS.get(r.algo, r.algo)
        for library, ret, per_1000 in (("pbmarl", r.pbmarl_return, r.pbmarl_seconds_per_1000),
                                       ("SB3", r.sb3_return, r.sb3_seconds_per_1000)):
            if library == "SB3" and r.algo == "rainbow":
                library = "SB3 DQN"  # SB3 has no Rainbow: the command ran its DQN beside it
            method = f"{name} ({library})"
            trials.append({"trial": f"{r.env} {method} s{r.seed}", "game": r.env, "method": method, "seed": r.seed,
                           "iteration": 1, "env_steps": r.budget, "wall_time": per_1000 * r.budget / 1000.0,
                           "return": ret, "commit": r.commit})
    meta = {"metric": "return",
            "description": "Return at the end of the env-step budget (the largest budget measured for each task and "
                           "algorithm), pbmarl and Stable-Baselines3 in the same command, both evaluated on "
                           "Gymnasium's own environment from the same start states; wall_time is seconds per 1,000 "
                           "env steps times the budget. SB3 has no Rainbow: its DQN ran beside pbmarl's Rainbow.",
            "source": _source(rows, "control.csv")}
    return pd.DataFrame(trials), meta


def spread_mappo() -> tuple[pd.DataFrame, dict[str, Any]]:
    df = pd.read_csv(RESULTS / "marl.csv")
    rows = df[df["slice"].isin(["mappo", "ippo", "qmix", "maddpg"]) & df["mappo_paper"].notna()
              & (df["env_steps"] > 0)].copy()
    # one curve per method and seed: the latest row at each env-step count (a long run logs a row per checkpoint)
    rows = rows.sort_values("date").groupby(["method", "seed", "env_steps"]).tail(1)
    seeds = rows.groupby("method")["seed"].nunique()
    rows = rows[rows["method"].isin(seeds[seeds >= MIN_SEEDS].index)].sort_values(["method", "seed", "env_steps"])
    out = pd.DataFrame({"trial": [f"{m} s{s}" for m, s in zip(rows["method"], rows["seed"])],
                        "game": "simple_spread", "method": rows["method"], "seed": rows["seed"],
                        "env_steps": rows["env_steps"], "return": rows["mappo_paper"],
                        "summed_return": rows["summed_return"], "commit": rows["commit"]})
    out["iteration"] = out.groupby("trial").cumcount() + 1
    meta = {"metric": "return",
            "description": "MPE simple_spread (N=3, local_ratio 0.5, 25 cycles): evaluation return in the MAPPO "
                           "paper's convention (2 x summed - 75; the paper's bar is -135) against env steps; methods "
                           "with at least 3 seeds. '[most likely action]': every actor plays its most likely action.",
            "source": _source(rows, "marl.csv")}
    return out, meta


_TRAINING = re.compile(r"training return per agent(?: \(last batch\))? (-?\d+(?:\.\d+)?)")


def spread_mappo_vs_benchmarl() -> tuple[pd.DataFrame, dict[str, Any]]:
    df = pd.read_csv(RESULTS / "marl.csv")
    peer_commands = set(df.loc[df["slice"] == "peer", "command"])
    rows = df[df["command"].isin(peer_commands) & df["slice"].isin(["peer", "mappo"])].copy()
    rows["training"] = rows["reference"].astype(str).str.extract(_TRAINING, expand=False).astype(float)
    rows = rows.dropna(subset=["training"])
    top = rows.groupby("method")["env_steps"].transform("max")
    rows = rows[(rows["env_steps"] == top)].sort_values("date").groupby(["method", "seed"]).tail(1)
    rows = rows[rows["env_steps"] == rows["env_steps"].min()]  # both libraries at the same budget
    out = pd.DataFrame({"trial": [f"{m} s{s}" for m, s in zip(rows["method"], rows["seed"])],
                        "game": "simple_spread", "method": rows["method"], "seed": rows["seed"], "iteration": 1,
                        "env_steps": rows["env_steps"], "wall_time": rows["wall_s"], "return": rows["training"],
                        "env_steps_per_s": rows["env_steps_per_s"], "commit": rows["commit"]})
    meta = {"metric": "return",
            "description": f"MPE simple_spread, pbmarl's MAPPO and BenchMARL 1.5's MAPPO (its own virtual environment) "
                           f"in the same command at {int(rows['env_steps'].min()):,} env steps: training return per "
                           "agent of the last batch (what BenchMARL reports), wall seconds and env steps per second.",
            "source": _source(rows, "marl.csv")}
    return out, meta


def sibling(name: str) -> Any:
    """The benchmark script `name` of this folder as a module, this folder on the path only while it imports."""
    if name in sys.modules:
        return sys.modules[name]
    here = str(Path(__file__).resolve().parent)
    sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(here)


def selfplay_baselines() -> tuple[pd.DataFrame, dict[str, Any]]:
    """The self-play comparison's complete runs (`selfplay_report.latest_complete`: a run made in slices counts
    once, with every slice), each game at its own budget, methods with `MIN_SEEDS` or more complete seeds."""
    sp = sibling("selfplay_report")
    rows = sp.load_runs(RESULTS / "selfplay.csv")
    kept = []
    for game, (steps, _, _) in sp.BUDGETS.items():
        runs, _ = sp.latest_complete(rows, game, steps)
        seeds = runs.groupby("method")["seed"].nunique()
        kept.append(runs[runs["method"].isin(seeds[seeds >= MIN_SEEDS].index)])
    runs = pd.concat(kept).sort_values(["game", "method", "seed", "env_steps"])
    out = pd.DataFrame({"trial": [f"{g} {m} s{s}" for g, m, s in zip(runs["game"], runs["method"], runs["seed"])],
                        "game": runs["game"], "method": runs["method"].map(sp.LABELS), "seed": runs["seed"],
                        "env_steps": runs["env_steps"], "wall_time": runs["wall_time"],
                        "exploitability": runs["exploitability"], "commit": runs["commit"]})
    out["iteration"] = out.groupby("trial").cumcount() + 1
    budgets = ", ".join(f"{g} {b[0]:,}" for g, b in sp.BUDGETS.items())
    meta = {"metric": "exploitability",
            "description": "Exact exploitability against env steps (all seats' decisions) of PPO self-play and deep MMD "
                           "(last iterate), NFSP (average policy) and PSRO-Nash with a DQN oracle (meta-strategy), "
                           "each with the IIG benchmark's (Rudolph et al., ICLR 2026) tuned liar's dice setting; "
                           f"complete runs only, at each game's env-step budget ({budgets}), methods with "
                           f"{MIN_SEEDS} or more complete seeds; wall_time is the run's training alone. The tables "
                           "with every seed, the paper's numbers and the exact reference lines are "
                           "benchmarks/results/selfplay/<game>/final_table.md.",
            "source": _source(runs, "selfplay.csv")}
    return out, meta


def leduc_psro_xdo(*, seeds: int = 3, iterations: int = 10,
                   episodes: int = 200) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run PSRO (Nash, PRD) and XDO on Leduc through `pb.Experiment` on the local Ray, in a temporary folder."""
    import pbmarl as pb

    root = Path(tempfile.mkdtemp(prefix="pbmarl-leduc-psro-xdo-"))
    sampled = {"evaluator": "rollout", "eval_episodes": episodes}
    exp = pb.Experiment("leduc-psro-xdo", "leduc_poker",
                        [pb.spec(pb.PSRO, name="PSRO-nash", solver="nash", **sampled),
                         pb.spec(pb.PSRO, name="PSRO-prd", solver="prd", **sampled), pb.spec(pb.XDO)],
                        seeds=range(seeds), stop=pb.Stop(iterations=iterations), root=root)
    pb.init_ray(num_cpus=2, quiet=True)
    exp.run(progress=False)
    bad = exp.status[exp.status["state"] != "finished"]
    if not bad.empty:
        raise RuntimeError(f"trials did not finish:\n{bad}")
    meta = {"metric": "exploitability", "grid": exp.grid.to_dict(),
            "description": f"Run end to end through pb.Experiment on Ray Tune (2 CPUs, a trial per CPU): PSRO with "
                           f"a Nash and a PRD meta-solver (payoff tables sampled from {episodes} episodes a profile, "
                           f"so seeds differ) and XDO (exact throughout, so its seeds agree) on Leduc poker, exact "
                           f"best responses and exact exploitability, {seeds} seeds, {iterations} iterations each.",
            "source": {"command": "python benchmarks/to_experiments.py --run leduc-psro-xdo", "commit": _commit()}}
    return exp.results, meta


def _commit() -> str:
    from _rows import git_commit

    return git_commit()


CONVERT: dict[str, Callable[[], tuple[pd.DataFrame, dict[str, Any]]]] = {
    "leduc-rl-oracles": leduc_rl_oracles, "control-vs-sb3": control_vs_sb3, "spread-mappo": spread_mappo,
    "spread-mappo-vs-benchmarl": spread_mappo_vs_benchmarl, "selfplay-baselines": selfplay_baselines}
RUN = {"leduc-psro-xdo": leduc_psro_xdo}


def write(name: str, results: pd.DataFrame, meta: dict[str, Any], *, report: bool = True) -> Path:
    from pbmarl.experiments.report import write_report

    if name in CONVERT:  # short trial keys: game and method numbers and the seed (the method names are long)
        games = {g: i for i, g in enumerate(dict.fromkeys(results["game"]))}
        methods = {m: i for i, m in enumerate(dict.fromkeys(results["method"]))}
        results = results.assign(trial=[f"{games[g]:02d}-{methods[m]:02d}-s{s}"
                                        for g, m, s in zip(results["game"], results["method"], results["seed"])])
    folder = save_results(results, OUT / name, name=name, metric=meta["metric"], description=meta["description"],
                          source={k: v for k, v in meta.items() if k not in ("metric", "description")})
    if report:
        write_report(folder, formats=("png",), dpi=80)  # small enough to commit
    runs = results.groupby(["game", "method"])["trial"].nunique()
    print(f"{folder}: {len(results)} rows, {results['trial'].nunique()} trials, {len(runs)} game x method cells "
          f"({runs.min()}-{runs.max()} runs each)")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(CONVERT), default=None, help="convert these tables")
    parser.add_argument("--run", nargs="+", choices=sorted(RUN), default=[], help="run these slices end to end")
    parser.add_argument("--no-report", action="store_true", help="write results.csv/json only")
    args = parser.parse_args(argv)
    names = args.only if args.only is not None else ([] if args.run else sorted(CONVERT))
    for name in names:
        write(name, *CONVERT[name](), report=not args.no_report)
    for name in args.run:
        write(name, *RUN[name](), report=not args.no_report)
    print(json.dumps({"written": names + args.run}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
