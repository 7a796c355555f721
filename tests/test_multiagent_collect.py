"""Multi-agent collection: replay against plain PettingZoo, truncation, local vs Ray, Gymnasium, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from run_checks import assert_same_fields

import pbmarl as pb

MAX_CYCLES = 6


@pytest.fixture(scope="module")
def spread():
    return pb.load_game("pettingzoo:simple_spread_v3", max_cycles=MAX_CYCLES)


@pytest.fixture(scope="module")
def shared_run(spread):
    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    pi = pb.MLPPolicy(mapping.group_game("shared"), hidden=(16,), seed=0)
    with pb.RolloutPool(spread, envs_per_worker=4, seed=0) as pool:
        out = pool.collect(policies={"shared": pi}, mapping=mapping, steps=30, seed=7)
    return mapping, pi, out["shared"]


def test_replaying_recorded_actions_through_plain_pettingzoo_reproduces_every_reward(shared_run):
    from mpe2 import simple_spread_v3

    _, _, tr = shared_run
    env = simple_spread_v3.parallel_env(max_cycles=MAX_CYCLES)
    agents = list(env.possible_agents)
    assert tr.num_episodes >= 2 and len(tr) == tr.steps * 3
    for e in range(tr.num_episodes):
        rows = np.flatnonzero(tr.episode == e)
        obs, _ = env.reset(seed=int(tr.episode_seeds[e]))
        total = np.zeros(3)
        for t in range(int(tr.episode_lengths[e])):
            now = rows[tr.time[rows] == t]
            by_agent = {int(tr.agent[r]): r for r in now}
            assert sorted(by_agent) == [0, 1, 2]
            for p, agent in enumerate(agents):  # what the policy saw is the agent's own observation
                np.testing.assert_array_equal(tr.obs[by_agent[p], :18], obs[agent])
            obs, rewards, terms, truncs, _ = env.step({a: int(tr.action[by_agent[p]]) for p, a in enumerate(agents)})
            for p, agent in enumerate(agents):
                r = by_agent[p]
                assert tr.reward[r] == rewards[agent]  # exactly
                assert tr.truncated[r] == truncs[agent] and tr.terminated[r] == terms[agent]
                np.testing.assert_array_equal(tr.next_obs[r, :18], obs[agent])
                total[p] += rewards[agent]
        assert not env.agents, "the recorded episode ended where the plain loop's did"
        np.testing.assert_allclose(tr.episode_returns[e], total, rtol=0, atol=1e-9)


def test_truncation_is_flagged_at_max_cycles_and_kept_apart_from_termination(shared_run, spread):
    _, pi, tr = shared_run
    np.testing.assert_array_equal(tr.episode_lengths, MAX_CYCLES)
    last = tr.time == MAX_CYCLES - 1
    np.testing.assert_array_equal(tr.truncated, last)
    assert not tr.terminated.any()
    np.testing.assert_array_equal(tr.done, last)
    assert np.abs(tr.next_obs[last]).sum() > 0, "truncated rows keep the real final observation for bootstrapping"
    assert not tr.next_legal_mask[last].any() and tr.next_legal_mask[~last].all()
    # rows are ordered by (episode, agent, time); log-probabilities are the policy's
    key = tr.episode * 10_000 + tr.agent * 100 + tr.time
    assert np.all(np.diff(key) > 0)
    probs = pi.action_probabilities(tr.obs, tr.legal_mask)
    np.testing.assert_allclose(tr.log_prob, np.log(probs[np.arange(len(tr)), tr.action]), rtol=1e-6)
    assert (tr.global_state is not None) == spread.has_global_state
    if spread.has_global_state:
        assert tr.global_state.shape == (len(tr),) + tuple(spread.global_state_shape)


@pytest.mark.ray
def test_local_and_ray_give_the_same_data(ray_session, spread):
    mapping = pb.AgentMapping(spread, {"agent_0": "a", "agent_1": "b", "agent_2": "b"}, agent_id=True)
    pis = {g: pb.MLPPolicy(mapping.group_game(g), hidden=(8,), seed=i) for i, g in enumerate(mapping.groups)}
    kwargs = dict(policies=pis, mapping=mapping, steps=40, seed=3)
    with pb.RolloutPool(spread, envs_per_worker=2, unit_steps=10, seed=0) as pool:
        local = pool.collect(**kwargs)
    with pb.RolloutPool(spread, backend="ray", num_workers=2, envs_per_worker=2, unit_steps=10, seed=0) as pool:
        remote = pool.collect(**kwargs)
    assert set(local) == set(remote) == {"a", "b"}
    for g in local:
        assert_same_fields(local[g], remote[g])
    assert local["a"].truncated.sum() == local["a"].num_episodes


def test_gymnasium_discrete_and_box_sources():
    cart = pb.load_game("gym:CartPole-v1")
    with pb.RolloutPool(cart, envs_per_worker=4, seed=0) as pool:
        tr = pool.collect(policies={"player_0": pb.MLPPolicy(cart, hidden=(8,))}, steps=50, seed=0)["player_0"]
    assert tr.action.dtype == np.int64 and tr.terminated[tr.done].all(), "CartPole falls before its time limit here"
    np.testing.assert_array_equal(tr.reward, 1.0)
    pend = pb.load_game("gym:Pendulum-v1", max_episode_steps=20)
    pi = pb.policies.GaussianPolicy(pend, hidden=(8,), seed=0)
    with pb.RolloutPool(pend, envs_per_worker=2, seed=0) as pool:
        tr = pool.collect(policies={"player_0": pi}, steps=20, seed=0)["player_0"]
    assert tr.action.shape == (len(tr), 1) and tr.action.dtype == np.float32
    assert np.all(np.abs(tr.action) <= 2.0)
    np.testing.assert_array_equal(tr.truncated, tr.time == 19)
    np.testing.assert_allclose(tr.log_prob, pi.log_prob(tr.obs, tr.action).detach().numpy(), rtol=1e-4, atol=1e-4)


def test_bad_input_names_the_value_and_loses_nothing(spread, shared_run):
    mapping, pi, first = shared_run
    wrong = pb.MLPPolicy(spread, hidden=(4,))  # 18 inputs, but the shared group sees 18 + 3
    with pb.RolloutPool(spread, envs_per_worker=4, seed=0) as pool:
        with pytest.raises(ValueError, match=r"missing group\(s\) \['shared'\]"):
            pool.collect(policies={"blue": pi}, mapping=mapping, steps=10)
        with pytest.raises(ValueError, match=r"takes observations \(18,\).*\(21,\).*group_game\('shared'\)"):
            pool.collect(policies={"shared": wrong}, mapping=mapping, steps=10)
        with pytest.raises(ValueError, match="learning must be a set of groups out of \\['shared'\\], got \\{'red'\\}"):
            pool.collect(policies={"shared": pi}, mapping=mapping, learning={"red"}, steps=10)
        with pytest.raises(ValueError, match="mapping was made for"):
            other = pb.load_game("pettingzoo:simple_spread_v3", max_cycles=3)
            pool.collect(policies={"shared": pi}, mapping=pb.AgentMapping.shared(other, agent_id=True), steps=10)
        again = pool.collect(policies={"shared": pi}, mapping=mapping, steps=30, seed=7)["shared"]
    assert_same_fields(again, first)  # failed calls changed nothing: the same seed gives the same data
    kuhn = pb.load_game("kuhn_poker")
    with pb.RolloutPool(kuhn, seed=0) as pool:
        with pytest.raises(ValueError, match="'kuhn_poker' is neither"):
            pool.collect(policies={"player_0": pb.RandomPolicy(kuhn), "player_1": pb.RandomPolicy(kuhn)}, steps=10)


def test_continuous_mpe_with_per_instance_noise_and_global_state():
    game = pb.load_game("pettingzoo:simple_spread_v3", max_cycles=4, continuous_actions=True)
    mapping = pb.AgentMapping.shared(game, agent_id=True)
    mu = pb.policies.DeterministicPolicy(mapping.group_game("shared"), hidden=(8,),
                                noise=pb.policies.noise.OrnsteinUhlenbeck(sigma=0.3, theta=0.15))
    with pb.RolloutPool(game, envs_per_worker=3, seed=0) as pool:
        a = pool.collect(policies={"shared": mu}, mapping=mapping, steps=12, seed=5)["shared"]
        b = pool.collect(policies={"shared": mu}, mapping=mapping, steps=12, seed=5)["shared"]
    space = game.action_space(0)
    assert a.action.shape == (len(a), 5) and np.all(a.action >= space.low) and np.all(a.action <= space.high)
    assert_same_fields(a, b)  # the noise state starts afresh each call, so the same seed gives the same data
    assert a.global_state.shape == (len(a), 54)
    # the global state after a step is the one before the next step of the same episode
    follow = (~a.done[:-1]) & (a.episode[1:] == a.episode[:-1])
    np.testing.assert_array_equal(a.next_global_state[:-1][follow], a.global_state[1:][follow])
    # each agent's rows of one step share the global state
    step0 = (a.episode == 0) & (a.time == 0)
    assert len(np.unique(a.global_state[step0], axis=0)) == 1


def test_a_worker_as_ray_builds_it_gives_the_same_data(spread):
    """What a Ray actor does, without Ray: the game from its spec, policies from shipped arrays, all pickled."""
    import pickle

    from pbmarl.rollout.groups import group_plan
    from pbmarl.rollout.units import COLLECT_GROUPS, WorkUnit
    from pbmarl.rollout.worker import RolloutWorker, game_for_worker

    mapping = pb.AgentMapping(spread, {"agent_0": "a", "agent_1": "b", "agent_2": "b"}, agent_id=True)
    pis = {g: pb.MLPPolicy(mapping.group_game(g), hidden=(8,), seed=i) for i, g in enumerate(mapping.groups)}
    plan = group_plan(spread, pis, mapping, None)
    tokens = {id(p): f"t{i}" for i, p in enumerate(plan.members())}
    unit = WorkUnit((COLLECT_GROUPS, 0), 123, (), min_learner_steps=10, call=1,
                    groups=plan.ref(lambda p: tokens[id(p)]))
    local = RolloutWorker(spread, envs=2)
    for p in plan.members():
        local.bind(tokens[id(p)], p)
    here = local.run(unit)
    shipped = [(tokens[id(p)], p.version, p.arrays(), p.meta()) for p in plan.members()]
    remote = RolloutWorker(pickle.loads(pickle.dumps(game_for_worker(spread))), envs=2)
    there = pickle.loads(pickle.dumps(remote.run(pickle.loads(pickle.dumps(unit)), shipped)))
    assert set(here.groups) == set(there.groups) == {"a", "b"}
    for g in here.groups:
        assert_same_fields(here.groups[g], there.groups[g])


def test_the_one_seat_form_on_a_parallel_game_is_the_independent_group_collect_of_that_seat(spread):
    """collect(player, policy, opponents, steps) on a PettingZoo Parallel game runs the multi-agent route (every
    copy stepped at once): the same rows as the independent mapping's group of that seat, that seat's rows only,
    whole episodes whose returns are the seat's summed rewards; a Mixture opponent still plays."""
    pis = [pb.MLPPolicy(spread, hidden=(8,), seed=s) for s in range(3)]
    mix = pb.Mixture([pis[0], pb.RandomPolicy(spread)], [0.5, 0.5])
    mapping = pb.AgentMapping.independent(spread)
    with pb.RolloutPool(spread, envs_per_worker=4, seed=0) as pool:
        seat = pool.collect(1, pis[1], [mix, None, pis[2]], 40, seed=3)
        group = pool.collect(policies={"agent_0": mix, "agent_1": pis[1], "agent_2": pis[2]}, mapping=mapping,
                             learning={"agent_1"}, steps=40, seed=3)["agent_1"]
        other_seed = pool.collect(1, pis[1], [mix, None, pis[2]], 40, seed=4)
        with pytest.raises(TypeError, match="seat 2 must be played by a Policy or a Mixture"):
            pool.collect(1, pis[1], [mix, None, None], 40)
    assert_same_fields(seat, group)
    assert not np.array_equal(seat.obs, other_seed.obs)
    assert len(seat) >= 40 and set(np.unique(seat.agent)) == {1} and seat.player == 1
    assert seat.done.sum() == len(seat.episode_lengths) and np.all(seat.episode_lengths == MAX_CYCLES)
    summed = np.bincount(seat.episode, weights=seat.reward)
    np.testing.assert_allclose(summed, seat.episode_returns[:, 1])
