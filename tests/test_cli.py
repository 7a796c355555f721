"""The `pbmarl` command: the main job end to end, resume, errors, and kill -9 mid-run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pbmarl(*args, extra_env=None, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "pbmarl.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300, **kwargs)


def _saved(out):
    """run.json and the current state folder's state.json of a run folder."""
    run = json.loads((out / "run.json").read_text())
    return run, json.loads((out / run["state"] / "state.json").read_text())


def _start(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "pbmarl.cli", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)


def test_psro_main_job_writes_a_run_folder(tmp_path):
    out = tmp_path / "kuhn"
    result = _pbmarl("psro", "--game", "kuhn_poker", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "converged" in result.stdout and "exploitability" in result.stdout
    history = pd.read_csv(out / "history.csv", index_col="iteration")
    assert history["exploitability"].iloc[-1] <= 1e-6
    assert len(history) <= 51
    assert (out / "exploitability.png").stat().st_size > 1000
    run, state = _saved(out)
    assert (out / run["state"] / "population" / "population.json").exists()
    assert run["type"] == "PSRO" and run["game"]["name"] == "kuhn_poker" and run["config"]["solver"] == "nash"
    assert state["solver"]["name"] == "nash"


@pytest.mark.slow
@pytest.mark.parametrize("game", ["kuhn_poker(players=4)", "goofspiel(num_cards=4)"])
def test_the_main_job_runs_n_player_and_recall_keyed_games_to_the_end(tmp_path, game):
    """The exact-engine issue's two command lines: four players (n-player meta-solver), and goofspiel, whose
    information states are keyed by action-observation histories; each runs to its end with the exact engine."""
    out = tmp_path / "run"
    result = _pbmarl("psro", "--game", game, "--out", out)
    assert result.returncode == 0, result.stderr[-2000:]
    history = pd.read_csv(out / "history.csv", index_col="iteration")
    final = history["exploitability"].iloc[-1]
    assert np.isfinite(history["exploitability"]).all()
    assert final <= 1e-6 or len(history) == 51, history.tail()  # converged, or the default 50 iterations done
    assert final < history["exploitability"].iloc[0]
    run = json.loads((out / "run.json").read_text())
    assert run["game"]["name"] == game and (out / "exploitability.png").stat().st_size > 1000


def test_resume_continues_to_the_budget(tmp_path):
    out = tmp_path / "leduc"
    assert _pbmarl("psro", "--game", "leduc_poker", "--iterations", "2", "--out", out, "--quiet").returncode == 0
    result = _pbmarl("resume", out, "--iterations", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    history = pd.read_csv(out / "history.csv", index_col="iteration")
    assert list(history.index) == [0, 1, 2, 3, 4]


def test_sampled_evaluator_from_the_command_line(tmp_path):
    out = tmp_path / "sampled"
    result = _pbmarl("psro", "--game", "kuhn_poker", "--evaluator", "rollout", "--episodes", "200",
                     "--iterations", "2", "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    run, state = _saved(out)
    assert state["evaluator"]["kind"] == "rollout" and run["config"]["eval_episodes"] == 200
    assert _pbmarl("resume", out, "--iterations", "1", "--quiet").returncode == 0
    history = pd.read_csv(out / "history.csv", index_col="iteration")
    assert list(history.index) == [0, 1, 2, 3] and history["env_steps"].iloc[-1] > 0
    assert history["episodes"].iloc[-1] > 0


def test_resume_takes_any_run_type(tmp_path):
    """`pbmarl resume` reads the run's type from run.json (pb.load_run): here an XDO run saved from Python."""
    import pbmarl as pb

    out = tmp_path / "xdo"
    run = pb.XDO("kuhn_poker", max_iterations=2)
    run.step()
    run.save(out)
    result = _pbmarl("resume", out, "--quiet")
    assert result.returncode == 0, result.stderr
    assert list(pd.read_csv(out / "history.csv", index_col="iteration").index) == [0, 1, 2]
    result = _pbmarl("resume", out)
    assert result.returncode == 0 and "is complete" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["psro", "--game", "kuhn_pokr"], "did you mean 'kuhn_poker'"),
    (["psro", "--game", "connect_four", "--oracle", "exact"], "too large for the exact"),
    (["psro", "--game", "kuhn_poker", "--out", "/dev/null/run"], "cannot write the run folder"),
    (["resume", "/nonexistent/run"], "not a pbmarl run folder"),
    (["psro", "--game", "kuhn_poker", "--parallel-oracle"], "--parallel-oracle trains RL best responses"),
    (["marl", "--game", "pettingzoo:simple_spread_v3(N=2, continuous_actions=True)", "--algo", "mappo"],
     "needs Discrete actions"),
])
def test_clear_errors(args, message, tmp_path):
    result = _pbmarl(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # no run folder left behind


@pytest.mark.ray
def test_parallel_oracle_from_the_command_line_and_resumed(tmp_path, ray_session):
    """One Ray actor per player (joining the session's Ray, as a notebook would); the run folder keeps the
    parallel oracle, so resume rebuilds it."""
    out, env = tmp_path / "par", {"RAY_ADDRESS": ray_session.address_info["address"]}
    result = _pbmarl("psro", "--game", "kuhn_poker", "--oracle", "dqn", "--budget", "200", "--parallel-oracle",
                     "--iterations", "1", "--out", out, extra_env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "side by side" in result.stdout
    _, state = _saved(out)
    assert state["learner"]["name"] == "parallel" and state["learner"]["learner"]["name"] == "dqn"
    assert _pbmarl("resume", out, "--iterations", "1", "--quiet", extra_env=env).returncode == 0
    history = pd.read_csv(out / "history.csv", index_col="iteration")
    assert list(history.index) == [0, 1, 2] and history["env_steps"].iloc[-1] > history["env_steps"].iloc[1] > 0


def test_refuses_a_run_folder_of_another_game(tmp_path):
    out = tmp_path / "run"
    assert _pbmarl("psro", "--game", "kuhn_poker", "--iterations", "1", "--out", out, "--quiet").returncode == 0
    result = _pbmarl("psro", "--game", "leduc_poker", "--out", out)
    assert result.returncode == 2 and "holds a run of 'kuhn_poker'" in result.stderr


@pytest.mark.slow
def test_kill_minus_nine_resumes_to_the_same_result(tmp_path):
    iterations = 12
    reference = tmp_path / "reference"
    assert _pbmarl("psro", "--game", "leduc_poker", "--iterations", iterations, "--stop", "0",
                   "--out", reference, "--quiet").returncode == 0
    out = tmp_path / "killed"
    rng = np.random.default_rng(0)
    kills = 0
    proc = _start("psro", "--game", "leduc_poker", "--iterations", iterations, "--stop", "0", "--out", out, "--quiet")
    for _ in range(20):
        time.sleep(float(rng.uniform(0.05, 0.6)))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        if not (out / "run.json").exists():
            proc = _start("psro", "--game", "leduc_poker", "--iterations", iterations, "--stop", "0",
                          "--out", out, "--quiet")
        else:
            proc = _start("resume", out, "--quiet")
    assert proc.wait(timeout=300) == 0
    assert kills >= 2
    expected = pd.read_csv(reference / "history.csv", index_col="iteration")
    got = pd.read_csv(out / "history.csv", index_col="iteration")
    assert list(got.index) == list(range(iterations + 1))
    np.testing.assert_allclose(got["nash_conv"], expected["nash_conv"], atol=1e-12)
