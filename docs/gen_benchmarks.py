"""Write one page per benchmark, and the results-at-a-glance page, from ``benchmarks/results/*.csv`` and the
experiment results in ``benchmarks/experiments/`` (multi-seed rows, through ``pb.compare``).

A page says what the script measures and against which peer, lists the machines, commits and dates of
its rows, shows the latest rows and a figure drawn from them, and links the whole CSV. Nothing on a
page is typed by hand except the description in ``SPECS``: the figures and numbers come from the rows.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

MACHINE = ("the project's shared 2-core virtual machine (an AMD EPYC most days, an Intel Xeon on some; "
           "other jobs often ran beside it, so each row keeps its load average where the script records one)")


def _latest(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.sort_values("date").groupby(keys, dropna=False).tail(1)


def _fig_control(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = _latest(df, ["env", "algo", "budget", "seed"])
    rows = rows[rows["budget"] == rows.groupby(["env", "algo"])["budget"].transform("max")]
    cases = rows.groupby(["env", "algo"])["time_ratio"].apply(list)
    for i, ratios in enumerate(cases.to_numpy()):
        ax.scatter([i] * len(ratios), ratios, color="C0")
    ax.set_xticks(range(len(cases)), [f"{e}\n{a}" for e, a in cases.index], rotation=60, ha="right", fontsize=7)
    ax.axhline(0.7, color="C3", ls="--", label="target: 0.7x SB3's time")
    ax.set_ylabel("wall time / SB3's wall time")
    ax.legend()


def _fig_distributed(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = _latest(df, ["env", "algo", "actors"]).dropna(subset=["env_steps_per_s"])
    for (env, algo), g in rows.groupby(["env", "algo"]):
        ax.plot(g["actors"], g["env_steps_per_s"], "o-", label=f"{algo} ({env})")
    ax.set_yscale("log")
    ax.set_xlabel("actors")
    ax.set_ylabel("env steps / s")
    ax.legend(fontsize=7)


def _fig_lockstep(df: pd.DataFrame, ax: plt.Axes) -> None:
    for seed, g in df.groupby("seed"):
        ax.semilogy(g["env_steps"], g["max_weight_diff"], "o", label=f"seed {seed}: |pbmarl - SB3| weights")
    ax.set_xlabel("env steps before the burst")
    ax.set_ylabel("largest weight difference")
    ax.legend(fontsize=7)


def _fig_snapshots(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = _latest(df, ["library", "seed"])
    for library, g in rows.groupby("library"):
        ax.scatter(g["seed"].astype(str), g["mean_snapshot_return"], label=library, alpha=0.7)
    ax.tick_params(axis="x", labelrotation=90, labelsize=6)
    ax.set_ylabel("mean return over the last bursts")
    ax.legend()


def _fig_throughput(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = _latest(df, ["env"]).set_index("env")
    cols = [c for c in ["raw", "user", "user_vector64", "pbmarl_local", "pbmarl_ray2"] if c in rows]
    rows[cols].astype(float).plot.bar(ax=ax, logy=True, rot=0)
    ax.set_ylabel("env steps / s")


def _fig_gpu(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = _latest(df, ["machine", "device", "threads", "workload", "batch"])
    rows = rows[rows["workload"] == "dqn"]
    for (machine, device, threads), g in rows.groupby(["machine", "device", "threads"]):
        g = g.sort_values("batch")
        ax.loglog(g["batch"], g["ms_per_update"], "o-", label=f"{device}, {threads} thr ({machine})")
    ax.set_xlabel("minibatch rows (DQN update)")
    ax.set_ylabel("ms per update")
    ax.legend(fontsize=6)


def _fig_marl(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = df[df["slice"].isin(["mappo", "ippo", "qmix", "random"])].dropna(subset=["mappo_paper"])
    for method, g in rows.groupby("method"):
        ax.scatter(g["env_steps"].clip(lower=1), g["mappo_paper"], s=8, label=method, alpha=0.6)
    ax.set_xscale("log")
    ax.axhline(-135, color="C3", ls="--", label="MAPPO paper's bar, -135")
    ax.set_xlabel("env steps")
    ax.set_ylabel("return (MAPPO paper's convention)")
    ax.legend(fontsize=7)


def _fig_notebooks(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = _latest(df, ["notebook"]).set_index("notebook")["seconds"].sort_values()
    rows.index = [Path(n).stem for n in rows.index]
    rows.plot.barh(ax=ax)
    ax.set_xlabel("seconds at full budget (latest run)")


def _fig_population(df: pd.DataFrame, ax: plt.Axes) -> None:
    rows = df[(df["slice"] == "nfsp") & (df["metric"] == "exploitability")]
    for (method, seed), g in rows.groupby(["method", "seed"]):
        g = g[g["command"] == g["command"].iloc[-1]].sort_values("x")
        ax.plot(g["x"], g["value"], label=f"{method}, seed {seed}", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("episodes")
    ax.set_ylabel("exploitability (NFSP, Kuhn)")
    ax.legend(fontsize=6)


@dataclass(frozen=True)
class Spec:
    title: str
    script: str
    what: str
    peer: str
    show: list[str]
    keys: list[str]
    figure: Callable[[pd.DataFrame, plt.Axes], None] | None = None
    #: a folder of benchmarks/results/ with one report folder per case (a final_table.md and its .png figures),
    #: each shown on the page under its own heading
    reports: str | None = None


SPECS: dict[str, Spec] = {
    "control": Spec("Single-agent control against Stable-Baselines3", "benchmarks/control.py",
                    "Return at the end of a fixed env-step budget and wall time per 1,000 env steps, for SAC, TD3, "
                    "DDPG, PPO, DQN and Rainbow on Gymnasium tasks; both libraries evaluated on Gymnasium's own "
                    "environment from the same start states.", "Stable-Baselines3 (its own virtual environment)",
                    ["env", "algo", "seed", "budget", "pbmarl_return", "sb3_return", "time_ratio"],
                    ["env", "algo", "budget", "seed"], _fig_control),
    "distributed": Spec("IMPALA and Ape-X against RLlib", "benchmarks/distributed.py",
                        "Env steps per second with 1 and 2 actors, and the wall time to a return of 475 on CartPole.",
                        "RLlib 2.60 (IMPALA, DQN beside Ape-X; its own virtual environment)",
                        ["env", "algo", "backend", "actors", "env_steps_per_s", "time_to_475_s", "last_return"],
                        ["env", "algo", "backend", "actors"], _fig_distributed),
    "dqn_lockstep": Spec("DQN in lockstep with Stable-Baselines3", "benchmarks/dqn_lockstep.py",
                         "One burst of updates from SB3's own state (weights, Adam moments, replay, minibatch "
                         "indices): how far pbmarl's weights end from SB3's.", "Stable-Baselines3",
                         ["seed", "env_steps", "updates", "max_weight_diff", "max_weight_move"], ["seed", "env_steps"],
                         _fig_lockstep),
    "dqn_snapshots": Spec("DQN snapshots on CartPole", "benchmarks/dqn_snapshots.py",
                          "Greedy return after every burst of updates over the last 5k env steps, per seed and library.",
                          "Stable-Baselines3", ["library", "seed", "snapshots_at_500", "snapshots",
                                                "mean_snapshot_return", "end_return"], ["library", "seed"],
                          _fig_snapshots),
    "env_throughput": Spec("Environment throughput", "benchmarks/env_throughput.py",
                           "Env steps per second: the raw environment loop, a user's loop with a torch forward per "
                           "step, a Gymnasium vector env, and pbmarl's collect (local, and on Ray with 2 workers).",
                           "Gymnasium's SyncVectorEnv and a plain PettingZoo loop",
                           ["env", "raw", "user", "user_vector64", "pbmarl_local", "pbmarl_ray2", "route"], ["env"],
                           _fig_throughput),
    "exact_scale": Spec("The exact engine at scale", "benchmarks/exact_scale.py",
                        "NashConv of large mixtures, Lemke-Howson on big bimatrix games, n-player meta-games, "
                        "tree sizes, each against a bar.", "OpenSpiel and pygambit where they apply",
                        ["measure", "value", "bar", "reference", "met"], ["measure"]),
    "game_theory": Spec("Exact game theory: LP, XDO, JPSRO", "benchmarks/game_theory.py",
                        "The sequence-form LP on Leduc, XDO's and JPSRO's convergence, each against a bar.",
                        "OpenSpiel's cvxpy LP; the XDO and JPSRO papers' figures",
                        ["measure", "value", "bar", "reference", "met"], ["measure"]),
    "gpu_scaling": Spec("One update on CPU and GPU", "benchmarks/gpu_scaling.py",
                        "Milliseconds per update of the DQN, TD3 and MAPPO networks for growing minibatches, beside "
                        "the same update with torch's own Adam and clip and the floor (forward and backward alone).",
                        "torch's own optimiser", ["machine", "device", "threads", "workload", "batch",
                                                  "ms_per_update", "torch_parts_ms_per_update",
                                                  "floor_ms_per_update"],
                        ["machine", "device", "threads", "workload", "batch"], _fig_gpu),
    "marl": Spec("Cooperative MARL on simple_spread", "benchmarks/marl.py",
                 "Return of MAPPO, IPPO, QMIX and MADDPG (and a uniform-random reference) on MPE's simple_spread; "
                 "per-agent, summed and the MAPPO paper's conventions.", "BenchMARL 1.5's MAPPO; Tianshou 2.0's DQN "
                 "recipe on tic-tac-toe", ["slice", "method", "seed", "env_steps", "mappo_paper", "summed_return",
                                          "env_steps_per_s"], ["slice", "method", "seed"], _fig_marl),
    "experiments": Spec("The experiment runner's overhead", "benchmarks/experiments.py",
                        "Seconds a trial costs when pb.Experiment runs it on Ray Tune, against calling run.run() in a "
                        "plain loop (the one-off start, the first trial's setup, each later trial), and the wall-time "
                        "speed-up of many short trials locally and on a simulated two-node cluster.",
                        "run.run() in a plain loop, in the same command",
                        ["measure", "trials", "trial_seconds", "wall_s", "per_trial_s", "load_avg", "note"],
                        ["measure", "trials"]),
    "mmd": Spec("Tabular magnetic mirror descent against OpenSpiel's", "benchmarks/mmd.py",
                "pb.MMD and OpenSpiel's MMDDilatedEnt with the same alpha and step size: the largest gap between "
                "their sequence-form iterates and exploitabilities, and the seconds per step of each.",
                "OpenSpiel's mmd_dilated.MMDDilatedEnt", ["game", "measure", "pbmarl", "openspiel", "ratio", "note"],
                ["game", "measure"]),
    "nfsp_parity": Spec("NFSP against OpenSpiel's PyTorch NFSP on liar's dice", "benchmarks/nfsp_parity.py",
                        "Exact exploitability of the average policy per episode, with OpenSpiel's example settings "
                        "on both sides (and pbmarl's defaults), 2 seeds each; both measured with pbmarl's exact "
                        "evaluator.", "OpenSpiel's PyTorch NFSP",
                        ["library", "settings", "seed", "episodes", "wall_time", "exploitability"],
                        ["library", "settings", "seed", "episodes"]),
    "notebook_times": Spec("Notebook run times", "benchmarks/notebook_times.py",
                           "Wall time of each tutorial and notebook at full budget, executed as a reader would.",
                           "none (a reference for the durations the notebooks state)",
                           ["notebook", "seconds", "status", "kernel_cpu_seconds"], ["notebook"], _fig_notebooks),
    "population_learning": Spec("Population learning: NFSP, PSRO, P2SRO, XDO, League", "benchmarks/population_learning.py",
                                "Exploitability against episodes or wall time, win rates of a league's main agent, and "
                                "the DQN oracle's gap to the exact best response.",
                                "OpenSpiel's PyTorch NFSP and CFR+", ["slice", "method", "seed", "x", "x_unit",
                                                                      "value", "metric"],
                                ["slice", "method", "seed", "metric"], _fig_population),
    "probes": Spec("Hardening probes", "benchmarks/probes.py",
                   "Counts from re-running the hardening probes: Ctrl-C at random lines of every run type, kill -9 "
                   "at random times and between the files of one save, tampered run folders, the bad-input list, "
                   "the exact engine's memory guard and two-worker PPO.", "none (each probe checks a rule)",
                   ["probe", "trials", "ok", "failed", "details"], ["probe"]),
    "step_speed": Spec("What one env step of the comparison's NFSP and PSRO costs", "benchmarks/step_speed.py",
                       "CPU and wall milliseconds per env step of the self-play comparison's NFSP and PSRO on liar's "
                       "dice, fresh or from a saved run, alternating an older pbmarl tree (the baseline) with the "
                       "checkout in the same command; each row hashes the run's history and state after the steps, so "
                       "a speed-up is seen to change no number. Rows before the PSRO ones ran as nfsp_speed.py.",
                       "the same run under an older pbmarl (the row's side and pbmarl columns)",
                       ["method", "game", "side", "start", "steps", "env_steps", "cpu_ms_per_step", "wall_ms_per_step",
                        "history_hash", "state_hash", "load_avg"], ["method", "game", "start", "side"]),
    "selfplay_throughput": Spec("PPO self-play throughput against the IIG benchmark's code",
                                "benchmarks/selfplay_throughput.py",
                                "Env steps per second of pbmarl's PPOSelfPlay with the tuned liar's dice setting, at "
                                "pbmarl's network width and at the paper's (3x512), beside the paper's own RunPPO and "
                                "a torch-only floor (the paper width's networks and updates with no game), one torch "
                                "thread each. pbmarl's round trains on 2,048 decisions (1,024 of each seat, each seat "
                                "collected in its own games) and plays about 4,200 env steps for them; the paper's "
                                "trains on all 2,048 it plays, "
                                "so at equal width pbmarl does half the gradient work per env step (see the script).",
                                "nathanlct/IIG-RL-Benchmark's RunPPO, in its own virtual environment",
                                ["game", "impl", "net", "env_steps", "wall_s", "env_steps_per_s", "threads", "load_avg"],
                                ["game", "impl", "net"]),
    "selfplay": Spec("Self-play baselines on liar's dice, Kuhn and Leduc poker", "benchmarks/selfplay.py",
                     "Exact exploitability against env steps for PPO self-play and deep MMD (last iterate), NFSP "
                     "(average policy) and PSRO (meta-strategy), with the paper's tuned liar's dice settings, and "
                     "tabular MMD and CFR+ as exact reference lines (Rudolph et al., ICLR 2026, made this comparison "
                     "at 10M env steps). Liar's dice runs 10M env steps; Kuhn, Leduc and liar's dice with 2 dice of 4 "
                     "sides (the largest game the exact engine holds here), which the paper does not play, 1M. Each "
                     "game's figures and final table (IQM with bootstrap intervals, every seed, the runs left out) "
                     "follow, from benchmarks/results/selfplay/<game>/.",
                     "none in the same run (tabular MMD and CFR+ are exact references)",
                     ["game", "method", "seed", "iteration", "env_steps", "wall_time", "exploitability"],
                     ["game", "method", "seed", "iteration"], reports="selfplay"),
}


def _table(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "" if pd.isna(v) else f"{v:.4g}"
        return str(v).replace("|", "\\|")
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(cell(v) for v in row) + " |\n" for row in df.itertuples(index=False))


def page(name: str, df: pd.DataFrame, out: Path, results: Path | None = None) -> str:
    spec = SPECS.get(name) or Spec(name.replace("_", " ").capitalize(), f"benchmarks/{name}.py", "", "", [], [])
    lines = [f"# {spec.title}", "", spec.what, "",
             f"- **Script:** `{spec.script}` (rows appended to `benchmarks/results/{name}.csv`)",
             f"- **Peer, run in the same command:** {spec.peer or 'none'}",
             f"- **Machine:** {MACHINE}" + (f"; rows name their machine: {', '.join(map(str, df['machine'].unique()))}"
                                              if "machine" in df else ""),
             f"- **Rows:** {len(df)}, from {str(df['date'].min())[:10]} to {str(df['date'].max())[:10]}, over "
             f"{df['commit'].nunique()} commits (latest `{df.sort_values('date')['commit'].iloc[-1]}`)",
             f"- **All rows:** {{download}}`{name}.csv <{name}.csv>`", ""]
    if spec.figure is not None:
        fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
        spec.figure(df, ax)
        fig.savefig(out / f"{name}.png", dpi=110)
        plt.close(fig)
        lines += [f"![{spec.title}]({name}.png)", ""]
    if spec.reports is not None and results is not None:
        lines += _reports(results / spec.reports, out / name)
    show = [c for c in (spec.show or list(df.columns)) if c in df]
    latest = _latest(df, [k for k in spec.keys if k in df]) if spec.keys else df
    latest = latest.sort_values("date").tail(40)
    lines += ["## Latest row of each case", "",
              "The most recent row for each case (at most 40), with the commit it ran at and the command that "
              "made it.", "", _table(latest[["date", "commit", *show]].assign(date=latest["date"].str[:10])), "",
              "Commands:", ""]
    lines += [f"- `{c}`" for c in latest["command"].drop_duplicates().tail(12)] + [""]
    return "\n".join(lines)


def _reports(folder: Path, out: Path) -> list[str]:
    """Each report folder under `folder` as a section: its final_table.md (headings one level down) and figures,
    the figures copied beside the page into `out`."""
    lines: list[str] = []
    for case in sorted(p for p in folder.iterdir() if (p / "final_table.md").is_file()) if folder.is_dir() else []:
        table = (case / "final_table.md").read_text().splitlines()
        title = table[0].lstrip("# ").strip() if table and table[0].startswith("# ") else case.name
        lines += [f"## {title}", ""]
        (out / case.name).mkdir(parents=True, exist_ok=True)
        for png in sorted(case.glob("*.png")):
            shutil.copy(png, out / case.name / png.name)
            lines += [f"![{png.stem.replace('_', ' ')}]({out.name}/{case.name}/{png.name})", ""]
        lines += [("###" + line[1:]) if line.startswith("# ") else line for line in table[1:]] + [""]
    return lines


#: the results at a glance: each row picks the latest matching rows of one CSV (filters are regexes on columns)
GLANCE = [
    ("sequence-form LP, Leduc", "game_theory", {"measure": r"^LP time on Leduc"}, "value", "< 0.5 s"),
    ("XDO (CFR+), Leduc", "game_theory", {"measure": r"^XDO: first iteration"}, "value", "exploitability < 2e-3 by iteration 20"),
    ("JPSRO (MGCCE), 3-player Kuhn", "game_theory", {"measure": r"^JPSRO: summed CCE gap at iteration 10"}, "value",
     "CCE gap <= 0.06 at iteration 10"),
    ("NFSP, Kuhn, 40k episodes", "population_learning",
     {"slice": "^nfsp$", "metric": "^exploitability$", "method": r"^pbmarl NFSP \(openspiel\)$", "x": r"^40000(?:\.0)?$"},
     "value", "exploitability <= 0.25"),
    ("IMPALA, CartPole, 1 / 2 actors (env steps/s)", "distributed", {"env": "^CartPole", "algo": "^pbmarl IMPALA"},
     "env_steps_per_s", ">= 2x RLlib's env steps/s"),
]


#: rows read from experiment results (``benchmarks/experiments/<name>/``, written by benchmarks/to_experiments.py)
#: through pb.compare: (label, experiment, game, methods, the peer's method or None, bar, the CSV page it came from)
EXPERIMENT_GLANCE = [
    ("SAC, Pendulum, 20k steps", "control-vs-sb3", "Pendulum-v1", ["SAC (pbmarl)"], "SAC (SB3)",
     "return >= -200, time <= 0.7x SB3", "control"),
    ("TD3, Pendulum, 20k steps", "control-vs-sb3", "Pendulum-v1", ["TD3 (pbmarl)"], "TD3 (SB3)",
     "return >= -200, time <= 0.7x SB3", "control"),
    ("DDPG, Pendulum, 20k steps", "control-vs-sb3", "Pendulum-v1", ["DDPG (pbmarl)"], "DDPG (SB3)",
     "return >= -200, time <= 0.7x SB3", "control"),
    ("SAC, MountainCarContinuous, 50k steps", "control-vs-sb3", "MountainCarContinuous-v0", ["SAC (pbmarl)"],
     "SAC (SB3)", ">= 90, time <= 0.7x SB3", "control"),
    ("PPO, CartPole, 100k steps", "control-vs-sb3", "CartPole-v1", ["PPO (pbmarl)"], "PPO (SB3)",
     "500, time <= 0.7x SB3", "control"),
    ("DQN, CartPole, 50k steps", "control-vs-sb3", "CartPole-v1", ["DQN (pbmarl)"], "DQN (SB3)",
     "500, time <= 0.7x SB3", "control"),
    ("Rainbow, CartPole, 50k steps", "control-vs-sb3", "CartPole-v1", ["Rainbow (pbmarl)"], "Rainbow (SB3 DQN)", "500",
     "control"),
    ("MAPPO, simple_spread, 25M env steps, most likely action", "spread-mappo", "simple_spread",
     ["pbmarl mappo (activation=tanh, epochs=10, value_clip=True, clip_apart=True, lr_decay_steps=25000000) "
      "[most likely action]"], None, "3-seed mean >= -135 (MAPPO paper's convention)", "marl"),
    ("MAPPO, simple_spread, 201,600 env steps, training return per agent", "spread-mappo-vs-benchmarl",
     "simple_spread", ["pbmarl mappo"], "BenchMARL 1.5 MAPPO", "at least BenchMARL's return, in less time", "marl"),
    ("PSRO (PRD, DQN oracle), Leduc, 10 min", "leduc-rl-oracles", "leduc_poker",
     ["psro (prd:iterations=500) parallel oracle (dqn, batch_size=1024, lr=0.003, steps_per_round=4096, "
      "buffer_size=200000, hidden=(64, 64))"], None, "exploitability <= 0.1", "population_learning"),
    ("XDO / P2SRO (DQN oracles), Leduc", "leduc-rl-oracles", "leduc_poker",
     ["xdo (dqn oracle, parallel)", "p2sro(active=3, ray, 0.66 CPU per level)"], None,
     "exploitability <= 0.1 (XDO); P2SRO: 7 min", "population_learning"),
    ("PPO self-play / deep MMD (IIG tuned), liar's dice, 10M env steps", "selfplay-baselines", "liars_dice",
     ["PPO self-play", "deep MMD"], None, "exploitability, lower is better (no bar: the paper shows its liar's dice only in a figure)",
     "selfplay"),
    ("PSRO Nash / PSRO PRD / XDO, Leduc, 10 iterations (run by pb.Experiment)", "leduc-psro-xdo", "leduc_poker",
     ["PSRO-nash", "PSRO-prd", "XDO"], None, "exploitability, lower is better (no bar: shows the runner's path)", ""),
]
#: bootstrap resamples for the README's intervals (rliable's paper uses 50,000; 1,000 keeps a docs build quick)
REPS = 1_000


def _iqm(results: pd.DataFrame, metric: str) -> tuple[str, int, pd.Series]:
    """IQM [95% CI] of one method's runs (their final values) through pb.compare, its run count, its row."""
    from pbmarl.experiments.stats import compare

    row = compare(results, metric, reps=REPS).table.iloc[0]
    runs = int(row["runs"])
    if runs == 1:
        return f"{row['iqm']:.3g}", runs, row
    return f"IQM {_num(row['iqm'])} [{_num(row['iqm_low'])}, {_num(row['iqm_high'])}]", runs, row


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


