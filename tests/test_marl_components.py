"""QMIX's GRU agent network, Weighted QMIX, and single-agent learners as group learners."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from run_checks import marl_straight_and_resumed

import pbmarl as pb
from pbmarl.learners.common.nets import masked_argmax
from pbmarl.learners.multiagent.episode_batch import episode_grid, unroll_q
from pbmarl.learners.multiagent.group import joint_steps
from pbmarl.learners.multiagent.independent import Independent, independent_learners
from pbmarl.learners.multiagent.mixers import wqmix_weights


@pytest.fixture(scope="module")
def spread() -> pb.games.Game:
    return pb.load_game("pettingzoo:simple_spread_v3", N=2, local_ratio=0.5, max_cycles=6)


# -- the GRU agent network ---------------------------------------------------------------------------
def test_gru_replay_unrolls_the_hidden_states_the_agents_acted_on(spread: pb.games.Game) -> None:
    """Greedy play (epsilon 0) took argmax Q(h_t) with each (instance, agent) carrying its own state from t = 0;
    replay's unroll from the buffer must give the same argmax at every step. A stateless reading does not."""
    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    qmix = pb.QMIX(seed=0, agent="gru", rnn_hidden=16, eps_start=0.0, eps_end=0.0, steps_per_round=60)
    marl = pb.MARL(spread, {"shared": qmix}, mapping, num_envs=4)   # 4 instances interleave 10+ episodes
    rows = marl.pool.collect(policies={"shared": qmix.behaviour()}, mapping=marl.mapping, steps=60, seed=3)["shared"]
    qmix._store(rows)
    b = {k: torch.as_tensor(v) for k, v in qmix.buffer.items()}
    order, grid, valid = episode_grid(b["episode"].numpy(), b["time"].numpy())
    assert grid.shape[0] >= 10 and grid.shape[1] == 6
    obs, next_obs = b["obs"][order].float(), b["next_obs"][order].float()
    with torch.no_grad():
        q, _ = unroll_q(qmix.agent.net, obs, next_obs, grid, valid)
    S, n, A = q.shape
    replayed = masked_argmax(q.reshape(S * n, A), b["legal_mask"][order].reshape(S * n, A)).view(S, n)
    played = b["action"][order].long()
    assert torch.equal(replayed, played)
    # each step read alone (zero state) disagrees somewhere: the test can tell a carried state from none
    with torch.no_grad():
        alone, _ = qmix.agent.net(obs.reshape(S * n, -1), qmix.agent.net.initial(S * n))
    assert not torch.equal(alone.argmax(-1).view(S, n), played)


def test_gru_qmix_trains_and_resumes(tmp_path, spread: pb.games.Game) -> None:
    def make() -> pb.MARL:
        learner = pb.QMIX(seed=1, agent="gru", rnn_hidden=16, steps_per_round=24, batch_episodes=4,
                          updates_per_round=2, target_update=3)
        return pb.MARL(spread, {"team": learner}, pb.AgentMapping.shared(spread, group="team", agent_id=True),
                       seed=2, num_envs=4)

    straight, resumed = marl_straight_and_resumed(make, tmp_path / "run")
    assert all(np.isfinite(r.losses["team"]["td_loss"]) for r in straight.records)
    assert isinstance(resumed.learners["team"].agent, pb.policies.Policy) and resumed.learners["team"].config.agent == "gru"
    assert [r.returns for r in resumed.records] == [r.returns for r in straight.records]
    assert [r.losses for r in resumed.records] == [r.losses for r in straight.records]
    # the greedy policy travels as a population member (arrays + meta) and acts the same
    pi = straight.policies()["team"]
    from pbmarl.policies.base import new_policy_from_state

    view = straight.mapping.group_game("team")
    copy = new_policy_from_state(view, pi.arrays(), pi.meta())
    x, m = np.random.default_rng(0).normal(size=(5, view.observation_shape[0])).astype(np.float32), np.ones((5, 5), bool)
    np.testing.assert_allclose(copy.action_probabilities(x, m), pi.action_probabilities(x, m))


# -- Weighted QMIX ------------------------------------------------------------------------------------
def test_wqmix_weights_follow_the_paper() -> None:
    q_tot = torch.tensor([1.0, 3.0, 2.0, 0.0])
    y = torch.tensor([2.0, 2.0, 2.0, 2.0])
    np.testing.assert_allclose(wqmix_weights(q_tot, y, kind="ow", alpha=0.1).numpy(), [1.0, 0.1, 0.1, 1.0])
    q_star = torch.tensor([1.0, 3.0, 3.0, 3.0])   # y beats Q*(s, greedy) only in row 0; row 2 is the greedy action
    greedy = torch.tensor([False, False, True, False])
    np.testing.assert_allclose(wqmix_weights(q_tot, y, kind="cw", alpha=0.5, q_star_greedy=q_star, greedy=greedy)
                               .numpy(), [1.0, 0.5, 1.0, 0.5])
    with pytest.raises(ValueError, match="accepted are 'ow' and 'cw'"):
        wqmix_weights(q_tot, y, kind="w", alpha=0.1)


