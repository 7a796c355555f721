"""benchmarks/selfplay.py run in slices: a run stopped after its first save and continued in a later call writes the
rows an uninterrupted run writes (issue 47: the 10M-step liar's dice runs span work sessions)."""

from __future__ import annotations

import csv
import datetime
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("pyspiel")

_SPEC = importlib.util.spec_from_file_location(
    "selfplay_benchmark", Path(__file__).resolve().parents[1] / "benchmarks" / "selfplay.py")
assert _SPEC is not None and _SPEC.loader is not None
selfplay: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(selfplay)

GAME = "kuhn_poker"
#: tiny budgets: (steps, eval_every, options) per method; each run measures 3 times
TINY: dict[str, tuple[int, int, dict[str, Any]]] = {
    "ppo": (9_000, 3_000, dict(hidden=(16,), steps_per_round=1_024)),
    "nfsp": (1_500, 500, dict(hidden=(16,), episodes_per_step=100, min_buffer=32, replay_capacity=2_000,
                              reservoir_capacity=2_000)),
    "psro": (11_000, 1_000, dict(hidden=(16,), budget=300, learning_starts=32, buffer_size=1_000)),
}


def _train(method: str, csv_path: Path, slices: Any, stamp: str) -> None:
    steps, every, options = TINY[method]
    out = selfplay.Writer(csv_path)
    out.stamp = stamp  # distinct dates per call, as separate sessions have
    if method == "ppo":
        selfplay.neural(out, GAME, "ppo", 0, steps, every, slices, options)
    else:
        getattr(selfplay, method)(out, GAME, 0, steps, every, slices, options)


def _rows(csv_path: Path) -> list[dict[str, str]]:
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))


def _measured(rows: list[dict[str, str]]) -> list[tuple[str, ...]]:
    """What must match between a sliced and a whole run (not the wall time)."""
    return [(r["method"], r["seed"], r["iteration"], r["env_steps"], r["exploitability"]) for r in rows]


def _past() -> datetime.datetime:
    return datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize("method", ["ppo", "nfsp", "psro"])
