"""RL learners end to end: exact best-response values, masking, seeding, checkpoints, stopping."""

import dataclasses
import sys

import numpy as np
import pytest
import torch

import pbmarl as pb
from pbmarl.learners import make_learner
from pbmarl.rollout.trajectories import concat_trajectories


@pytest.fixture(scope="module")
def kuhn():
    return pb.load_game("kuhn_poker")


@pytest.fixture(scope="module")
def leduc():
    return pb.load_game("leduc_poker")


def exact_value(game, policy, player, opponents):
    profile = list(opponents)
    profile[player] = policy
    return float(pb.ExactEvaluator(game).evaluate(profile)[player])


def same_parameters(a, b):
    xa, xb = a.arrays(), b.arrays()
    return xa.keys() == xb.keys() and all(np.array_equal(xa[k], xb[k]) for k in xa)


def untimed(records):
    """The records' rows without the columns that measure time."""
    return [{k: v for k, v in r.as_row().items() if k != "wall_time" and not k.startswith("time/")} for r in records]


class RecordingPool(pb.RolloutPool):
    """A local pool that keeps every batch of trajectories it hands out."""

    def __init__(self, game, **kwargs):
        super().__init__(game, **kwargs)
        self.collected = []

    def collect(self, *args, **kwargs):
        traj = super().collect(*args, **kwargs)
        self.collected.append(traj)
        return traj


# -- best responses reach the exact value -----------------------------------------
@pytest.mark.parametrize("name", ["dqn", "ppo", "a2c"])
@pytest.mark.parametrize("player", [0, 1])
def test_best_response_to_uniform_random_reaches_the_exact_value(kuhn, name, player):
    rand = pb.RandomPolicy(kuhn)
    opponents = [rand, rand]
    _, best = pb.ExactBestResponse(kuhn).best_response_with_value(player, opponents)
    learner = make_learner(kuhn, {"name": name, "seed": 0})
    policy, estimate = learner.best_response_with_value(player, opponents)
    assert isinstance(policy, pb.MLPPolicy)
    value = exact_value(kuhn, policy, player, opponents)
    assert best - value < 0.05, f"{name} reached {value:.4f}; the best response earns {best:.4f}"
    assert value <= best + 1e-9
    assert abs(estimate - value) < 0.25  # mean return of the last rounds, with exploration
    assert learner.last_value == estimate and learner.last_env_steps >= learner.config.budget


def test_final_evaluation_estimates_the_value(kuhn):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.PPO(kuhn, seed=1, budget=5_000, eval_episodes=20_000)
    policy, estimate = learner.best_response_with_value(1, [rand, rand])
    value = exact_value(kuhn, policy, 1, [rand, rand])
    assert abs(estimate - value) < 0.05  # ~4 standard errors
    assert learner.last_env_steps > learner.history["env_steps"].iloc[-1]  # evaluation counted


def test_best_response_to_a_mixture(kuhn):
    rand = pb.RandomPolicy(kuhn)
    always_bet = pb.policies.FixedPolicy.pure(kuhn, 1)
    opponents = [None, pb.Mixture([rand, always_bet], [0.3, 0.7])]
    _, best = pb.ExactBestResponse(kuhn).best_response_with_value(0, opponents)
    policy = pb.DQN(kuhn, seed=0).best_response(0, opponents)
    assert best - exact_value(kuhn, policy, 0, opponents) < 0.05


# -- illegal actions ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_illegal_actions_are_never_taken_even_when_they_look_best(leduc, name):
    pool = RecordingPool(leduc, envs_per_worker=64)
    cls = {"dqn": pb.DQN, "ppo": pb.PPO}[name]
    learner = cls(leduc, seed=0, budget=3_000, steps_per_round=256, pool=pool)
    rand = pb.RandomPolicy(leduc)
    learner.start(0, [None, rand])
    net = learner.q_net if name == "dqn" else learner.actor.net
    with torch.no_grad():  # fold and raise look best everywhere; each is illegal somewhere
        net[-1].bias[:] = torch.tensor([50.0, -50.0, 50.0])
    for _ in learner.run():
        pass
    policy, _ = learner.finish()
    traj = concat_trajectories(pool.collected)
    taken_legal = traj.legal_mask[np.arange(len(traj)), traj.action]
    assert taken_legal.all()
    assert (~traj.legal_mask[:, 0]).any() and (~traj.legal_mask[:, 2]).any()  # the test had teeth
    tree_obs = np.concatenate([traj.obs, traj.obs])
    masks = np.concatenate([traj.legal_mask, np.ones_like(traj.legal_mask)])
    probs = policy.action_probabilities(tree_obs, masks)
    assert np.all(probs[: len(traj)][~traj.legal_mask] == 0)


