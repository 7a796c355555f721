"""``pbmarl train --algo mmd | ppo-selfplay | deep-mmd``: run folders with the exact exploitability, resumed,
and the games and options each refuses (tiny budgets on Kuhn)."""

import json

import numpy as np
import pandas as pd
import pytest

import pbmarl as pb
from pbmarl.cli import main


def _history(out):
    return pd.read_csv(out / "history.csv", index_col="iteration")


def test_mmd_run_folder_holds_the_exact_exploitability_and_resumes(tmp_path, capsys):
    out = tmp_path / "mmd"
    assert main(["train", "--game", "kuhn_poker", "--algo", "mmd", "--iterations", "6", "--alpha", "0.2",
                 "--out", str(out), "--quiet"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["type"] == "MMD" and run["config"]["alpha"] == 0.2 and run["config"]["max_iterations"] == 6
    assert list(_history(out).index) == list(range(7))
    assert main(["resume", str(out), "--iterations", "3", "--quiet"]) == 0
    history = _history(out)
    assert list(history.index) == list(range(10))
    # the same ten iterates from Python in one go; the last one's exploitability recomputed independently
    reference = pb.MMD("kuhn_poker", alpha=0.2)
    reference.run(9, progress=False)
    np.testing.assert_allclose(history["exploitability"], reference.history["exploitability"], rtol=0, atol=1e-12)
    loaded = pb.load_run(out)
    assert pb.exploitability("kuhn_poker", list(loaded.policies)).exploitability == pytest.approx(
        history["exploitability"].iloc[-1], abs=1e-12)
    assert history["exploitability"].iloc[-1] < history["exploitability"].iloc[0]
    assert "exploitability" in capsys.readouterr().out
    # MMD plays no env steps: --steps could never be reached, so it is refused, naming --iterations
    assert main(["resume", str(out), "--steps", "10"]) == 2
    assert "--steps counts env steps, and MMD plays none" in capsys.readouterr().err


def test_ppo_selfplay_run_folder_is_exact_and_resume_moves_the_budget(tmp_path):
    out = tmp_path / "ppo"
    assert main(["train", "--game", "kuhn_poker", "--algo", "ppo-selfplay", "--steps", "500",
                 "--out", str(out), "--quiet"]) == 0
    first = _history(out)
    assert len(first) == 1 and first["env_steps"].iloc[-1] >= 500
    assert main(["resume", str(out), "--steps", "500", "--quiet"]) == 0
    history = _history(out)
    assert list(history.index) == [1, 2] and history["env_steps"].iloc[-1] > first["env_steps"].iloc[-1]
    loaded = pb.load_run(out)
    assert loaded.config.budget == first["env_steps"].iloc[-1] + 500  # the annealing runs over the new budget
    exact = pb.exploitability("kuhn_poker", loaded.policies).exploitability
    assert exact == pytest.approx(history["exploitability"].iloc[-1], abs=1e-9)
    assert (out / "exploitability.png").stat().st_size > 1000


def test_deep_mmd_takes_its_alpha(tmp_path):
    out = tmp_path / "dmmd"
    assert main(["train", "--game", "kuhn_poker", "--algo", "deep-mmd", "--steps", "300", "--alpha", "0.3",
                 "--out", str(out), "--quiet"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["type"] == "DeepMMD" and run["config"]["alpha"] == 0.3
    history = _history(out)
    assert history["alpha"].iloc[-1] == 0.3 and np.isfinite(history["exploitability"]).all()


@pytest.mark.parametrize("args, message", [
    (["--game", "gym:CartPole-v1", "--algo", "mmd"], "has 1 player"),
    (["--game", "kuhn_poker(players=3)", "--algo", "ppo-selfplay"], "has 3 players"),
    (["--game", "connect_four", "--algo", "mmd"], "too large for the exact engine"),
    (["--game", "kuhn_poker", "--algo", "mmd", "--steps", "10"], "give --iterations N"),
    (["--game", "kuhn_poker", "--algo", "ppo-selfplay", "--iterations", "10"], "trains for --steps env steps"),
    (["--game", "kuhn_poker", "--algo", "ppo-selfplay", "--alpha", "0.1"], "ppo-selfplay has none"),
    (["--game", "kuhn_poker", "--algo", "deep-mmd", "--preset", "iig_liars_dice"], "not --algo deep-mmd"),
    (["--game", "kuhn_poker", "--algo", "mmd", "--workers", "2"], "runs in one process"),
    (["--game", "kuhn_poker", "--algo", "mmd", "--alpha", "-1"], "alpha must be a non-negative number, got -1"),
    (["--game", "gym:CartPole-v1", "--algo", "sac", "--iterations", "3"], "not --algo sac"),
])
def test_refused_with_a_clear_message_and_no_folder(args, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_a_game_too_large_for_the_exact_engine_trains_and_says_it_is_not_measured(tmp_path, capsys):
    out = tmp_path / "c4"
    assert main(["train", "--game", "connect_four", "--algo", "ppo-selfplay", "--steps", "200",
                 "--out", str(out), "--quiet"]) == 0
    said = capsys.readouterr().out
    assert "exploitability is not measured" in said
    history = _history(out)
    assert history["exploitability"].isna().all() and history["env_steps"].iloc[-1] >= 200