def test_a_run_stopped_after_its_first_save_continues_exactly(method: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _train(method, tmp_path / "whole.csv", selfplay.Slices(tmp_path / "whole"), "2026-01-01T00:00:00+00:00")
    whole = _rows(tmp_path / "whole.csv")
    assert len(whole) == 3

    sliced_csv = tmp_path / "sliced.csv"
    first = selfplay.Slices(tmp_path / "sliced", deadline=_past())
    _train(method, sliced_csv, first, "2026-01-01T00:00:00+00:00")
    assert first.stopped and len(_rows(sliced_csv)) == 1  # stopped after the first save
    folder = tmp_path / "sliced" / GAME / method / f"seed0-steps{TINY[method][0]}"
    info = json.loads((folder / "slice.json").read_text())
    assert not info["finished"] and info["iteration"] == int(whole[0]["iteration"])
    capsys.readouterr()

    _train(method, sliced_csv, selfplay.Slices(tmp_path / "sliced"), "2026-01-02T00:00:00+00:00")
    said = capsys.readouterr().out
    assert f"resumes at iteration {whole[0]['iteration']}" in said
    assert "already in the CSV" not in said  # a restart from scratch would measure iteration 1 again
    sliced = _rows(sliced_csv)
    assert _measured(sliced) == _measured(whole)
    assert [r["date"] for r in sliced] == ["2026-01-01T00:00:00+00:00"] + ["2026-01-02T00:00:00+00:00"] * 2
    walls = [float(r["wall_time"]) for r in sliced]
    assert walls == sorted(walls) and walls[1] > walls[0]  # the loaded run's wall time continues its own
    assert json.loads((folder / "slice.json").read_text())["finished"]

    _train(method, sliced_csv, selfplay.Slices(tmp_path / "sliced"), "2026-01-03T00:00:00+00:00")
    assert "skipped" in capsys.readouterr().out and len(_rows(sliced_csv)) == 3  # finished: not run again


def test_a_row_written_before_a_save_that_never_happened_is_not_written_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _train("ppo", tmp_path / "whole.csv", None, "2026-01-01T00:00:00+00:00")
    sliced_csv = tmp_path / "sliced.csv"
    _train("ppo", sliced_csv, selfplay.Slices(tmp_path / "sliced", deadline=_past()), "2026-01-01T00:00:00+00:00")
    folder = tmp_path / "sliced" / GAME / "ppo" / f"seed0-steps{TINY['ppo'][0]}"
    for path in sorted((folder / "run").rglob("*"), reverse=True):  # killed after the row, before its save
        path.rmdir() if path.is_dir() else path.unlink()
    (folder / "run").rmdir()
    capsys.readouterr()
    _train("ppo", sliced_csv, selfplay.Slices(tmp_path / "sliced"), "2026-01-02T00:00:00+00:00")
    assert "already in the CSV" in capsys.readouterr().out
    assert _measured(_rows(sliced_csv)) == _measured(_rows(tmp_path / "whole.csv"))


@pytest.mark.parametrize("argv, expected", [
    (["--stop-at", "25:00"], "--stop-at must be a UTC time HH:MM"),
    (["--hours", "-1"], "--hours must be a non-negative number"),
    (["--stop-at", "10:00", "--hours", "1"], "not both"),
])
def test_bad_stop_options_are_refused_by_name(argv: list[str], expected: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        selfplay.main(["--only", "ppo", *argv])
    assert expected in capsys.readouterr().err


def _walked_decisions(game: str) -> float:
    """Mean decisions an episode under uniform play, by walking OpenSpiel's states: the independent reference."""
    import pyspiel

    def walk(state) -> float:
        if state.is_terminal():
            return 0.0
        if state.is_chance_node():
            return sum(p * walk(state.child(a)) for a, p in state.chance_outcomes())
        legal = state.legal_actions()
        return 1.0 + sum(walk(state.child(a)) for a in legal) / len(legal)

    return walk(pyspiel.load_game(game).new_initial_state())


def test_psro_budget_turns_their_episodes_into_the_game_s_decisions() -> None:
    # Kuhn: 2 or 3 decisions a game, under uniform play 2 + 1/4 (a pass then a bet gives the third)
    assert selfplay.decisions_per_episode("kuhn_poker") == pytest.approx(2.25, abs=1e-12)
    assert selfplay.decisions_per_episode("leduc_poker") == pytest.approx(_walked_decisions("leduc_poker"), abs=1e-12)
    assert selfplay.psro_budget("kuhn_poker") == 4_500  # 4000 episodes x 2.25 / 2 seats
    assert selfplay.psro_budget("leduc_poker") == 8_100  # x 4.0625 / 2: what its runs started with
    assert selfplay.psro_budget("liars_dice") == 6_700  # x 3.3618 / 2: what its 10M-step runs started with


def test_a_game_without_a_default_budget_asks_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        selfplay.main(["--game", "goofspiel", "--only", "ppo"])
    assert "no default budget for --game 'goofspiel'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        selfplay.main(["--game", "kuhn_poker", "--only", "ppo", "--eval-every", "0"])
    assert "--eval-every must be a positive number of env steps, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        selfplay.main(["--game", "kuhn_poker", "--only", "mmd", "--iterations", "-3"])
    assert "--iterations must be a positive number of iterations, got -3" in capsys.readouterr().err


def test_a_game_s_name_becomes_a_plain_folder_name() -> None:
    assert selfplay.slug("liars_dice(numdice=2,dice_sides=4)") == "liars_dice_numdice=2_dice_sides=4"
    assert selfplay.slug("kuhn_poker") == "kuhn_poker"  # the folders of runs already saved keep their names
    folder = selfplay.Slices(Path("/state")).folder(selfplay.LARGE, "ppo", 3, 1_000_000)
    assert folder == Path("/state/liars_dice_numdice=2_dice_sides=4/ppo/seed3-steps1000000")
