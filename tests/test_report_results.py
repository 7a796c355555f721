"""Results folders (results.csv + results.json): written and read back, compared, reported by ``pbmarl report``;
and the project's own benchmark rows converted into them (benchmarks/to_experiments.py) as the README reads them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbmarl as pb
from pbmarl.cli import main
from pbmarl.experiments.report import write_report
from pbmarl.experiments.saved import HEAD, SavedResults, save_results

ROOT = Path(__file__).resolve().parents[1]


def _runs() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = [{"trial": f"{m}-{s}", "game": "g", "method": m, "seed": s, "iteration": it, "env_steps": 10 * it,
             "return": base + it + rng.random()} for m, base in (("mine", 5.0), ("peer", 0.0)) for s in range(4)
            for it in (1, 2, 3)]
    return pd.DataFrame(rows)


def test_a_results_folder_round_trips_and_compares_as_an_experiments_results(tmp_path) -> None:
    folder = save_results(_runs(), tmp_path / "demo", metric="return", description="a toy",
                          source={"file": "x.csv"}, states={"peer-3": "failed"})
    saved = SavedResults.load(folder)
    assert saved.name == "demo" and saved.metric == "return" and saved.meta["source"] == {"file": "x.csv"}
    assert list(saved.results.columns[:len(HEAD)]) == list(HEAD)
    assert (saved.results["experiment"] == "demo").all() and (saved.results["options"] == "{}").all()
    assert saved.status.loc["peer-3", "state"] == "failed" and saved.status.loc["mine-0", "iteration"] == 3
    comp = pb.compare(saved.results, "return", reps=100, poi_reps=20)
    assert comp.improvement.loc[("g", "mine", "peer"), "probability"] == 1.0  # higher return is better
    assert "2 method(s), 8 runs (4-4 per method). a toy" == saved.describe().split("x ", 1)[1]


@pytest.mark.parametrize("drop, message", [("seed", "missing seed"), ("trial", "missing trial")])
def test_save_results_refuses_a_table_without_the_shared_columns(tmp_path, drop, message) -> None:
    with pytest.raises(ValueError, match=message):
        save_results(_runs().drop(columns=drop), tmp_path / "x")


def test_save_results_refuses_a_metric_that_is_not_a_column(tmp_path) -> None:
    with pytest.raises(ValueError, match="metric 'retrun' is not a column of the results"):
        save_results(_runs(), tmp_path / "x", metric="retrun")


def test_pbmarl_report_writes_a_results_folders_report(tmp_path, capsys) -> None:
    folder = save_results(_runs(), tmp_path / "demo", metric="return", description="Toy runs.")
    assert main(["report", str(folder), "--reps", "100"]) == 0
    report = (folder / "report" / "report.md").read_text()
    assert "# Experiment `demo`" in report and "Toy runs." in report and "Metric: `return` (higher is better)" in report
    assert "| g | mine | 4 |" in report and "## Probability of improvement" in report
    for link in [line.split("(")[1].rstrip(")") for line in report.splitlines() if line.startswith("![")]:
        assert (folder / "report" / link).stat().st_size > 1000


def test_report_refuses_a_folder_that_holds_neither(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="neither an experiment folder .* nor a results folder"):
        write_report(tmp_path)


# -- the project's benchmark rows as experiment results ---------------------------------------------------------
@pytest.fixture(scope="module")
def convert():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import to_experiments
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return to_experiments


def test_control_rows_become_pbmarl_and_sb3_trials_of_the_same_commands(convert) -> None:
    results, meta = convert.control_vs_sb3()
    source = pd.read_csv(ROOT / "benchmarks" / "results" / "control.csv")
    assert meta["metric"] == "return" and set(meta["source"]["commits"]) <= set(source["commit"])
    pairs = results.assign(algo=results["method"].str.split(" ").str[0]).groupby(["game", "algo", "seed"])
    assert (pairs["method"].nunique() == 2).all() and (pairs["commit"].nunique() == 1).all()
    # each trial is the latest row of its task, algorithm and seed at the largest budget
    dqn = results[(results["method"] == "DQN (pbmarl)")]
    rows = source[(source["algo"] == "dqn") & (source["budget"] == 50000)].sort_values("date").groupby("seed").tail(1)
    assert dict(zip(dqn["seed"], dqn["return"])) == dict(zip(rows["seed"], rows["pbmarl_return"]))


def test_leduc_rows_keep_one_command_per_method_and_seed(convert) -> None:
    results, meta = convert.leduc_rl_oracles()
    assert meta["metric"] == "exploitability"
    assert (results.groupby("trial")["commit"].nunique() == 1).all()
    assert (results.groupby("method")["seed"].nunique() >= convert.MIN_SEEDS).all()
    assert (results.groupby("trial")["wall_time"].apply(lambda w: w.is_monotonic_increasing)).all()


def test_selfplay_runs_count_once_each_at_their_game_s_budget(convert) -> None:
    results, meta = convert.selfplay_baselines()
    selfplay_report = convert.sibling("selfplay_report")
    assert meta["metric"] == "exploitability" and not results.empty
    assert (results.groupby(["game", "method", "seed"])["trial"].nunique() == 1).all()  # slices joined: one trial
    last = results.sort_values("env_steps").groupby("trial").tail(1)
    assert all(steps >= selfplay_report.BUDGETS[game][0] for game, steps in zip(last["game"], last["env_steps"]))
    assert (results.groupby("trial")["env_steps"].apply(lambda s: s.is_monotonic_increasing and s.is_unique)).all()
    assert (results.groupby(["game", "method"])["seed"].nunique() >= convert.MIN_SEEDS).all()


def test_the_committed_results_are_the_converters_output(convert) -> None:
    """benchmarks/experiments/ is what the converter makes of the CSVs now: rerun it when rows are added."""
    for name, fn in convert.CONVERT.items():
        folder = ROOT / "benchmarks" / "experiments" / name
        saved = SavedResults.load(folder)
        fresh, meta = fn()
        stale = f"benchmarks/experiments/{name} is stale: python benchmarks/to_experiments.py --only {name}"
        assert saved.results["trial"].nunique() == fresh["trial"].nunique(), stale
        assert sorted(saved.results["method"].unique()) == sorted(fresh["method"].unique()), stale
        assert json.loads((folder / "results.json").read_text())["metric"] == meta["metric"]
