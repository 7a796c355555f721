"""PSRO with RL oracles: exploitability goes down, resumed runs match, the CLI drives them."""

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.cli import main as cli
from pbmarl.io import read_json
from pbmarl.learners import DQN, PPO


def same_parameters(a, b):
    xa, xb = a.arrays(), b.arrays()
    return xa.keys() == xb.keys() and all(np.array_equal(xa[k], xb[k]) for k in xa)


def test_psro_with_a_dqn_oracle_lowers_kuhn_exploitability():
    game = pb.load_game("kuhn_poker")
    psro = pb.PSRO(game, learner=DQN(game, seed=0, budget=10_000, hidden=(64, 64)))
    records = [psro.records[0]] + psro.run(4, progress=False)
    assert records[0].exploitability > 0.4
    assert records[-1].exploitability < 0.6 * records[0].exploitability
    assert all(b.env_steps > a.env_steps for a, b in zip(records, records[1:]))
    assert all(isinstance(pi, pb.MLPPolicy) for pi in psro.population[0][1:])
    # the record's exploitability is the exact one of the meta-strategy mixture
    exact = pb.exploitability(game, psro.population, psro.meta_strategy)
    assert records[-1].exploitability == pytest.approx(exact.exploitability, abs=1e-12)
    assert len(psro.learner.history) > 0 and set(psro.learner.history["task"]) == set(range(8))


def test_resumed_rl_psro_run_matches_an_uninterrupted_one(tmp_path):
    game = pb.load_game("kuhn_poker")

    def learner():
        return DQN(game, seed=4, budget=2_000, learning_starts=0, hidden=(32, 32), warm_start=True)

    straight = pb.PSRO(game, learner=learner(), save_dir=tmp_path / "straight")
    straight.run(3, progress=False)
    cut = pb.PSRO(game, learner=learner(), save_dir=tmp_path / "cut")
    cut.run(2, progress=False)
    run = read_json(tmp_path / "cut" / "run.json")
    assert read_json(tmp_path / "cut" / run["state"] / "state.json")["learner"] == cut.learner.spec()
    resumed = pb.PSRO.load(tmp_path / "cut")
    assert isinstance(resumed.learner, DQN) and resumed.learner.tasks_done == 4
    resumed.run(1, progress=False)
    assert resumed.records[-1].exploitability == straight.records[-1].exploitability
    assert resumed.records[-1].env_steps == straight.records[-1].env_steps
    for p in range(2):
        assert same_parameters(resumed.population[p][-1], straight.population[p][-1])


def test_ppo_oracle_runs_on_leduc_with_exact_measurement():
    game = pb.load_game("leduc_poker")
    psro = pb.PSRO(game, learner=PPO(game, seed=0, budget=3_000, steps_per_round=1_000))
    record = psro.step()
    assert record.sizes == (2, 2) and 0 < record.exploitability < psro.records[0].exploitability + 1e-9
    assert record.env_steps >= 2 * 3_000


@pytest.mark.parametrize("game, oracle", [("kuhn_poker", "ppo"), ("leduc_poker", "dqn")])
def test_cli_runs_and_resumes_rl_oracles(tmp_path, capsys, game, oracle):
    out = tmp_path / "run"
    assert cli(["psro", "--game", game, "--oracle", oracle, "--iterations", "1", "--out", str(out), "--quiet"]) == 0
    data = read_json(out / "run.json")
    state = read_json(out / data["state"] / "state.json")
    assert state["learner"]["name"] == oracle and data["iteration"] == 1
    assert (out / data["state"] / "learner" / "run.json").exists()  # the learner is a run: its own run folder
    assert cli(["resume", str(out), "--iterations", "1", "--quiet"]) == 0
    data = read_json(out / "run.json")
    state = read_json(out / data["state"] / "state.json")
    assert data["iteration"] == 2 and state["sizes"] == [3, 3]
    assert state["records"][-1]["exploitability"] is not None