def experiment_glance(experiments: Path) -> list[str]:
    """The table rows of `EXPERIMENT_GLANCE`, from the results folders under `experiments`."""
    from pbmarl.experiments.saved import SavedResults

    lines, loaded = [], {}
    for label, name, game, methods, peer, bar, page in EXPERIMENT_GLANCE:
        if name not in loaded:
            loaded[name] = SavedResults.load(experiments / name) if (experiments / name / "results.csv").is_file() \
                else None
        saved = loaded[name]
        link = f"[{label}]({page}.md)" if page else label
        if saved is None:
            lines.append(f"| {link} | {bar} | no rows |  |  |  |")
            continue
        r, metric = saved.results, saved.metric or "return"
        r = r[r["game"] == game]
        cells, commits = [], []
        for method in methods:
            mine = r[r["method"] == method]
            if mine.empty:
                cells.append(f"{method}: no rows")
                continue
            text, runs, row = _iqm(mine, metric)
            if "mean" in bar and runs > 1:
                text += f", mean {_num(row['mean'])}"
            cells.append((f"{method}: " if len(methods) > 1 else "") + f"{text} ({runs} runs)")
            commits += list(mine["commit"].astype(str)) if "commit" in mine else []
        peer_text, ratio = "", ""
        if peer is not None and not r[r["method"] == peer].empty:
            theirs = r[r["method"] == peer]
            peer_text = f"{peer.split(' (')[-1].rstrip(')') if '(' in peer else peer} {_iqm(theirs, metric)[0]}"
            if "wall_time" in r and r["wall_time"].notna().any():
                walls = r[r["method"].isin([methods[0], peer])].pivot_table(index="seed", columns="method",
                                                                             values="wall_time", aggfunc="last")
                per_seed = (walls[methods[0]] / walls[peer]).dropna()
                if len(per_seed):
                    ratio = (f"{per_seed.median():.2f}" if len(per_seed) == 1 else
                             f"median {per_seed.median():.2f} ({per_seed.min():.2f}-{per_seed.max():.2f})")
        shown = list(dict.fromkeys(commits))
        commit = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
        if not commit and "source" in saved.meta:
            commit = str(saved.meta["source"].get("commit", ""))
        lines.append(f"| {link} | {bar} | {'; '.join(cells)} | {peer_text} | {ratio} | {commit} |")
    return lines


