"""pb.MARL and the multi-agent learners: grouping, centralised inputs, the QMIX mixer, save/resume, bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from run_checks import marl_straight_and_resumed

import pbmarl as pb
from pbmarl.games.matrix_env import CLIMBING
from pbmarl.learners.multiagent.group import joint_steps
from pbmarl.learners.multiagent.mixers import VDN, QMixer, mixing_gradient


def untimed(run: pb.MARL) -> pd.DataFrame:
    """The history without the columns that measure time (which two equal runs never share)."""
    h = run.history
    return h[[c for c in h.columns if not c.startswith(("wall_time", "time/"))]]


@pytest.fixture(scope="module")
def climbing() -> pb.MatrixGame:
    return pb.MatrixGame([CLIMBING, CLIMBING], name="climbing")


@pytest.fixture(scope="module")
def spread() -> pb.games.Game:
    return pb.load_game("pettingzoo:simple_spread_v3", N=3, local_ratio=0.5, max_cycles=5)


# -- the mixer --------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 5), state_dim=st.integers(1, 6), batch=st.integers(1, 8),
       scale=st.floats(0.1, 100.0))
def test_qmix_mixer_is_monotonic(seed: int, n: int, state_dim: int, batch: int, scale: float) -> None:
    torch.manual_seed(seed)
    mixer = QMixer(n, state_dim, embed=8)
    q = torch.randn(batch, n) * scale
    state = torch.randn(batch, state_dim) * scale
    grad = mixing_gradient(mixer, q, state)
    assert grad.shape == (batch, n)
    assert bool((grad >= 0).all()), grad
    # and raising one agent's Q never lowers Q_tot
    bumped = q.clone()
    bumped[:, 0] += abs(scale)
    assert bool((mixer(bumped, state) >= mixer(q, state) - 1e-4).all())


def test_vdn_gradient_is_one_and_mixer_checks_shapes() -> None:
    q, s = torch.randn(4, 3), torch.randn(4, 2)
    assert torch.allclose(mixing_gradient(VDN(), q, s), torch.ones(4, 3))
    with pytest.raises(ValueError, match=r"q must have shape \[batch, 3\]"):
        QMixer(3, 2)(torch.randn(4, 2), s)


# -- mapping and grouping ---------------------------------------------------------------------------
def test_groups_get_their_own_agents_rows() -> None:
    game = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
    mapping = pb.AgentMapping(game, {"adversary_0": "red", "agent_0": "blue", "agent_1": "blue"})
    red, blue = pb.learners.IPPO(seed=0, steps_per_round=20, epochs=1), pb.MAPPO(seed=1, steps_per_round=20, epochs=1)
    marl = pb.MARL(game, {"red": red, "blue": blue}, mapping, num_envs=2)
    assert red.seats == (0,) and blue.seats == (1, 2) and blue.n_agents == 2
    rec = marl.step()
    assert set(rec.returns) == {"red", "blue"} and set(rec.losses) == {"red", "blue"}
    # the blue group's return is the sum of its two agents' returns, red's its one agent's
    assert np.isfinite(rec.returns["blue"]) and np.isfinite(rec.returns["red"])
    h = marl.history
    assert list(h.index) == [1] and {"return/red", "return/blue", "loss/blue/policy_loss"} <= set(h.columns)
    # a group of agents with different observation sizes is refused by name
    with pytest.raises(ValueError, match="group 'all' maps agents of different observation sizes"):
        pb.MARL(game, {"all": pb.MAPPO()}, pb.AgentMapping.shared(game, group="all"))
    # every group needs a learner or a fixed policy
    with pytest.raises(ValueError, match="needs exactly one learner or fixed policy"):
        pb.MARL(game, {"blue": pb.MAPPO()}, mapping)


def test_fixed_group_plays_but_does_not_learn() -> None:
    game = pb.load_game("pettingzoo:simple_tag_v3", max_cycles=5, num_good=1, num_adversaries=2, num_obstacles=1)
    mapping = pb.AgentMapping(game, lambda a: a.rpartition("_")[0])
    prey = pb.RandomPolicy(mapping.group_game("agent"))
    marl = pb.MARL(game, {"adversary": pb.MAPPO(seed=0, steps_per_round=20, epochs=1)}, mapping,
                   fixed={"agent": prey}, num_envs=2)
    rec = marl.step()
    assert set(rec.losses) == {"adversary"} and set(rec.returns) == {"adversary", "agent"}


# -- centralised inputs -----------------------------------------------------------------------------
def test_centralised_critic_reads_the_global_state_and_the_actor_does_not(spread: pb.games.Game) -> None:
    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    mappo = pb.MAPPO(seed=0, steps_per_round=30, epochs=1)
    pb.MARL(spread, {"shared": mappo}, mapping, num_envs=2)
    state_dim = int(np.prod(spread.global_state_shape))
    obs_dim = int(np.prod(spread.observation_space(0).shape))
    assert mappo.source == "state"
    assert mappo.critic_width == state_dim + 3                # global state + agent id
    assert mappo.actor.in_dim == obs_dim + 3 != mappo.critic_width   # own observation + agent id
    pool = pb.RolloutPool(spread, envs_per_worker=2)
    rows = pool.collect(policies={"shared": mappo.behaviour()}, mapping=mapping, steps=10, seed=0)["shared"]
    x, next_x = mappo.critic_inputs(rows)
    assert rows.global_state is not None and rows.next_global_state is not None
    np.testing.assert_array_equal(x[:, :state_dim], rows.global_state)
    np.testing.assert_array_equal(next_x[:, :state_dim], rows.next_global_state)
    np.testing.assert_array_equal(x[:, state_dim:], np.eye(3, dtype=np.float32)[rows.agent])
    assert rows.obs.shape[1] == obs_dim + 3 and not np.array_equal(rows.obs[:, :obs_dim], rows.global_state[:, :obs_dim])
    # IPPO's critic reads the agent's own observation only
    ippo = pb.learners.IPPO(seed=0)
    ippo.bind(mapping, "shared")
    assert ippo.critic_width == obs_dim + 3
    np.testing.assert_array_equal(ippo.critic_inputs(rows)[0], rows.obs)


def test_without_global_state_the_critic_and_mixer_read_concatenated_observations(climbing: pb.MatrixGame) -> None:
    mapping = pb.AgentMapping.shared(climbing)
    mappo, qmix = pb.MAPPO(seed=0), pb.QMIX(seed=0)
    mappo.bind(mapping, "shared")
    qmix.bind(mapping, "shared")
    assert mappo.source == qmix.source == "concat"
    assert mappo.critic_width == 2 * 2 + 2
    assert isinstance(qmix.mixer, QMixer) and qmix.mixer.state_dim == 2 * 2


def test_joint_steps_line_agents_up(spread: pb.games.Game) -> None:
    mapping = pb.AgentMapping.shared(spread)
    pool = pb.RolloutPool(spread, envs_per_worker=2)
    rows = pool.collect(policies={"shared": pb.RandomPolicy(mapping.group_game("shared"))}, mapping=mapping,
                        steps=10, seed=1)["shared"]
    steps = joint_steps(rows, (0, 1, 2))
    assert steps.obs.shape == (len(rows) // 3, 3, rows.obs.shape[1])
    for k in range(3):
        assert (rows.agent[steps.index[:, k]] == k).all()
        np.testing.assert_array_equal(steps.reward[:, k], rows.reward[steps.index[:, k]])
    assert (rows.episode[steps.index] == steps.episode[:, None]).all()


def test_maddpg_critic_input_is_every_agents_observation_and_action() -> None:
    game = pb.load_game("pettingzoo:simple_spread_v3", N=3, continuous_actions=True, max_cycles=5)
    mapping = pb.AgentMapping.shared(game, agent_id=True)
    maddpg = pb.MADDPG(seed=0, steps_per_round=20, learning_starts=10, batch_size=16, updates_per_round=1)
    marl = pb.MARL(game, {"shared": maddpg}, mapping, num_envs=2)
    obs_dim, act_dim = int(np.prod(game.observation_space(0).shape)) + 3, int(np.prod(game.action_space(0).shape))
    assert maddpg.critic_input_dim == 3 * (obs_dim + act_dim)
    assert len(maddpg.critics) == 3
    assert maddpg.critics[0][0].in_features == 3 * (obs_dim + act_dim)
    rec = marl.step()
    assert np.isfinite(rec.losses["shared"]["critic_loss"])
    x = maddpg.critic_input(torch.zeros(4, 3, obs_dim), torch.zeros(4, 3, act_dim))
    assert x.shape == (4, 3 * (obs_dim + act_dim))
    # discrete actions: one-hot actions through the Gumbel-softmax
    disc = pb.load_game("pettingzoo:simple_spread_v3", N=3, max_cycles=5)
    d = pb.MADDPG(seed=0)
    d.bind(pb.AgentMapping.shared(disc), "shared")
    assert d.critic_input_dim == 3 * (int(np.prod(disc.observation_space(0).shape)) + 5)


# -- save and resume --------------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["mappo", "qmix"])
def test_save_resume_gives_the_same_history(tmp_path, climbing: pb.MatrixGame, algo: str) -> None:
    def make() -> pb.MARL:
        learner = (pb.MAPPO(seed=3, steps_per_round=32, epochs=2) if algo == "mappo"
                   else pb.QMIX(seed=3, steps_per_round=32, batch_episodes=8, updates_per_round=2, target_update=3))
        return pb.MARL(climbing, {"team": learner}, pb.AgentMapping.shared(climbing, group="team", agent_id=True),
                       seed=5, num_envs=8)

    straight, resumed = marl_straight_and_resumed(make, tmp_path / "run")
    pd.testing.assert_frame_equal(untimed(straight), untimed(resumed))
    pd.testing.assert_series_equal(resumed.evaluate(20).mean, straight.evaluate(20).mean)


def test_mappo_lr_decay_follows_the_linear_schedule_and_survives_a_resume(tmp_path, climbing: pb.MatrixGame) -> None:
    """``lr_decay_steps``: round k (ending at E = 32 k env steps) trains at lr (1 - (E - 32) / 96), recorded per
    round and set in the optimiser; past the end it stays 0; a resumed run continues the same schedule."""
    def make() -> pb.MARL:
        learner = pb.MAPPO(seed=3, steps_per_round=32, epochs=2, lr=1e-3, lr_decay_steps=96)
        return pb.MARL(climbing, {"team": learner}, pb.AgentMapping.shared(climbing, group="team", agent_id=True),
                       seed=5, num_envs=8)

    straight, resumed = marl_straight_and_resumed(make, tmp_path / "run", total=5, before_save=2)
    lr = straight.history["loss/team/lr"].to_numpy()
    expected = 1e-3 * np.clip(1 - (straight.history["env_steps"].to_numpy() - 32) / 96, 0, None)
    np.testing.assert_allclose(lr, expected)
    assert lr[0] == 1e-3 and lr[-1] == 0.0 and np.all(np.diff(lr) <= 0) and lr[1] < 1e-3
    learner = straight.learners["team"]
    assert isinstance(learner, pb.MAPPO) and learner.optimizer.param_groups[0]["lr"] == lr[-1]
    pd.testing.assert_frame_equal(untimed(straight), untimed(resumed))
    for bad in (0, -5, True, 2.5):
        with pytest.raises(ValueError, match="lr_decay_steps must be a positive int"):
            pb.MAPPO(lr_decay_steps=bad)
    with pytest.raises(ValueError, match="lr_decay_steps=100 .*workers=2"):
        pb.MAPPO(lr_decay_steps=100, workers=2)
    constant = pb.MARL(climbing, {"team": pb.MAPPO(seed=3, steps_per_round=32, epochs=1)}, seed=5, num_envs=8)
    assert "lr" not in constant.step().losses["team"] and constant.learners["team"].scheduled_lr() == 7e-4


def test_maddpg_save_resume_gives_the_same_history(tmp_path) -> None:
    """MADDPG's replay, critics, targets, optimisers and exploration noise all survive a save."""
    game = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)

    def make() -> pb.MARL:
        learner = pb.MADDPG(seed=2, steps_per_round=20, learning_starts=20, batch_size=16, updates_per_round=2)
        return pb.MARL(game, {"team": learner}, pb.AgentMapping.shared(game, group="team", agent_id=True),
                       seed=4, num_envs=2)

    straight, resumed = marl_straight_and_resumed(make, tmp_path / "run", total=4, before_save=2)
    assert np.isfinite(straight.history["loss/team/critic_loss"].iloc[-1])
    pd.testing.assert_frame_equal(untimed(straight), untimed(resumed))
    pd.testing.assert_series_equal(resumed.evaluate(4).mean, straight.evaluate(4).mean)


