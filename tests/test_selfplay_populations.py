"""Populations and the self-play baselines together (issue 47): MMD as XDO's restricted-game solver, and
PSRO whose population starts from an MMD or PPO self-play policy. Each is checked against something
computed independently: OpenSpiel's exploitability, Kuhn's known game value, the run without the baseline."""

import re

import numpy as np
import pytest
from open_spiel.python.algorithms import exploitability as os_exploitability
from openspiel_refs import KUHN, openspiel_value, to_openspiel

import pbmarl as pb


def test_xdo_with_mmd_as_restricted_game_solver_reaches_low_exploitability_on_kuhn(tmp_path):
    xdo = pb.XDO(KUHN, solver="mmd", stop_exploitability=1e-3, max_iterations=30)
    xdo.run(progress=False)
    history = xdo.history
    assert (history["solver"] == "mmd").all() and history["inner_iterations"].iloc[-1] > 0
    final = history["exploitability"].iloc[-1]
    assert final <= 1e-3
    # OpenSpiel walks the game itself: the same exploitability, and Kuhn's value -1/18 within it
    joint = to_openspiel(xdo.game, list(xdo.policies))
    assert os_exploitability.exploitability(xdo.game.pyspiel_game, joint) == pytest.approx(final, abs=1e-9)
    assert openspiel_value(xdo.game, joint)[0] == pytest.approx(-1 / 18, abs=2 * final)
    # every restricted game was solved by MMD's last iterate to the tau it was given (or max_inner ran out)
    solved = history["restricted_exploitability"] <= history["tau"]
    assert solved.all()


def test_xdo_mmd_saved_and_resumed_continues_as_one_run(tmp_path):
    options = dict(solver="mmd", mmd_alpha=0.1, mmd_magnet_every=50, max_iterations=6)
    whole = pb.XDO(KUHN, **options)
    whole.run(progress=False)
    part = pb.XDO(KUHN, **options)
    part.run(3, progress=False)
    part.save(tmp_path / "xdo")
    resumed = pb.load_run(tmp_path / "xdo")
    assert resumed.config.mmd_alpha == 0.1 and resumed.config.mmd_magnet_every == 50
    resumed.run(progress=False)
    np.testing.assert_allclose(resumed.history["exploitability"], whole.history["exploitability"], rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("options, message", [
    ({"solver": "mmd", "mmd_alpha": 0}, "mmd_alpha"),
    ({"solver": "mmd", "mmd_magnet_every": 0}, "mmd_magnet_every"),
    ({"solver": "mmdd"}, re.escape("one of ('cfr+', 'lp', 'mmd'), got 'mmdd'")),
])
def test_xdo_refuses_bad_mmd_options(options, message):
    with pytest.raises(ValueError, match=message):
        pb.XDO(KUHN, **options)


def test_psro_population_started_from_the_mmd_policy():
    mmd = pb.MMD(KUHN, alpha=0.05)
    mmd.run(30, progress=False)
    psro = pb.PSRO(KUHN, initial_policies=list(mmd.policies), stop_exploitability=1e-6, max_iterations=40)
    # iteration 0 is the MMD policy itself, measured by PSRO's own evaluator
    assert psro.records[0].exploitability == pytest.approx(mmd.records[-1].exploitability, abs=1e-12)
    psro.run(progress=False)
    assert psro.records[-1].exploitability <= 1e-6


def test_psro_population_started_from_the_ppo_selfplay_policy():
    selfplay = pb.PPOSelfPlay(KUHN, seed=0, steps_per_round=128, budget=128)
    selfplay.run(progress=False)
    psro = pb.PSRO(KUHN, initial_policies=selfplay.policies, stop_exploitability=1e-6, max_iterations=40)
    assert psro.records[0].exploitability == pytest.approx(selfplay.records[-1].exploitability, abs=1e-6)  # float32 nets
    psro.run(progress=False)
    assert psro.records[-1].exploitability <= 1e-6


def test_an_experiment_takes_xdo_with_mmd_and_refuses_a_meta_solver_name_for_it(tmp_path):
    """XDO's solver is a config value ('cfr+', 'lp', 'mmd'), not a PSRO meta-solver part."""
    exp = pb.Experiment("x", game=KUHN, run=[pb.spec(pb.XDO, solver="mmd"), pb.spec(pb.XDO, solver="lp")],
                        seeds=[0], root=tmp_path)
    assert len(exp.trials) == 2
    with pytest.raises(ValueError, match=re.escape("solver must be one of ('cfr+', 'lp', 'mmd'), got 'nash'")):
        pb.Experiment("y", game=KUHN, run=[pb.spec(pb.XDO, solver="nash")], seeds=[0], root=tmp_path)
    with pytest.raises(ValueError, match="unknown meta-solver 'mmdx'"):
        pb.Experiment("z", game=KUHN, run=[pb.spec(pb.PSRO, solver="mmdx")], seeds=[0], root=tmp_path)
