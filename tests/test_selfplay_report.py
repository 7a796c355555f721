"""benchmarks/selfplay_report.py: which run of each (method, seed) counts, and the table it writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAD = ["date", "commit", "machine", "command", "game", "method", "seed", "iteration", "env_steps", "wall_time",
        "exploitability"]


@pytest.fixture()
def report():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import selfplay_report

        yield selfplay_report
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _write(path: Path) -> Path:
    def run(date: str, commit: str, method: str, seed: int, steps: list[int], values: list[float]) -> list[list]:
        return [[date, commit, "vm", f"python benchmarks/selfplay.py --only {method}", "liars_dice", method, seed,
                 i + 1, s, 10.0 * (i + 1), v] for i, (s, v) in enumerate(zip(steps, values))]

    rows = (run("2026-01-01T00:00:00+00:00", "aaa", "ppo", 0, [50, 100], [0.5, 0.30])      # complete, older
            + run("2026-01-02T00:00:00+00:00", "bbb", "ppo", 0, [50, 101], [0.5, 0.20])    # complete, newest
            + run("2026-01-03T00:00:00+00:00", "ccc", "ppo", 0, [50], [0.9])              # newest, but short
            + run("2026-01-01T00:00:00+00:00", "aaa", "ppo", 1, [50, 100], [0.5, 0.25])
            + run("2026-01-01T00:00:00+00:00", "aaa", "mmd", 0, [0, 0], [0.8, 0.05]))
    frame = pd.DataFrame(rows, columns=HEAD)
    frame.loc[frame["method"] == "mmd", "iteration"] = [10, 20]
    frame.to_csv(path / "selfplay.csv", index=False)
    return path / "selfplay.csv"


def test_the_latest_complete_run_of_each_seed_counts_and_the_others_are_named(tmp_path, report) -> None:
    rows = report.load_runs(_write(tmp_path))
    runs, left = report.latest_complete(rows, "liars_dice", 100)
    finals = runs.sort_values("env_steps").groupby("trial").tail(1).set_index("seed")
    assert finals["exploitability"].to_dict() == {0: 0.20, 1: 0.25} and set(finals["commit"]) == {"bbb", "aaa"}
    assert sorted(left) == ["ppo seed 0 (2026-01-01T00:00:00+00:00, aaa): superseded by a later complete run",
                            "ppo seed 0 (2026-01-03T00:00:00+00:00, ccc): reached 50 of 100 env steps"]
    text = report.table(runs, report.latest_tabular(rows, "liars_dice"), left, report.read_paper(report.PAPER),
                        "liars_dice", 100)
    assert "| PPO self-play | 2 |" in text and "0: 0.2000, 1: 0.2500" in text
    assert "| tabular MMD (last iterate) | exact | 0.0500 after 20 iterations |" in text
    assert "| NFSP (average policy) | 0 | no complete run yet |" in text


def test_bad_arguments_are_refused_naming_them(tmp_path, report, capsys) -> None:
    path = _write(tmp_path)
    with pytest.raises(SystemExit):
        report.main(["--results", str(path), "--out", str(tmp_path / "out"), "--game", "leduc_poker"])
    err = capsys.readouterr().err
    assert "no rows for game 'leduc_poker'" in err and "it holds: liars_dice" in err
    with pytest.raises(SystemExit):
        report.main(["--results", str(path), "--complete-at", "0"])
    assert "--complete-at must be a positive number of env steps, got 0" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="run benchmarks/selfplay.py first"):
        report.load_runs(tmp_path / "missing.csv")


def test_a_run_in_slices_counts_with_every_slice_it_went_through(tmp_path, report) -> None:
    def run(date: str, commit: str, seed: int, steps: list[int], values: list[float]) -> list[list]:
        return [[date, commit, "vm", "python benchmarks/selfplay.py --only ppo", "liars_dice", "ppo", seed,
                 s // 50, s, float(s), v] for s, v in zip(steps, values)]

    rows = (run("2026-01-01T00:00:00+00:00", "aaa", 0, [50], [0.9])                # an attempt, abandoned
            + run("2026-01-02T00:00:00+00:00", "bbb", 0, [50, 100], [0.8, 0.6])    # started again: slice 1
            + run("2026-01-03T00:00:00+00:00", "ccc", 0, [150, 200], [0.5, 0.4])   # slice 2 resumes it
            + run("2026-01-04T00:00:00+00:00", "ddd", 0, [250], [0.3])             # slice 3 reaches the budget
            + run("2026-01-01T00:00:00+00:00", "aaa", 1, [50, 100], [0.7, 0.5])    # seed 1: one short slice
            + run("2026-01-05T00:00:00+00:00", "eee", 1, [250], [0.2]))            # ... and one past a gap
    pd.DataFrame(rows, columns=HEAD).to_csv(tmp_path / "selfplay.csv", index=False)
    runs, left = report.latest_complete(report.load_runs(tmp_path / "selfplay.csv"), "liars_dice", 250)
    seed0 = runs[runs["seed"] == 0].sort_values("env_steps")
    assert seed0["env_steps"].tolist() == [50, 100, 150, 200, 250] and seed0["trial"].nunique() == 1
    assert seed0["commit"].tolist() == ["bbb", "bbb", "ccc", "ccc", "ddd"]
    assert runs[runs["seed"] == 1]["env_steps"].tolist() == [250]  # 100 -> 250 skips a measurement: not resumed
    assert sorted(left) == ["ppo seed 0 (2026-01-01T00:00:00+00:00, aaa): reached 50 of 250 env steps",
                            "ppo seed 1 (2026-01-01T00:00:00+00:00, aaa): reached 100 of 250 env steps"]
    finals = runs.sort_values("env_steps").groupby("trial").tail(1)
    assert finals.set_index("seed")["exploitability"].to_dict() == {0: 0.3, 1: 0.2}


def test_every_game_gets_its_own_folder_and_only_liars_dice_the_paper_s_numbers(tmp_path, report, capsys) -> None:
    path = _write(tmp_path)
    rows = pd.read_csv(path)
    kuhn = rows[rows["method"] == "ppo"].assign(game="kuhn_poker")
    pd.concat([rows, kuhn, kuhn.assign(game="goofspiel")]).to_csv(path, index=False)
    report.main(["--results", str(path), "--out", str(tmp_path / "out"), "--complete-at", "100"])
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"goofspiel", "kuhn_poker", "liars_dice"}
    liars = (tmp_path / "out" / "liars_dice" / "final_table.md").read_text()
    kuhn_text = (tmp_path / "out" / "kuhn_poker" / "final_table.md").read_text()
    assert "# kuhn_poker: final exact exploitability" in kuhn_text and "| PPO self-play | 2 |" in kuhn_text
    assert "not in the paper" in kuhn_text and "The paper does not play `kuhn_poker`" in kuhn_text
    assert "not in the paper" not in liars and "[1] liars_dice(numdice=2,dice_sides=5)" in liars
    assert (tmp_path / "out" / "kuhn_poker" / "exploitability_env_steps.png").stat().st_size > 0
    capsys.readouterr()
    with pytest.raises(SystemExit):  # goofspiel has no budget of the benchmark's to default to
        report.main(["--results", str(path), "--out", str(tmp_path / "out2")])
    assert "no default budget for 'goofspiel'" in capsys.readouterr().err
    assert not (tmp_path / "out2").exists()  # refused before anything was written


def test_methods_run_by_one_invocation_are_separate_runs(tmp_path, report) -> None:
    """`selfplay.py --game kuhn_poker` runs every method in one invocation: each (method, seed) stays its own run."""
    rows = [["2026-01-01T00:00:00+00:00", "aaa", "vm", "python benchmarks/selfplay.py --game kuhn_poker", "kuhn_poker",
             method, seed, 1, steps, 5.0, value]
            for method, seed, steps, value in [("ppo", 0, 100, 0.3), ("deep_mmd", 0, 101, 0.4), ("ppo", 1, 100, 0.2)]]
    pd.DataFrame(rows, columns=HEAD).to_csv(tmp_path / "selfplay.csv", index=False)
    runs, left = report.latest_complete(report.load_runs(tmp_path / "selfplay.csv"), "kuhn_poker", 100)
    assert runs["trial"].nunique() == 3 and not left
    text = report.table(runs, runs.iloc[:0], left, report.read_paper(report.PAPER), "kuhn_poker", 100)
    assert "| PPO self-play | 2 |" in text and "0: 0.3000, 1: 0.2000" in text
    assert "| deep MMD | 1 |" in text and "0: 0.4000" in text