def test_deterministic_evaluation_plays_each_policys_most_likely_action(climbing: pb.MatrixGame) -> None:
    """A policy leaning to action 1 (p = 0.45) plays exactly (1, 1) = 7 when deterministic, and a mix when sampled;
    MADDPG's noisy actor plays its noise-free action. Evaluating leaves the run's own random state alone."""
    marl = pb.MARL(climbing, {"shared": pb.MAPPO(seed=0)}, pb.AgentMapping.shared(climbing), seed=1, num_envs=8)
    view = marl.mapping.group_game("shared")
    leaning = {"shared": pb.policies.FixedPolicy(view, [0.3, 0.45, 0.25])}
    state = marl.rng.bit_generator.state
    greedy = marl.evaluate(50, policies=leaning, deterministic=True)
    pure = marl.evaluate(50, policies={"shared": pb.policies.FixedPolicy.pure(view, 1)})
    sampled = marl.evaluate(50, policies=leaning)
    assert greedy.mean["shared"] == pure.mean["shared"] == 2 * CLIMBING[1][1]   # both agents score 7
    assert sampled.mean["shared"] < 2 * 7.0 - 1.0                               # miscoordination costs -30
    assert marl.rng.bit_generator.state == state
    with pytest.raises(ValueError, match="deterministic must be True or False, got 'yes'"):
        marl.evaluate(5, deterministic="yes")  # type: ignore[arg-type]

    game = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)
    mapping = pb.AgentMapping.shared(game, group="team", agent_id=True)
    noisy = pb.MARL(game, {"team": pb.MADDPG(seed=2, steps_per_round=10)}, mapping, seed=4, num_envs=2)
    actor = noisy.learners["team"].behaviour()                     # the exploring actor: Gaussian noise on
    assert isinstance(actor, pb.policies.DeterministicPolicy) and actor.noise is not None
    played = [noisy.evaluate(3, policies={"team": actor}, deterministic=True, seed=s).mean["team"] for s in (0, 0)]
    quiet = noisy.evaluate(3, policies={"team": noisy.policies()["team"]}, deterministic=True, seed=0).mean["team"]
    assert played[0] == played[1] == quiet