# -- seeding and checkpoints ----------------------------------------------------
@pytest.mark.parametrize("name", ["dqn", "ppo", "a2c"])
def test_same_seed_same_policy_other_seed_other_policy(kuhn, name):
    rand = pb.RandomPolicy(kuhn)

    def train(seed):
        learner = make_learner(kuhn, {"name": name, "seed": seed, "budget": 3_000, "learning_starts": 0}
                                           if name == "dqn" else {"name": name, "seed": seed, "budget": 3_000})
        return learner.best_response(0, [None, rand])

    first, again, other = train(5), train(5), train(6)
    assert same_parameters(first, again)
    assert not same_parameters(first, other)


@pytest.mark.parametrize("spec", [
    {"name": "dqn", "prioritized": True, "learning_starts": 0, "budget": 6_000},
    {"name": "ppo", "budget": 6_000},
    {"name": "a2c", "budget": 3_000},
])
def test_checkpoint_mid_task_resumes_exactly(kuhn, tmp_path, spec):
    rand = pb.RandomPolicy(kuhn)
    opponents = [pb.Mixture([rand, pb.policies.FixedPolicy.pure(kuhn, 0)], [0.5, 0.5]), None]
    learner = make_learner(kuhn, {**spec, "seed": 3})
    learner.start(1, opponents)
    for _ in range(3):
        learner.step()
    learner.save(tmp_path / "mid")
    resumed = pb.load_run(tmp_path / "mid")
    assert same_parameters(resumed.policy(), learner.policy())
    for _ in range(3):
        learner.step()
        resumed.step()
    assert same_parameters(resumed.policy(), learner.policy())
    assert untimed(resumed.records) == untimed(learner.records)
    assert resumed.task.learner_steps == learner.task.learner_steps
    assert resumed.history["wall_time"].iloc[2] == learner.history["wall_time"].iloc[2]  # kept across save and load


def test_checkpoint_between_tasks_keeps_warm_starts_and_rng(kuhn, tmp_path):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.DQN(kuhn, seed=2, budget=3_000, learning_starts=0, warm_start=True)
    learner.best_response(0, [None, rand])
    learner.save(tmp_path / "l")
    resumed = pb.DQN.load(tmp_path / "l")
    assert resumed.spec() == learner.spec() and resumed.tasks_done == 1
    assert same_parameters(resumed.best_response(0, [None, rand]), learner.best_response(0, [None, rand]))
    assert untimed(resumed.records) == untimed(learner.records)


def test_load_refuses_a_different_learner(kuhn, tmp_path):
    pb.DQN(kuhn, seed=0).save(tmp_path / "dqn")
    with pytest.raises(pb.runs.RunFolderError, match="holds a DQN run, not a PPO"):
        pb.PPO.load(tmp_path / "dqn")
    with pytest.raises(pb.runs.RunFolderError, match="not a folder"):
        pb.DQN.load(tmp_path / "nothing")


# -- stepping, stopping, warm starts --------------------------------------------------
def test_step_by_step_records_and_history(kuhn):
    learner = pb.DQN(kuhn, seed=0, budget=2_000, learning_starts=0)
    record = learner.step()  # opens the learner's own task: player 0 against uniformly random opponents
    assert learner.task.player == 0 and isinstance(learner.task.opponents[1].policies[0], pb.RandomPolicy)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.loss = 0.0
    assert record.round == 1 and record.iteration == 1 and record.learner_steps >= learner.config.steps_per_round
    assert record.epsilon == learner.config.epsilon_start and np.isfinite(record["loss/total"])
    assert "return/0=" in str(record)
    rest = learner.run(progress=False)
    assert rest.stopped_by == "budget" and learner.done and rest[-1].learner_steps >= 2_000
    history = learner.history
    assert len(history) == 1 + len(rest) and list(history.index) == list(range(1, len(history) + 1))
    assert list(history.columns[:6]) == ["env_steps", "episodes", "wall_time", "return/0", "loss/total", "time/round"]
    assert {"task", "player", "round", "learner_steps", "epsilon"} <= set(history.columns)
    assert history["epsilon"].is_monotonic_decreasing
    assert (history["env_steps"].diff().dropna() > 0).all() and (history["episodes"].diff().dropna() > 0).all()