# -- single-agent learners per agent or per group -----------------------------------------------------
def test_independent_learners_share_or_not(spread: pb.games.Game) -> None:
    mapping, learners = independent_learners(spread, "sac", share=False, seed=4, steps_per_round=12,
                                             learning_starts=6, batch_size=4)
    assert list(learners) == ["agent_0", "agent_1"] and [lr.seed for lr in learners.values()] == [4, 5]
    marl = pb.MARL(spread, learners, mapping, num_envs=2)
    rec = marl.step()
    assert set(rec.losses) == {"agent_0", "agent_1"} and all(d["updates"] > 0 for d in rec.losses.values())
    a0, a1 = learners["agent_0"].inner, learners["agent_1"].inner
    assert a0.env_steps == a1.env_steps == rec.env_steps   # each learned from its own agent's rows only
    assert not torch.equal(next(a0.actor.parameters()), next(a1.actor.parameters()))
    # parameter sharing: one learner, every agent's rows, agent-id features in its input
    mapping, shared = independent_learners(spread, "sac", share=True, seed=4, steps_per_round=12, learning_starts=6,
                                           batch_size=4)
    marl = pb.MARL(spread, shared, mapping, num_envs=2)
    rec = marl.step()
    inner = shared["shared"].inner
    assert inner.env_steps == 2 * rec.env_steps
    assert inner.obs_dim == int(np.prod(spread.observation_space(0).shape)) + 2


def test_independent_continuous_resumes(tmp_path) -> None:
    game = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)

    def make() -> pb.MARL:
        mapping, learners = independent_learners(game, "td3", seed=0, steps_per_round=10, learning_starts=5,
                                                 batch_size=4, hidden=(16,))
        return pb.MARL(game, learners, mapping, seed=1, num_envs=2)

    straight, resumed = marl_straight_and_resumed(make, tmp_path / "run")
    assert [r.returns for r in resumed.records] == [r.returns for r in straight.records]


def test_group_learner_bad_input() -> None:
    with pytest.raises(ValueError, match="for independent PPO use pb.learners.IPPO"):
        Independent(algo="ppo")
    with pytest.raises(ValueError, match="algo must be one of .*'sac'.*, got 'sca'"):
        Independent(algo="sca")
    disc = pb.MatrixGame([[1, 0], [0, 1]], name="coord")
    with pytest.raises(ValueError, match="DDPG needs Box actions"):
        pb.MARL(disc, {"team": Independent(algo="ddpg")})
    with pytest.raises(ValueError, match="agent must be 'mlp' or 'gru', got 'lstm'"):
        pb.QMIX(agent="lstm")
    with pytest.raises(ValueError, match="weighting='ow' weights a mixer's TD errors"):
        pb.learners.IQL(weighting="ow")
    with pytest.raises(ValueError, match=r"weight_alpha must be a number in \(0, 1\], got 0.0"):
        pb.QMIX(weighting="cw", weight_alpha=0.0)
    cont = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)
    with pytest.raises(ValueError, match="QMIX .* needs Discrete actions.*use MADDPG"):
        pb.MARL(cont, {"team": pb.QMIX(agent="gru")})