def test_a_failed_step_leaves_the_run_as_it_was(climbing: pb.MatrixGame) -> None:
    marl = pb.MARL(climbing, {"team": pb.MAPPO(seed=0, steps_per_round=16, epochs=1)}, seed=1, num_envs=4)
    assert [r.iteration for r in marl.run(1, progress=True)] == [1]
    before = marl.snapshot()
    learner = marl.learners["team"]
    original = learner.train
    learner.train = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="boom"):
        marl.step()
    learner.train = original  # type: ignore[method-assign]
    assert len(marl.records) == 1 and marl.env_steps == before[4]  # type: ignore[index]
    assert marl.rng.bit_generator.state == before[2]  # type: ignore[index]


# -- bad input --------------------------------------------------------------------------------------
def test_bad_input_gets_clear_errors(climbing: pb.MatrixGame) -> None:
    with pytest.raises(ValueError, match="has no global state"):
        pb.MARL(climbing, {"team": pb.MAPPO(central="state")})
    cont = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)
    with pytest.raises(ValueError, match="QMIX .* needs Discrete actions.*Box"):
        pb.MARL(cont, {"team": pb.QMIX()})
    with pytest.raises(ValueError, match="MAPPO .* needs Discrete actions"):
        pb.MARL(cont, {"team": pb.MAPPO()})
    with pytest.raises(ValueError, match="central must be"):
        pb.MAPPO(central="global")
    with pytest.raises(ValueError, match="mixer must be 'qmix', 'vdn' or 'none'"):
        pb.QMIX(mixer="qplex")
    with pytest.raises(TypeError, match="multi-agent learner"):
        pb.MARL(climbing, {"team": pb.PPO(climbing)})  # type: ignore[dict-item]
    # a turn-based game without a global state cannot feed a centralised critic
    from pbmarl.learners.multiagent.group import central_source

    kuhn = pb.load_game("kuhn_poker")
    with pytest.raises(ValueError, match="turn-based with no global state"):
        central_source(kuhn, "auto", "MAPPO")
    with pytest.raises(ValueError, match="PettingZoo Parallel games"):
        pb.MARL(kuhn, {"team": pb.MAPPO()})


