"""The self-play comparison's figures and final-exploitability tables, from ``benchmarks/results/selfplay.csv``.

Reads the rows `benchmarks/selfplay.py` appends and writes, per game (``--game``; default: every game in the CSV),
into ``benchmarks/results/selfplay/<game>/`` (as a folder name: `selfplay.slug`):

- ``exploitability_env_steps.png`` and ``exploitability_wall_time.png``: exact exploitability of each neural
  method against env steps and against its training wall time, the mean over seeds with a 95% bootstrap band
  (`pbmarl.experiments.plots.curves`), tabular MMD and CFR+ as horizontal reference lines (their final value;
  they take no env steps);
- ``final_table.md``: per method the IQM and mean of the final exploitability with 95% stratified-bootstrap
  intervals (`pb.compare`, rliable), every seed's value, and the paper's reported number beside it with its
  source (``benchmarks/selfplay_paper.csv``; liar's dice only: the paper plays no other game here).

Each (method, seed) counts once: its latest run whose last measurement reached ``--complete-at`` env steps
(default: the game's budget in `selfplay.BUDGETS`, 10M on liar's dice), with every slice it went through (an invocation of selfplay.py is the rows
sharing date, commit and command; one that resumed a saved run continues the latest earlier invocation that
ended just before its first measurement). Runs that stopped short, and runs superseded by a later one, are
left out and listed. Tabular methods use their latest run.

    python benchmarks/selfplay_report.py                          # every game's table and figures
    python benchmarks/selfplay_report.py --game liars_dice        # one game's
    python benchmarks/selfplay_report.py --complete-at 250000 --out /tmp/preview   # a preview from short slices
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from selfplay import BUDGETS, slug  # the benchmark's own budgets per game (this folder is on the path when run)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "selfplay.csv"
PAPER = HERE / "selfplay_paper.csv"
OUT = HERE / "results" / "selfplay"
NEURAL = ("ppo", "deep_mmd", "nfsp", "psro")
TABULAR = ("mmd", "cfr+")
#: pbmarl's method name -> the paper's
PAPER_NAMES = {"ppo": "PPO", "deep_mmd": "MMD", "nfsp": "NFSP", "psro": "PSRO"}
LABELS = {"ppo": "PPO self-play", "deep_mmd": "deep MMD", "nfsp": "NFSP (average policy)",
          "psro": "PSRO-Nash, DQN oracle (meta-strategy)", "mmd": "tabular MMD (last iterate)",
          "cfr+": "CFR+ (average)"}


def load_runs(path: Path) -> pd.DataFrame:
    """Every row, with a ``run`` key (one invocation: date, commit, command) and a ``trial`` key (run, game, method
    and seed)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run benchmarks/selfplay.py first")
    rows = pd.read_csv(path)
    missing = {"date", "commit", "command", "game", "method", "seed", "iteration", "env_steps", "wall_time",
               "exploitability"} - set(rows.columns)
    if missing:
        raise ValueError(f"{path} lacks the columns {sorted(missing)}; it is not a selfplay.py results file")
    rows["run"] = rows["date"] + " " + rows["commit"] + " " + rows["command"]
    # one invocation may run several games and methods: the trial is (invocation, game, method, seed)
    rows["trial"] = rows["run"] + " " + rows["game"] + " " + rows["method"] + " seed " + rows["seed"].astype(str)
    return rows


def latest_complete(rows: pd.DataFrame, game: str, complete_at: int) -> tuple[pd.DataFrame, list[str]]:
    """The latest run reaching `complete_at` env steps per (neural method, seed); and the runs left out, in words."""
    kept, left = [], []
    neural = rows[(rows["game"] == game) & rows["method"].isin(NEURAL)]
    for (method, seed), frame in neural.groupby(["method", "seed"], sort=True):
        trials = sorted(frame.groupby("trial"), key=lambda t: (t[1]["date"].iloc[0], t[0]))
        done = [(k, t) for k, t in trials if t["env_steps"].max() >= complete_at]
        used = _slices(trials, done[-1][0]) if done else []
        for key, trial in trials:
            if key not in used:
                why = "superseded by a later complete run" if trial["env_steps"].max() >= complete_at else \
                    f"reached {int(trial['env_steps'].max()):,} of {complete_at:,} env steps"
                left.append(f"{method} seed {seed} ({trial['date'].iloc[0]}, {trial['commit'].iloc[0]}): {why}")
        if done:
            run = pd.concat([t for k, t in trials if k in used])
            kept.append(run.assign(trial=used[-1]))  # one run: its slices share the last one's key
    return (pd.concat(kept) if kept else neural.iloc[:0]), left