# -- MAPPO's networks as the MAPPO code builds them -------------------------------------------------------
def test_mappo_networks_carry_layer_norm_and_orthogonal_init_and_export_with_them(spread: pb.games.Game) -> None:
    from pbmarl.policies.base import new_policy_from_state

    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    mappo = pb.MAPPO(seed=0, steps_per_round=24)
    pb.MARL(spread, {"shared": mappo}, mapping, num_envs=2)
    actor, critic = mappo.actor.net, mappo.critic
    for net in (actor, critic):  # a LayerNorm on the input and after each hidden block
        kinds = ["Linear" if isinstance(m, torch.nn.Linear) else type(m).__name__ for m in net]
        assert kinds == ["LayerNorm", "Linear", "ReLU", "LayerNorm", "Linear", "ReLU", "LayerNorm", "Linear"]
    head, hidden = actor[-1].weight.detach(), actor[1].weight.detach()
    # orthogonal rows (fewer rows than columns): W W^T = gain^2 I, gain 0.01 on the actor's head, sqrt(2) inside
    torch.testing.assert_close(head @ head.T, 1e-4 * torch.eye(head.shape[0]), atol=1e-7, rtol=0)
    gram = hidden.T @ hidden if hidden.shape[0] > hidden.shape[1] else hidden @ hidden.T
    torch.testing.assert_close(gram, 2.0 * torch.eye(gram.shape[0]), atol=1e-4, rtol=0)
    assert float(actor[-1].bias.detach().abs().max()) == 0.0 and float(critic[-1].weight.detach().norm()) > 0.5
    plain = pb.MAPPO(seed=0, steps_per_round=24, layer_norm=False, orthogonal_init=False)
    pb.MARL(spread, {"shared": plain}, mapping, num_envs=2)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in plain.actor.net)
    policy = mappo.policy()  # the exported policy keeps its LayerNorms through a save and load
    view = mapping.group_game("shared")
    back = new_policy_from_state(view, policy.arrays(), policy.meta())
    obs = np.random.default_rng(0).normal(size=(5, policy.in_dim)).astype(np.float32)
    mask = np.ones((5, view.num_actions), bool)
    np.testing.assert_allclose(back.action_probabilities(obs, mask), policy.action_probabilities(obs, mask))
    with pytest.raises(ValueError, match="layer_norm must be True or False, got 1"):
        pb.MAPPO(layer_norm=1)


def test_mappo_tanh_networks_take_tanhs_gain_and_export_with_it(spread: pb.games.Game) -> None:
    """``activation="tanh"`` (the MAPPO authors' simple_spread run): Tanh in actor and critic, orthogonal gain
    5/3 inside, and the exported policy rebuilds its Tanh layers (its probabilities survive a save and load)."""
    from pbmarl.policies.base import new_policy_from_state

    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    mappo = pb.MAPPO(seed=0, steps_per_round=24, activation="tanh")
    pb.MARL(spread, {"shared": mappo}, mapping, num_envs=2)
    for net in (mappo.actor.net, mappo.critic):
        kinds = ["Linear" if isinstance(m, torch.nn.Linear) else type(m).__name__ for m in net]
        assert kinds == ["LayerNorm", "Linear", "Tanh", "LayerNorm", "Linear", "Tanh", "LayerNorm", "Linear"]
    hidden = mappo.actor.net[4].weight.detach()  # 64 x 64: W W^T = (5/3)^2 I
    torch.testing.assert_close(hidden @ hidden.T, (5 / 3) ** 2 * torch.eye(64), atol=1e-4, rtol=0)
    policy = mappo.policy()
    assert policy.meta()["activation"] == "tanh"
    view = mapping.group_game("shared")
    back = new_policy_from_state(view, policy.arrays(), policy.meta())
    assert any(isinstance(m, torch.nn.Tanh) for m in back.net)
    obs = np.random.default_rng(0).normal(size=(5, policy.in_dim)).astype(np.float32)
    mask = np.ones((5, view.num_actions), bool)
    np.testing.assert_allclose(back.action_probabilities(obs, mask), policy.action_probabilities(obs, mask))
    with pytest.raises(ValueError, match=r"activation must be one of \['relu', 'tanh'\], got 'gelu'"):
        pb.MAPPO(activation="gelu")
    with pytest.raises(ValueError, match="MLPPolicy activation must be one of"):
        pb.MLPPolicy(view, activation="sigmoid")


def test_clipped_value_loss_stops_a_prediction_that_moved_past_the_clip_towards_its_target() -> None:
    """The MAPPO authors' clipped value loss: per sample the larger of the plain and the clipped Huber loss."""
    from pbmarl.learners.multiagent.mappo import value_loss

    target, old = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.0, 0.0, 0.0])
    # moved 0.1 (inside the clip), 0.5 towards the target (past the clip), 0.5 away from it
    v = torch.tensor([0.1, 0.5, -0.5], requires_grad=True)
    loss = value_loss(v, target, 10.0, old, clip=0.2)
    loss.backward()
    assert v.grad is not None
    plain = torch.nn.functional.huber_loss(v.detach(), target, reduction="none", delta=10.0)
    clipped = torch.nn.functional.huber_loss(torch.tensor([0.1, 0.2, -0.2]), target, reduction="none", delta=10.0)
    torch.testing.assert_close(loss.detach(), torch.max(plain, clipped).mean())
    # d/dv of 0.5 (v - 1)^2 / 3 where the plain loss counts; nothing where the clipped one does
    torch.testing.assert_close(v.grad, torch.tensor([(0.1 - 1) / 3, 0.0, (-0.5 - 1) / 3]))
    assert value_loss(v.detach(), target, 10.0) == torch.nn.functional.huber_loss(v.detach(), target, delta=10.0)