def test_command_line_marl_and_resume(tmp_path, capsys) -> None:
    from pbmarl.cli import main

    out = tmp_path / "run"
    game = "pettingzoo:simple_spread_v3(N=2, max_cycles=5)"
    assert main(["marl", "--game", game, "--algo", "ippo", "--steps", "10", "--steps-per-round", "10",
                 "--num-envs", "2", "--eval-episodes", "2", "--out", str(out), "--quiet"]) == 0
    first = pd.read_csv(out / "history.csv")
    assert list(first["env_steps"]) == [10] and (out / "evaluation.json").exists()
    assert main(["resume", str(out), "--steps", "10", "--quiet"]) == 0
    again = pd.read_csv(out / "history.csv")
    assert list(again["env_steps"]) == [10, 20]
    assert "resuming" in capsys.readouterr().out
    # a second start into the same folder is refused, naming the resume command
    assert main(["marl", "--game", game, "--algo", "ippo", "--out", str(out)]) == 2
    assert "pbmarl resume" in capsys.readouterr().err


def test_a_group_learner_is_a_psro_oracle() -> None:
    from pbmarl.algorithms.teams.oracle import GroupOracle
    from pbmarl.protocols import Oracle

    rps = pb.MatrixGame([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], name="rps")
    # the one-step game's observation is a 2-dim seat one-hot: the MAPPO code's LayerNorm (the default, for MPE)
    # only slows these 1,024-step answers (exploitability after 3 iterations 0.37 with it, 0.05 without)
    oracle = GroupOracle(rps, lambda s: pb.learners.IPPO(seed=s, steps_per_round=256, epochs=4, lr=1e-2, gamma=0.0,
                                                layer_norm=False), steps=1024, eval_episodes=100)
    assert isinstance(oracle, Oracle) and oracle.name == "marl-ippo"
    br = oracle.respond(0, [None, pb.policies.FixedPolicy(rps, [1.0, 0.0, 0.0])])   # against rock: paper
    assert br.value > 0.8 and br.env_steps >= 1024
    assert br.policy.action_probabilities(np.array([[1.0, 0.0]]), np.ones((1, 3), bool))[0, 1] > 0.8
    psro = pb.PSRO(rps, solver="nash", learner=oracle, evaluator=pb.ExactEvaluator(rps))
    records = [psro.step() for _ in range(3)]
    assert records[-1].exploitability is not None and records[-1].exploitability < 0.1