def test_iteration_and_counters_run_across_tasks(kuhn):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.PPO(kuhn, seed=0, budget=600, steps_per_round=256)
    learner.best_response(0, [None, rand])
    first = learner.history
    learner.best_response(1, [rand, None])
    h = learner.history
    assert list(h.index) == list(range(1, len(h) + 1)) and set(h["task"]) == {0, 1}
    assert h["env_steps"].is_monotonic_increasing and h["wall_time"].is_monotonic_increasing
    assert "return/1" in h.columns and h.loc[len(first) + 1, "round"] == 1


def test_a_one_player_game_trains_on_its_own():
    learner = pb.PPO("gym:CartPole-v1", seed=0, budget=500, steps_per_round=128, num_envs=4, hidden=(16,))
    records = learner.run(progress=False)
    assert learner.done and records.stopped_by == "budget" and learner.task.opponents == [None]
    before = learner.history
    res = learner.evaluate(episodes=5, seed=1)
    again = learner.evaluate(episodes=5, seed=1)
    assert list(res.mean.index) == [0] and res.mean[0] == again.mean[0] and res.mean[0] >= 8
    assert learner.evaluate(episodes=5, seed=1, deterministic=True).episodes == 5
    assert learner.history.equals(before)


def test_the_own_task_plays_the_opponents_given(kuhn):
    always_bet = pb.policies.FixedPolicy.pure(kuhn, 1)
    learner = pb.A2C(kuhn, seed=0, budget=300, opponents=[None, always_bet])
    learner.step()
    assert learner.task.opponents[1].policies == [always_bet]
    with pytest.raises(ValueError, match="one Policy or Mixture per seat"):
        pb.A2C(kuhn, opponents=[always_bet])


def test_a_learner_of_another_game_is_blamed():
    with pytest.raises(ValueError, match="DQN was built for 'gym:CartPole-v1' but asked to respond to opponents "
                                         "of 'kuhn_poker'"):
        pb.PSRO("kuhn_poker", seed=0, learner=pb.DQN("gym:CartPole-v1", budget=200)).step()


@pytest.mark.parametrize("cls", [pb.DQN, pb.PPO, pb.ApeX])
def test_a_box_game_is_refused_clearly(cls):
    with pytest.raises(ValueError, match=r"discrete actions.*Box actions.*pb\.(SAC|learners\.ApeXDDPG)"):
        cls("gym:Pendulum-v1")


def _interrupt_in(function_name):
    """A trace function that raises KeyboardInterrupt at the first line run inside `function_name`."""

    def trace(frame, event, arg):
        if event == "line" and frame.f_code.co_name == function_name:
            raise KeyboardInterrupt
        return trace

    return trace


@pytest.mark.parametrize("where", ["_init_task", "adam", "_collect", "_update", "_track_plateau"])
def test_ctrl_c_in_any_phase_of_a_step_is_undone(kuhn, where):
    """Issue 48: a Ctrl-C while DQN sets up its task made restore() fail with AttributeError '_rounds';
    interrupted rounds advanced the rng. The interrupted step is undone and the next one is the same."""
    a = pb.DQN(kuhn, seed=0, budget=2_000, steps_per_round=128, learning_starts=0, updates_per_round=4)
    twin = pb.DQN(kuhn, seed=0, budget=2_000, steps_per_round=128, learning_starts=0, updates_per_round=4)
    if where not in ("_init_task", "adam"):
        a.step(), twin.step()
    rng = a.rng.bit_generator.state
    sys.settrace(_interrupt_in(where))
    try:
        with pytest.raises(KeyboardInterrupt):
            a.step()
    finally:
        sys.settrace(None)
    assert a.rng.bit_generator.state == rng and len(a.records) == len(twin.records)
    a.step(), twin.step()
    assert untimed(a.records) == untimed(twin.records)
    assert same_parameters(a.policy(), twin.policy())