def _slices(trials: list[tuple[Any, pd.DataFrame]], last: Any) -> list[Any]:
    """The invocations one run went through, oldest first, ending with `last`: a slice whose first measurement is
    past the run's first measurement point resumed the latest earlier invocation that ended within two
    measurements before it (`benchmarks/selfplay.py` resumes exactly from its saved state)."""
    by_key = dict(trials)
    step = min(int(t["env_steps"].min()) for _, t in trials)  # the first measurement point: one interval
    chain = [last]
    while True:
        head = by_key[chain[0]]
        first, began = int(head["env_steps"].min()), head["date"].iloc[0]
        if first < 1.5 * step:  # this slice started the run
            return chain
        before = [k for k, t in trials if t["date"].iloc[0] < began and first - 2 * step <= t["env_steps"].max() < first]
        if not before:
            return chain
        chain.insert(0, before[-1])


def latest_tabular(rows: pd.DataFrame, game: str) -> pd.DataFrame:
    """Per tabular method, the rows of its latest run."""
    out = []
    for method in TABULAR:
        frame = rows[(rows["game"] == game) & (rows["method"] == method)]
        if not frame.empty:
            out.append(frame[frame["run"] == frame.sort_values("date")["run"].iloc[-1]])
    return pd.concat(out) if out else rows.iloc[:0]