@pytest.mark.parametrize("algo", ["wqmix", "mappo", "qmix", "iql"])
def test_climbing_game_only_weighted_qmix_finds_the_optimum(climbing: pb.MatrixGame, algo: str) -> None:
    """Optimistically weighted QMIX finds the optimal joint action (0, 0) = 11; the others settle on 5-7.

    Plain QMIX cannot represent the climbing payoffs (with q1(1) < q1(0), monotonicity forces
    Q_tot(1, 1) <= Q_tot(0, 1), but 7 > -30), and Weighted QMIX (Rashid et al. 2020) was made for
    this: TD errors of joint actions whose Q_tot overestimates the target count alpha = 0.01, so Q_tot
    may misjudge the miscoordinated actions and rank (0, 0) first. MAPPO's centralised V(s) of a
    one-step game is one number, so each agent's advantage r - V(s) is the independent learner's
    and its expected gradient from the uniform policy climbs to action 1 or 2 (relative
    overgeneralisation); a larger entropy bonus only moves it from (2, 2) to (1, 1).
    Measured at this budget: OW-QMIX 11 on seeds 0-7 (with alpha 0.1: 4 of 8); seeds 0-3: QMIX 5, 0, 5, 5;
    IQL 5, 5, 5, 5;
    MAPPO (ent_coef 0.0 / 0.1 / 0.5, 20k steps, seeds 0-2): 5, 6, 6 / 5, 7, 7 / 7, 7, 7.
    """
    if algo == "mappo":
        learner: pb.MAPPO | pb.QMIX = pb.MAPPO(seed=0, steps_per_round=256, epochs=4, lr=3e-3, gamma=0.0,
                                               ent_coef=0.05)
    else:
        options = dict(seed=0, steps_per_round=128, eps_anneal_steps=2000, target_update=20, gamma=0.0,
                       batch_episodes=128, hidden=(32,))
        if algo == "wqmix":
            learner = pb.QMIX(weighting="ow", weight_alpha=0.01, central_hidden=(64,), **options)
        else:
            learner = (pb.QMIX if algo == "qmix" else pb.learners.IQL)(**options)
    mapping = pb.AgentMapping.shared(climbing, agent_id=True)
    marl = pb.MARL(climbing, {"shared": learner}, mapping, seed=0, num_envs=64)
    marl.run(20 if algo != "mappo" else 25, progress=False)
    pi = marl.policies()["shared"]
    eye = np.eye(2, dtype=np.float32)
    obs = np.concatenate([eye, eye], axis=1)          # each agent's seat one-hot and its agent id
    assert isinstance(pi, pb.policies.Policy)
    joint = pi.action_probabilities(obs, np.ones((2, 3), bool)).argmax(axis=1)
    value = CLIMBING[joint[0]][joint[1]]
    if algo == "wqmix":
        assert (joint[0], joint[1]) == (0, 0) and value == 11.0
    else:
        assert 5.0 <= value < 11.0, joint


