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