def glance(frames: dict[str, pd.DataFrame], experiments: Path | None = None) -> str:
    lines = ["# Results at a glance", "",
             "Generated at each docs build. Single measurements come from the latest rows of "
             "`benchmarks/results/*.csv`: for each bar, the value of the most recent row per seed (or per case) that "
             "matches, the commit it ran at, and the peer's figure where the same command measured one. Multi-seed "
             "rows come from the experiment results in `benchmarks/experiments/` (converted from those rows by "
             "`benchmarks/to_experiments.py`, or run through `pb.Experiment`) through `pb.compare`: the interquartile "
             "mean of the runs' final values with its 95% stratified-bootstrap interval (rliable, "
             f"{REPS:,} resamples), the peer's from the same commands, and the per-seed ratio of wall times. Each "
             "benchmark's page has the figures and commands; each experiment folder has its `report/`.", "",
             "| what | bar | measured (latest rows) | peer, same run | time vs peer | commit |",
             "|---|---|---|---|---|---|"]
    for label, name, filters, column, bar in GLANCE:
        df = frames[name]
        keep = pd.Series(True, index=df.index)
        for col, pattern in filters.items():
            keep &= df[col].astype(str).str.contains(pattern, regex=True, na=False)
        rows = df[keep].sort_values("date")
        if "seed" in rows and name != "population_learning":
            rows = rows.groupby([c for c in ["seed", "algo"] if c in rows]).tail(1)
        elif "actors" in rows:  # the latest command that ran the peer beside pbmarl: a ratio needs both
            with_peer = set(df.loc[df["algo"].astype(str).str.startswith("RLlib"), "command"])
            rows = rows[rows["command"].isin(with_peer)]
            rows = rows[rows["command"] == rows["command"].iloc[-1]].sort_values("actors") if len(rows) else rows
        elif name == "population_learning":
            rows = rows.groupby("seed").tail(1)
        else:
            rows = rows.tail(1)
        rows = rows.tail(3)
        def fmt(v: object) -> str:
            if isinstance(v, float):
                return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.1f}".rstrip("0").rstrip(".") if abs(v) >= 10 else f"{v:.3g}"
            return str(v)
        measured = " / ".join(fmt(v) for v in rows[column]) if len(rows) else "no rows"
        if name == "marl" and len(rows):
            measured += f" (mean {rows[column].mean():.1f})"
        if label.startswith("XDO") and len(rows):
            measured = f"iteration {measured}"
        peer = ""
        if name == "control" and len(rows):
            peer = ("SB3 DQN " if "rainbow" in str(rows["algo"].iloc[-1]) else "SB3 ") + " / ".join(
                fmt(v) for v in rows["sb3_return"])
        if name in ("game_theory", "population_learning") and len(rows):
            peer = str(rows["reference"].iloc[-1])
        if name == "distributed" and len(rows):
            same = df[(df["command"] == rows["command"].iloc[-1]) & df["algo"].str.startswith("RLlib")
                      & df["algo"].str.contains("IMPALA")].sort_values("actors")
            peer = "RLlib IMPALA " + " / ".join(fmt(v) for v in same["env_steps_per_s"])
        ratio = " / ".join(f"{v:.2f}" for v in rows["time_ratio"]) if name == "control" and len(rows) else ""
        commit = ", ".join(dict.fromkeys(rows["commit"].astype(str))) if len(rows) else ""
        lines.append(f"| [{label}]({name}.md) | {bar} | {measured} | {peer} | {ratio} | {commit} |")
    if experiments is not None:
        lines += experiment_glance(experiments)
    return "\n".join(lines) + "\n"