# -- the one vocabulary: building, options, files ---------------------------------------------------
def test_a_group_learner_takes_a_game_a_name_or_none(spread: pb.games.Game) -> None:
    by_game, by_name, bare = pb.MAPPO(spread, seed=0), pb.MAPPO("pettingzoo:simple_spread_v3", seed=0), pb.MAPPO()
    assert by_game.game is spread and by_name.game is not None and bare.game is None
    marl = pb.MARL(spread, {"shared": by_game}, seed=0, num_envs=2)
    assert marl.learners["shared"] is by_game
    pb.MARL(spread, {"shared": bare}, num_envs=2)
    assert bare.game is not None and bare.game.name == spread.name          # the driver handed it over
    other = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
    with pytest.raises(ValueError, match=r"built for 'pettingzoo:simple_spread_v3\(N=3.*not 'pettingzoo:simple_adv"):
        pb.MARL(other, {"shared": pb.QMIX(spread)}, pb.AgentMapping(other, {a: "shared" for a in other.agents},
                                                                       pad=True))


def test_one_learner_trains_one_group_of_one_run(spread: pb.games.Game) -> None:
    learner = pb.MAPPO(seed=0, steps_per_round=10)
    pb.MARL(spread, {"shared": learner}, num_envs=2)
    with pytest.raises(ValueError, match="already trains group 'shared'.*build a new one"):
        pb.MARL(spread, {"shared": learner}, num_envs=2)
    two = pb.load_game("pettingzoo:simple_spread_v3", N=2, max_cycles=5)
    mapping = pb.AgentMapping.independent(two)
    same = pb.learners.IPPO(seed=0)
    with pytest.raises(ValueError, match="one learner object is given for several groups"):
        pb.MARL(two, {"agent_0": same, "agent_1": same}, mapping)
    # a set-up that fails on its second learner leaves the first free for another run
    cont = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)
    free = pb.MADDPG(seed=0)
    with pytest.raises(ValueError, match="needs Discrete actions"):
        pb.MARL(cont, {"agent_0": free, "agent_1": pb.QMIX()}, pb.AgentMapping.independent(cont))
    pb.MARL(cont, {"agent_0": free, "agent_1": pb.MADDPG()}, pb.AgentMapping.independent(cont))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: pb.MAPPO(bogus=1), "unknown option 'bogus' for MAPPO"),
    (lambda: pb.QMIX(hiden=(8,)), "unknown option 'hiden' for QMIX; did you mean 'hidden'"),
    (lambda: pb.MAPPO(hidden=(0,)), "hidden must be a sequence of positive ints"),
    (lambda: pb.MAPPO(hidden="64"), "hidden must be a sequence of positive ints"),
    (lambda: pb.MADDPG(hidden=(2.5,)), "hidden must be a sequence of positive ints"),
    (lambda: pb.QMIX(central_hidden=(-4,)), "central_hidden must be a sequence of positive ints"),
    (lambda: pb.MAPPO(epochs=2.0), "epochs must be a positive int, got 2.0"),
    (lambda: pb.MAPPO(steps_per_round=-3), "steps_per_round must be a positive int, got -3"),
    (lambda: pb.MADDPG(batch_size=True), "batch_size must be a positive int, got True"),
    (lambda: pb.QMIX(buffer_episodes=8, batch_episodes=32), "buffer_episodes must be at least batch_episodes=32"),
    (lambda: pb.MAPPO(seed=-1), "seed must be an int in"),
    (lambda: pb.QMIX(workers=0), r"workers must be an int in \[1, 256\], got 0"),
    (lambda: pb.MAPPO(config=pb.QMIX().config), "config for MAPPO must be a MAPPOConfig"),
    (lambda: pb.MAPPO(42), "game of MAPPO must be a pbmarl Game, a game name or None"),
    (lambda: pb.learners.Independent(algo="sac", lrr=1e-3), "unknown option 'lrr' for Independent\\('sac'\\); did you mean 'lr'"),
])
def test_bad_learner_options_are_named(make: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_bad_marl_options_are_named(spread: pb.games.Game) -> None:
    learner = lambda: {"shared": pb.MAPPO(seed=0, steps_per_round=10)}  # noqa: E731
    for options, message in [({"num_envs": True}, "num_envs must be a positive int, got True"),
                             ({"num_envs": 2.7}, "num_envs must be a positive int, got 2.7"),
                             ({"num_threads": 0}, "num_threads must be a positive int or None"),
                             ({"seed": -2}, "seed must be an int in"),
                             ({"num_env": 2}, "unknown option 'num_env' for MARL; did you mean 'num_envs'")]:
        with pytest.raises((ValueError, TypeError), match=message):
            pb.MARL(spread, learner(), **options)
    marl = pb.MARL("pettingzoo:simple_spread_v3(N=3, local_ratio=0.5, max_cycles=5)", learner(), num_envs=2)
    assert marl.config.to_dict() == {"num_envs": 2, "num_threads": 1} and marl.seed == 0
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="episodes must be a positive int"):
            marl.evaluate(bad)