def read_paper(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def figures(runs: pd.DataFrame, tabular: pd.DataFrame, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pbmarl.experiments import plots

    written = []
    data = runs.assign(method=runs["method"].map(LABELS))
    for x in ("env_steps", "wall_time"):
        fig = plots.curves(data, "exploitability", x=x)
        ax = fig.axes[0]
        for i, (method, frame) in enumerate(tabular.groupby("method", sort=False)):
            last = frame.sort_values("iteration").iloc[-1]
            ax.axhline(float(last["exploitability"]), color="k", ls=("--", ":")[i % 2], lw=1.0,
                       label=f"{LABELS[method]}, {int(last['iteration']):,} iterations "
                             f"({float(last['exploitability']):.3g})")
        ax.set_title(f"{runs['game'].iloc[0]}: exact exploitability")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
        written += plots.save(fig, out / f"exploitability_{x}", formats=("png",))
        plt.close(fig)
    return written


def table(runs: pd.DataFrame, tabular: pd.DataFrame, left: list[str], paper: list[dict[str, str]], game: str,
          complete_at: int) -> str:
    import pbmarl as pb

    finals = runs.sort_values("env_steps").groupby("trial").tail(1)
    lines = [f"# {game}: final exact exploitability", "",
             f"Written by `python {' '.join(['benchmarks/selfplay_report.py', *sys.argv[1:]])}` from "
             f"`benchmarks/results/selfplay.csv`: per (method, seed) its latest run that reached "
             f"{complete_at:,} env steps (the value at its last measurement). IQM and mean with 95% "
             "stratified-bootstrap intervals over seeds (`pb.compare`, rliable, 2,000 resamples).", "",
             "| method | seeds | IQM [95% CI] | mean [95% CI] | every seed (seed: value) | env steps | wall time (s) "
             "| commits | the paper's (notes below) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    stats = None
    if not finals.empty:
        frame = finals.assign(iteration=finals["iteration"].astype(int))
        stats = pb.compare(frame, "exploitability", allow_unequal=True).table
    notes: list[str] = []
    for method in NEURAL:
        mine = finals[finals["method"] == method].sort_values("seed")
        ref = paper_cell(paper, method, notes) if plays(paper, game) else "not in the paper"
        if mine.empty:
            lines.append(f"| {LABELS[method]} | 0 | no complete run yet | | | | | | {ref} |")
            continue
        s = stats.loc[(game, method)]  # type: ignore[union-attr]
        seeds = ", ".join(f"{int(r.seed)}: {r.exploitability:.4f}" for r in mine.itertuples())
        lines.append(
            f"| {LABELS[method]} | {len(mine)} | {s['iqm']:.4f} [{s['iqm_low']:.4f}, {s['iqm_high']:.4f}] | "
            f"{s['mean']:.4f} [{s['mean_low']:.4f}, {s['mean_high']:.4f}] | {seeds} | "
            f"{int(mine['env_steps'].min()):,}-{int(mine['env_steps'].max()):,} | "
            f"{mine['wall_time'].min():.0f}-{mine['wall_time'].max():.0f} | "
            f"{', '.join(dict.fromkeys(mine['commit']))} | {ref} |")
    for method, frame in tabular.groupby("method", sort=False):
        last = frame.sort_values("iteration").iloc[-1]
        lines.append(f"| {LABELS[method]} | exact | {float(last['exploitability']):.4f} after "
                     f"{int(last['iteration']):,} iterations | | | none (full tree) | {float(last['wall_time']):.0f} "
                     f"| {last['commit']} | |")
    variant = next((r["game"] for r in paper if r["method"] == "(game)"), "unknown")
    if plays(paper, game):
        lines += ["", f"The paper's numbers are for its liar's dice, `{variant}`"
                  + ("." if variant == game else f", not `{game}`: they are beside pbmarl's for reference, not as "
                     "the same measurement.") + " Every number found, and where, is in "
                  "`benchmarks/selfplay_paper.csv`.", ""] + [f"[{i}] {n}" for i, n in enumerate(notes, 1)] + [""]
    else:
        lines += ["", f"The paper does not play `{game}` (its liar's dice is `{variant}`), so there is no number of "
                  "its to put beside these, and no setting it tuned here: every method runs its tuned liar's dice "
                  "setting (`benchmarks/selfplay.py`).", ""]
    if left:
        lines += ["Runs left out:", ""] + [f"- {w}" for w in left] + [""]
    return "\n".join(lines)


def plays(paper: list[dict[str, str]], game: str) -> bool:
    """Whether the paper's numbers are for `game` or a variant of it (liar's dice with other dice)."""
    return any(r["game"].split("(")[0] == game.split("(")[0] for r in paper)


def paper_cell(paper: list[dict[str, str]], method: str, notes: list[str]) -> str:
    """The paper's final exploitability for `method` (or why there is none), its source added to `notes`."""
    name, cell = PAPER_NAMES[method], []
    for row in paper:
        if row["method"] != name or not row["statistic"].startswith(("final exploitability after", "ranking")):
            continue
        notes.append(f"{row['game']}, {name}, {row['statistic']}: {row['value'] or 'no number'}"
                     f"{' ' + row['spread'] if row['spread'] else ''}. Source: {row['source']}")
        text = row["value"] or ("no number (figure only)" if "only in a figure" in row["source"] else "no number")
        cell.append(f"{text} [{len(notes)}]")
    return "; ".join(cell).replace("|", "/") if cell else "none found"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the CSV selfplay.py appends to")
    parser.add_argument("--paper", type=Path, default=PAPER, help="the paper's numbers with their sources")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for each game's folder of figures and table")
    parser.add_argument("--game", action="append", help="games to report (default: every game in the CSV)")
    parser.add_argument("--complete-at", type=int,
                        help="env steps a run must reach to count (default: the game's budget in selfplay.BUDGETS)")
    args = parser.parse_args(argv)
    if args.complete_at is not None and args.complete_at < 1:
        parser.error(f"--complete-at must be a positive number of env steps, got {args.complete_at}")
    rows = load_runs(args.results)
    held = sorted(rows["game"].unique())
    for game in args.game or []:
        if game not in held:
            parser.error(f"no rows for game {game!r} in {args.results}; it holds: {', '.join(held)}")
    games = args.game or held
    if args.complete_at is None and (unknown := [g for g in games if g not in BUDGETS]):
        parser.error(f"no default budget for {', '.join(map(repr, unknown))} (defaults exist for "
                     f"{', '.join(BUDGETS)}): give --complete-at")
    paper, short = read_paper(args.paper), []
    for game in games:
        complete_at = args.complete_at or BUDGETS[game][0]
        runs, left = latest_complete(rows, game, complete_at)
        tabular = latest_tabular(rows, game)
        out = args.out / slug(game)
        out.mkdir(parents=True, exist_ok=True)
        written = figures(runs, tabular, out) if not runs.empty else []
        text = table(runs, tabular, left, paper, game, complete_at)
        (out / "final_table.md").write_text(text)
        written.append(out / "final_table.md")
        print(text)
        print("wrote " + ", ".join(str(p) for p in written))
        counts = runs.groupby("method")["seed"].nunique() if not runs.empty else pd.Series(dtype=int)
        short += [f"{game} {m} {int(counts.get(m, 0))}" for m in NEURAL if counts.get(m, 0) < 5]
    if short:
        print(f"fewer than 5 complete seeds: {', '.join(short)}", file=sys.stderr)


if __name__ == "__main__":
    main()
