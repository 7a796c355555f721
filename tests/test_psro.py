"""PSRO stepped with the exact oracle: convergence, records, save/resume."""

import dataclasses

import numpy as np
import pytest
from open_spiel.python.algorithms import exploitability as os_exploitability

import pbmarl as pb
from pbmarl.runs import RunFolderError


def test_kuhn_nash_converges_within_seven_iterations():
    psro = pb.PSRO("kuhn_poker", solver="nash")
    records = psro.run(7, progress=False)
    best = min(r.exploitability for r in records)
    assert best < 1e-9
    # the first iteration is the uniform random profile, far from equilibrium
    assert psro.records[0].exploitability > 0.4


def test_record_is_frozen_and_history_has_one_row_per_iteration():
    psro = pb.PSRO("kuhn_poker", solver="nash")
    record = psro.step()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.iteration = 5
    assert record.iteration == 1 and record.sizes == (2, 2)
    assert record.exploitability == pytest.approx(record.nash_conv / 2)
    assert set(record.times) == {"oracle", "evaluate", "solve", "measure"}
    psro.step()
    history = psro.history
    assert list(history.index) == [0, 1, 2]
    assert list(history.columns[:9]) == ["env_steps", "episodes", "wall_time", "exploitability", "nash_conv",
                                         "time/oracle", "time/evaluate", "time/solve", "time/measure"]
    assert {"meta_nash_conv", "size_0", "size_1", "sigma_0", "br_gain"} <= set(history.columns)
    assert list(history["size_0"]) == [1, 2, 3]
    assert "NashConv" in str(record) and "exploitability" in str(record)


def test_recorded_nash_conv_matches_openspiel():
    game = pb.load_game("leduc_poker")
    psro = pb.PSRO(game, solver="nash")
    psro.run(3, progress=False)
    policy = pb.evaluation.to_openspiel_policy(game, psro.population, psro.meta_strategy)
    expected = os_exploitability.nash_conv(game.pyspiel_game, policy)
    assert psro.records[-1].nash_conv == pytest.approx(expected, abs=1e-9)


def test_three_player_kuhn_runs_and_improves():
    psro = pb.PSRO("kuhn_poker(players=3)", solver="uniform")
    psro.run(4, progress=False)
    assert psro.population.sizes == (5, 5, 5)
    assert psro.records[-1].nash_conv < psro.records[0].nash_conv


@pytest.mark.parametrize("cls, solver", [(pb.SelfPlay, "last"), (pb.FictitiousPlay, "uniform")])
def test_named_relatives_use_their_solver(cls, solver):
    run = cls("kuhn_poker")
    run.step()
    assert run.solver.name == solver
    if solver == "last":
        assert run.meta_strategy[0].tolist() == [0.0, 1.0]
    else:
        np.testing.assert_allclose(run.meta_strategy[0], [0.5, 0.5])


def test_stop_threshold_and_max_iterations():
    psro = pb.PSRO("kuhn_poker", stop_exploitability=1e-6, max_iterations=30)
    records = psro.run(progress=False)
    assert psro.converged and psro.done and records[-1].exploitability <= 1e-6
    assert len(records) < 30 and records.stopped_by == "budget"
    capped = pb.PSRO("leduc_poker", max_iterations=2)
    assert len(capped.run(progress=False)) == 2 and len(capped.run(progress=False)) == 0
    with pytest.raises(ValueError, match="no budget"):  # neither convergence nor a last iteration to run to
        pb.PSRO("kuhn_poker", stop_exploitability=None).run()


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="stop_exploitability"):
        pb.PSRO("kuhn_poker", stop_exploitability=-1)
    with pytest.raises(ValueError, match="did you mean 'nash'"):
        pb.PSRO("kuhn_poker", solver="nsh")
    with pytest.raises(ValueError, match="initial_policies needs one entry per player"):
        pb.PSRO("kuhn_poker", initial_policies=[pb.RandomPolicy(pb.load_game("kuhn_poker"))])
    with pytest.raises(ValueError, match="too large for the exact"):
        pb.PSRO("connect_four")


def test_save_and_load_continue_the_same_run(tmp_path):
    straight = pb.PSRO("leduc_poker", solver="nash")
    straight.run(5, progress=False)
    first = pb.PSRO("leduc_poker", solver="nash")
    first.run(3, progress=False)
    first.save(tmp_path / "run")
    resumed = pb.PSRO.load(tmp_path / "run")
    assert resumed.iteration == 3 and resumed.population.sizes == (4, 4)
    resumed.run(2, progress=False)
    np.testing.assert_allclose(resumed.history["nash_conv"], straight.history["nash_conv"], atol=1e-12)
    for got, want in zip(resumed.records[-1].meta_strategy, straight.records[-1].meta_strategy):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_load_rejects_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(RunFolderError, match="not a pbmarl run folder"):
        pb.PSRO.load(tmp_path)


def test_sampled_evaluator_run_resumes_on_the_same_random_stream(tmp_path):
    game = pb.load_game("kuhn_poker")

    def make(**kw):
        return pb.PSRO(game, evaluator=pb.RolloutPool(game, seed=0), eval_episodes=300, seed=3, **kw)

    straight = make()
    straight.run(3, progress=False)
    first = make(save_dir=tmp_path / "run")
    first.run(1, progress=False)
    resumed = pb.PSRO.load(tmp_path / "run")
    assert resumed.evaluator.spec() == first.evaluator.spec()
    resumed.run(2, progress=False)
    np.testing.assert_array_equal(resumed.table.values, straight.table.values)
    np.testing.assert_array_equal(resumed.table.counts, straight.table.counts)
    assert (resumed.table.counts[~resumed.table.exact] == 300).all()
    np.testing.assert_allclose(resumed.history["nash_conv"], straight.history["nash_conv"], atol=1e-12)
    assert resumed.history["env_steps"].iloc[-1] == straight.history["env_steps"].iloc[-1] > 0


def test_target_selection_is_an_object_the_run_holds():
    from pbmarl.algorithms.psro.targets import MetaStrategyTargets, Target, TargetSelector, against

    run = pb.PSRO("kuhn_poker", solver="rectified_nash", seed=0)
    assert isinstance(run.selector, MetaStrategyTargets) and isinstance(run.selector, TargetSelector)
    targets = run.selector.select(run.rng)
    assert [(t.player, t.label) for t in targets] == [(0, "@0"), (1, "@0")]
    assert all(t.opponents[t.player] is None for t in targets)

    class OnlyPlayerZero:  # a new driver's choice, reusing PSRO's loop
        def __init__(self, run):
            self.run = run

        def select(self, rng):
            mixtures = self.run.population.mixture(self.run.meta_strategy)
            return [Target(0, against(0, mixtures), "-only")]

    run = pb.PSRO("kuhn_poker", seed=0)
    run.selector = OnlyPlayerZero(run)
    run.run(2, progress=False)
    assert run.population.sizes == (3, 1)
    assert run.population.member("p0/2").name == "br2-0-only"