def write(out: Path, results: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    frames = {p.stem: pd.read_csv(p) for p in sorted(results.glob("*.csv"))}
    names = []
    for name, df in frames.items():
        shutil.copy(results / f"{name}.csv", out / f"{name}.csv")
        (out / f"{name}.md").write_text(page(name, df, out, results))
        names.append(name)
    (out / "glance.md").write_text(glance(frames, results.parent / "experiments"))
    (out / "index.md").write_text(
        "# Benchmarks\n\nEach benchmark script prints pbmarl's numbers beside a peer's, measured in the same run, and "
        "appends its rows to `benchmarks/results/`. These pages are generated from those rows at every docs build.\n\n"
        "```{toctree}\n:maxdepth: 1\n\nglance\n" + "\n".join(names) + "\n```\n")


def readme_table(results: Path) -> str:
    """The results at a glance, short, for the README: what, bar, measured, peer (no commits; the page has them)."""
    frames = {p.stem: pd.read_csv(p) for p in sorted(results.glob("*.csv"))}
    rows = [line.split(" | ") for line in glance(frames, results.parent / "experiments").splitlines()
            if line.startswith("| ") and "---" not in line]
    out = ["| what | bar | measured | peer, same run | time vs peer |", "|---|---|---|---|---|"]
    for cells in rows[1:]:
        what, bar, measured, peer, ratio = (c.strip("| ").strip() for c in cells[:5])
        what = re.sub(r"\[(.*)\]\(.*\)", r"\1", what)
        out.append(f"| {what} | {bar} | {measured} | {peer} | {ratio} |")
    out += ["", "Rows with IQM come from the experiment results in `benchmarks/experiments/` through `pb.compare`: the "
            f"interquartile mean of the runs' final values and its 95% stratified-bootstrap interval ({REPS:,} "
            "resamples), the peer's from the same commands, and the median (range) of the per-seed ratios of wall "
            "times; each folder's `report/` has the curves."]
    return "\n".join(out) + "\n"


START, END = "<!-- results-at-a-glance: generated by python docs/gen_benchmarks.py --readme -->", "<!-- end -->"


def update_readme(readme: Path, results: Path) -> bool:
    """Rewrite the README's generated table in place; return whether it changed."""
    text = readme.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{readme_table(results)}{END}{tail}"
    readme.write_text(new)
    return new != text


if __name__ == "__main__":
    import sys

    root = Path(__file__).resolve().parents[1]
    if sys.argv[1:] == ["--readme"]:
        print("README.md " + ("updated" if update_readme(root / "README.md", root / "benchmarks" / "results")
                              else "already current"))
    else:
        write(root / "docs" / "benchmarks", root / "benchmarks" / "results")