def test_plateau_stops_before_the_budget(kuhn):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.PPO(kuhn, seed=0, budget=100_000, plateau_patience=2, plateau_tol=10.0, plateau_start=0.0)
    learner.best_response(0, [None, rand])
    assert len(learner.records) == 3  # the first round sets the level; two without improvement stop
    assert learner.records[-1].learner_steps < 100_000


def test_warm_start_begins_from_the_previous_best_response(kuhn):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.PPO(kuhn, seed=0, budget=2_000)
    first = learner.best_response(0, [None, rand])
    learner.start(0, [None, rand], warm_start=True)
    assert same_parameters(learner.policy(), first)
    learner.start(0, [None, rand])  # the config says no warm start
    assert not same_parameters(learner.policy(), first)
    learner.start(1, [rand, None], warm_start=True)  # nothing to warm-start player 1 from yet
    assert not same_parameters(learner.policy(), first)


def test_best_response_is_a_fresh_copy(kuhn):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.PPO(kuhn, seed=0, budget=2_000)
    learner.start(0, [None, rand])
    snapshot = learner.policy()
    before = snapshot.arrays()
    learner.step()
    assert all(np.array_equal(before[k], v) for k, v in snapshot.arrays().items())


def test_bad_arguments_are_named(kuhn):
    rand = pb.RandomPolicy(kuhn)
    learner = pb.DQN(kuhn, seed=0)
    with pytest.raises(ValueError, match="player 2 is out of range"):
        learner.best_response(2, [rand, rand])
    with pytest.raises(ValueError, match="one Policy or Mixture per seat"):
        learner.best_response(0, [rand])
    with pytest.raises(TypeError, match="opponent for seat 1 must be a Policy or a Mixture"):
        learner.best_response(0, [None, "random"])
    with pytest.raises(ValueError, match="budget must be a positive int"):
        learner.best_response(0, [None, rand], budget=0)


def test_dqn_behaviour_policy_rebuilds_in_a_fresh_process(tmp_path):
    """Ray workers rebuild policies from (arrays, meta) in a process that never imported the learners."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pbmarl.learners.common.nets import EpsilonGreedy

    game = pb.load_game("kuhn_poker")
    policy = EpsilonGreedy(game, hidden=(8,), epsilon=0.2)
    np.savez(tmp_path / "a.npz", **policy.arrays())
    (tmp_path / "m.json").write_text(json.dumps(policy.meta()))
    load = (
        "import json, numpy as np, pbmarl as pb\n"
        "from pbmarl.policies import new_policy_from_state\n"
        f"arrays = dict(np.load({str(tmp_path / 'a.npz')!r})); meta = json.load(open({str(tmp_path / 'm.json')!r}))\n"
        "pi = new_policy_from_state(pb.load_game('kuhn_poker'), arrays, meta)\n"
        "print(type(pi).__name__, pi.epsilon)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", load], check=True, env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["EpsilonGreedy", "0.2"]


@pytest.mark.parametrize(("cls", "sync"), [("PPO", "bsp"), ("PPO", "asp"), ("A2C", "asp")])
def test_a_learner_on_a_parameter_server_resumes_exactly_after_save_and_load(tmp_path, cls, sync):
    """Issue 48: with workers=2 a loaded PPO did not go on as the saved one (2491 learner steps against 2510).
    PPO under ASP ends a step with workers part-way through a batch's minibatch plan: the save keeps each one's
    collecting job and place in it."""
    options = {"workers": 2, "sync": sync, "steps_per_round": 64, "num_envs": 2, "hidden": (16,)}
    a = getattr(pb, cls)("gym:CartPole-v1", seed=0, **options)
    twin = getattr(pb, cls)("gym:CartPole-v1", seed=0, **options)
    a.run(2, progress=False), twin.run(2, progress=False)
    a.save(tmp_path / "run")
    with pb.load_run(tmp_path / "run") as b, a, twin:
        assert untimed(b.run(2, progress=False)) == untimed(twin.run(2, progress=False)) == untimed(a.run(2, progress=False))