def test_mappo_clip_apart_keeps_the_policy_step_free_of_the_value_loss(spread: pb.games.Game) -> None:
    """``clip_apart=True`` (the MAPPO authors' one clip per network): the actor's step is the same whatever
    the value loss weighs; with the joint clip a heavy value loss shrinks it. ``value_clip`` changes nothing
    in a round's first epoch (every prediction is still at its old value) and changes the second."""
    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    pool = pb.RolloutPool(spread, envs_per_worker=2)
    rows = None
    actors, critics = {}, {}
    for apart, vf, epochs, vclip in ((True, 1.0, 1, False), (True, 1e4, 1, False), (False, 1.0, 1, False),
                                     (False, 1e4, 1, False), (False, 1.0, 1, True), (False, 1.0, 2, False),
                                     (False, 1.0, 2, True)):
        mappo = pb.MAPPO(seed=0, clip_apart=apart, vf_coef=vf, epochs=epochs, value_clip=vclip, lr=1e-2)
        mappo.bind(mapping, "shared")
        if rows is None:
            rows = pool.collect(policies={"shared": mappo.behaviour()}, mapping=mapping, steps=48, seed=1)["shared"]
        mappo.train(rows, env_steps=48)
        key = (apart, vf, epochs, vclip)
        actors[key] = torch.cat([p.detach().ravel() for p in mappo.actor.net.parameters()])
        critics[key] = torch.cat([p.detach().ravel() for p in mappo.critic.parameters()])
    assert torch.equal(actors[(True, 1.0, 1, False)], actors[(True, 1e4, 1, False)])
    assert not torch.allclose(actors[(False, 1.0, 1, False)], actors[(False, 1e4, 1, False)])
    assert torch.equal(critics[(False, 1.0, 1, True)], critics[(False, 1.0, 1, False)])
    assert not torch.equal(critics[(False, 1.0, 2, True)], critics[(False, 1.0, 2, False)])
    for name in ("value_clip", "clip_apart"):
        with pytest.raises(ValueError, match=f"{name} must be True or False, got 1"):
            pb.MAPPO(**{name: 1})


def test_mappo_team_reward_and_truncation_bootstrap_set_the_value_targets(spread: pb.games.Game) -> None:
    """``team_reward=True`` (the MAPPO paper's ``shared_reward``): each row's reward becomes the sum over the
    group's agents at that step. ``bootstrap_truncated=False`` (the paper code's time limit): a row cut by
    ``max_cycles`` adds no ``gamma * V(s')``. The value targets `train` normalises are the GAE returns of that."""
    from pbmarl.rl.multistep import gae

    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    pool = pb.RolloutPool(spread, envs_per_worker=2)
    moments = {}
    for team, bootstrap in ((True, True), (False, True), (False, False)):
        mappo = pb.MAPPO(seed=0, team_reward=team, bootstrap_truncated=bootstrap, epochs=1)
        mappo.bind(mapping, "shared")
        rows = pool.collect(policies={"shared": mappo.behaviour()}, mapping=mapping, steps=24, seed=4)["shared"]
        assert rows.truncated is not None and rows.truncated.any()  # max_cycles 6: episodes end by the limit
        summed = mappo.team_rewards(rows)
        steps = joint_steps(rows, mappo.seats)
        for k in range(2):  # every agent gets the step's summed reward
            np.testing.assert_allclose(summed[steps.index[:, k]], steps.reward.sum(axis=1))
        assert not np.allclose(summed, rows.reward)  # local_ratio 0.5: the own reward is not the sum
        x, next_x = mappo.critic_inputs(rows)
        value, next_value = (mappo._in_return_units(r) for r in mappo._critic_outputs(x, next_x, None))
        reward = (summed if team else rows.reward) + bootstrap * mappo.config.gamma * rows.truncated * next_value
        _, ret = gae(reward, rows.done, value, next_value, gamma=mappo.config.gamma, lam=mappo.config.gae_lambda)
        mappo.train(rows, env_steps=24)
        assert mappo._moments["ret_mean"] == pytest.approx(float(ret.mean()), rel=1e-9)
        moments[team, bootstrap] = mappo._moments["ret_mean"]
    assert moments[True, True] < moments[False, True]  # two agents' (negative) rewards summed
    assert moments[False, False] != pytest.approx(moments[False, True], rel=1e-6)
    with pytest.raises(ValueError, match="team_reward must be True or False, got 'yes'"):
        pb.MAPPO(team_reward="yes")
    with pytest.raises(ValueError, match="bootstrap_truncated must be True or False, got 0"):
        pb.MAPPO(bootstrap_truncated=0)