def test_a_fixed_group_of_another_observation_width_saves_and_loads(tmp_path: Any) -> None:
    """Issue 48: simple_adversary's adversary sees 8 numbers, seat 0... is the adversary, and the agents 10: the
    fixed blue group's policy is rebuilt for the blue view, not for seat 0's width (`size mismatch for 0.weight`)."""
    game = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
    mapping = pb.AgentMapping(game, {"adversary_0": "red", "agent_0": "blue", "agent_1": "blue"})
    blue = pb.MLPPolicy(mapping.group_game("blue"), hidden=(8,), seed=3)
    red_mix = pb.Mixture([pb.MLPPolicy(mapping.group_game("red"), hidden=(8,), seed=s) for s in (1, 2)], [0.25, 0.75])
    for learner_group, fixed in (("red", {"blue": blue}), ("blue", {"red": red_mix})):
        marl = pb.MARL(game, {learner_group: pb.learners.IPPO(seed=0, steps_per_round=10, epochs=1)}, mapping, fixed=fixed,
                       seed=0, num_envs=2)
        marl.step()
        marl.save(tmp_path / learner_group)
        loaded = pb.load_run(tmp_path / learner_group)
        (group, saved), = loaded.fixed.items()
        if isinstance(saved, pb.Mixture):
            assert list(saved.weights) == [0.25, 0.75] and len(saved.policies) == 2
        else:
            x = np.ones((1, 10), np.float32)
            np.testing.assert_array_equal(saved.action_probabilities(x, np.ones((1, 5), bool)),
                                          blue.action_probabilities(x, np.ones((1, 5), bool)))
        twin = pb.MARL(game, {learner_group: pb.learners.IPPO(seed=0, steps_per_round=10, epochs=1)}, mapping, fixed=fixed,
                       seed=0, num_envs=2)
        twin.run(2, progress=False)
        loaded.step()
        pd.testing.assert_frame_equal(untimed(loaded), untimed(twin))


def test_loss_columns_keep_their_order_through_a_save(tmp_path: Any, climbing: pb.MatrixGame) -> None:
    """Issue 48: the run folder's JSON sorted the losses' keys, so a resumed history.csv had its loss columns in
    another order (QMIX's td_loss, q, epsilon came back as epsilon, q, td_loss)."""
    marl = pb.MARL(climbing, {"team": pb.QMIX(seed=0, steps_per_round=16, batch_episodes=4)}, seed=0, num_envs=4)
    marl.step()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".history.csv.123.tmp").write_text("left by a killed save")
    marl.save(tmp_path / "run")
    loaded = pb.load_run(tmp_path / "run")
    loaded.step()
    loaded.save(tmp_path / "run")
    want = ["loss/team/td_loss", "loss/team/q", "loss/team/epsilon"]
    assert [c for c in loaded.history.columns if c.startswith("loss/")] == want
    assert [c for c in pd.read_csv(tmp_path / "run" / "history.csv").columns if c.startswith("loss/")] == want
    assert not list((tmp_path / "run").rglob("*.tmp"))
    assert list(loaded.history["env_steps"]) == [16, 32] and list(loaded.history["episodes"]) == [16, 32]
