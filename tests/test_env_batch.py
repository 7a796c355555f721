"""Batched environments: numpy ports against the originals, every route against the instances route, step budgets."""

from __future__ import annotations

import numpy as np
import pytest
from run_checks import assert_same_fields

import pbmarl as pb
from pbmarl.envs.batch import available_steppers
from pbmarl.envs.classic_control import pendulum_port
from pbmarl.envs.mpe.batch import AdversaryBatch, ReferenceBatch, SpreadBatch, TagBatch


@pytest.mark.parametrize("name, kwargs", [
    ("simple_spread_v3", dict()), ("simple_spread_v3", dict(continuous_actions=True)),
    ("simple_spread_v3", dict(N=4, local_ratio=0.3, max_cycles=9)),
    ("simple_spread_v3", dict(terminate_on_success=True, max_cycles=40)),
    ("simple_adversary_v3", dict()), ("simple_adversary_v3", dict(N=3, continuous_actions=True, max_cycles=12)),
    ("simple_reference_v3", dict()), ("simple_reference_v3", dict(continuous_actions=True, local_ratio=0.2)),
    ("simple_tag_v3", dict(max_cycles=60)), ("simple_tag_v3", dict(continuous_actions=True, max_cycles=60)),
    ("simple_tag_v3", dict(num_good=2, num_adversaries=2, num_obstacles=3, terminate_on_success=True, max_cycles=30)),
])
def test_mpe_ports_replay_mpe2_exactly(name, kwargs):
    """Same seeds, same actions: every observation, reward, flag and global state equal mpe2's, bit for bit."""
    import importlib

    module = importlib.import_module(f"mpe2.{name}")
    seeds = np.array([0, 11, 2024] if name != "simple_tag_v3" else range(8))  # tag: enough copies to see catches
    B = len(seeds)
    port = {"simple_spread_v3": SpreadBatch, "simple_adversary_v3": AdversaryBatch,
            "simple_reference_v3": ReferenceBatch, "simple_tag_v3": TagBatch}[name](B, **kwargs)
    envs = [module.parallel_env(**kwargs) for _ in range(B)]
    agents = envs[0].possible_agents
    port.reset(np.arange(B), seeds)
    obs = [env.reset(seed=int(s))[0] for env, s in zip(envs, seeds)]
    rng = np.random.default_rng(0)
    space = envs[0].action_space(agents[0])
    steps, ended, seen = 0, np.zeros(B, dtype=bool), []
    while not ended.all():
        mine = port.observations()
        state = port.state()
        for i, env in enumerate(envs):
            if ended[i]:
                continue
            for p, a in enumerate(agents):
                np.testing.assert_array_equal(mine[p][i], obs[i][a])
            np.testing.assert_array_equal(state[i], env.state())
        if kwargs.get("continuous_actions"):
            actions = [rng.uniform(0, 1, (B, space.shape[0])).astype(np.float32) for _ in agents]
        else:
            actions = [rng.integers(0, space.n, B) for _ in agents]
        rewards, term, trunc = port.step(actions)
        seen.append(rewards[~ended])
        for i, env in enumerate(envs):
            if ended[i]:
                continue
            step = {a: (actions[p][i] if kwargs.get("continuous_actions") else int(actions[p][i]))
                    for p, a in enumerate(agents)}
            obs[i], r, te, tr, _ = env.step(step)
            for p, a in enumerate(agents):
                assert rewards[i, p] == r[a]
                assert term[i] == te[a] and trunc[i] == tr[a]
            ended[i] = not env.agents
        steps += 1
    assert steps == kwargs.get("max_cycles", 25)
    if name == "simple_tag_v3":  # the replay saw the arena's bound penalty, not only zeros (catches: below)
        assert (np.concatenate(seen) % 1 != 0).any()


def test_tag_port_catches_as_mpe2_does():
    """Adversaries put on the good agent (copy 0) or one of them near it (copy 1): rewards and termination as mpe2's."""
    from mpe2 import simple_tag_v3

    kwargs = dict(num_good=1, num_adversaries=3, terminate_on_success=True)
    port = TagBatch(2, **kwargs)
    port.reset(np.arange(2), np.array([3, 4]))
    envs = [simple_tag_v3.parallel_env(**kwargs) for _ in range(2)]
    for i, env in enumerate(envs):
        env.reset(seed=3 + i)
        world = env.aec_env.unwrapped.world
        prey = world.agents[3].state.p_pos
        for k in range(3):
            offset = 0.02 * (k + 1) if i == 0 else (0.05, 1.0, -1.0)[k]
            world.agents[k].state.p_pos = prey + offset
            port.pos[i, k] = world.agents[k].state.p_pos
    rewards, term, _ = port.step([np.zeros(2, dtype=np.int64)] * 4)
    for i, env in enumerate(envs):
        _, r, te, _, _ = env.step({a: 0 for a in env.possible_agents})
        np.testing.assert_array_equal(rewards[i], [r[a] for a in env.possible_agents])
        assert term[i] == te["agent_0"]
    assert rewards[0, 0] == 30 and rewards[1, 0] == 10 and term.all()  # one catch is enough for one good agent


def test_spread_port_terminates_on_success_as_mpe2_does():
    """Agents put on the landmarks (copy 0) or next to them (copy 1): termination and rewards as mpe2's."""
    from mpe2 import simple_spread_v3

    port = SpreadBatch(2, terminate_on_success=True, max_cycles=10)
    port.reset(np.arange(2), np.array([5, 6]))
    envs = [simple_spread_v3.parallel_env(terminate_on_success=True, max_cycles=10) for _ in range(2)]
    for i, env in enumerate(envs):
        env.reset(seed=5 + i)
        world = env.aec_env.unwrapped.world
        for k, agent in enumerate(world.agents):
            agent.state.p_pos = world.landmarks[k].state.p_pos + (0.0 if i == 0 else 0.5)
            port.pos[i, k] = agent.state.p_pos
    rewards, term, trunc = port.step([np.zeros(2, dtype=np.int64)] * 3)
    for i, env in enumerate(envs):
        _, r, te, tr, _ = env.step({a: 0 for a in env.possible_agents})
        np.testing.assert_array_equal(rewards[i], [r[a] for a in env.possible_agents])
        assert term[i] == te["agent_0"] and trunc[i] == tr["agent_0"]
    np.testing.assert_array_equal(term, [True, False])


def test_mpe_ports_cover_only_what_they_reproduce():
    assert "numpy" in available_steppers(pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True))
    assert "numpy" in available_steppers(pb.load_game("pettingzoo:simple_adversary_v3", N=3))
    assert "numpy" in available_steppers(pb.load_game("pettingzoo:simple_reference_v3", continuous_actions=True))
    assert "numpy" in available_steppers(pb.load_game("pettingzoo:simple_tag_v3", num_obstacles=1))
    for other in ("pettingzoo:simple_spread_v3(num_agent_neighbors=1)", "pettingzoo:simple_spread_v3(curriculum=True)",
                  "pettingzoo:simple_adversary_v3(num_landmark_neighbors=1)", "pettingzoo:simple_tag_v3(curriculum=True)",
                  "pettingzoo:simple_push_v3"):
        assert available_steppers(pb.load_game(other)) == ("instances",), other


def test_pendulum_port_replays_gymnasium_exactly():
    import gymnasium

    game = pb.load_game("gym:Pendulum-v1", max_episode_steps=30, g=9.81)
    port = pendulum_port(game)(4)
    seeds = np.array([3, 1, 4, 1])
    port.reset(np.arange(4), seeds)
    envs = [gymnasium.make("Pendulum-v1", max_episode_steps=30, g=9.81) for _ in range(4)]
    obs = [env.reset(seed=int(s))[0] for env, s in zip(envs, seeds)]
    rng = np.random.default_rng(1)
    for t in range(30):  # noqa: B007 - t is read after the loop
        np.testing.assert_array_equal(port.observations()[0], np.stack(obs))
        u = rng.uniform(-2.5, 2.5, (4, 1)).astype(np.float32)  # beyond the bounds too: both clip
        rewards, term, trunc = port.step([u])
        out = [env.step(u[i]) for i, env in enumerate(envs)]
        obs = [o[0] for o in out]
        np.testing.assert_array_equal(rewards[:, 0], [o[1] for o in out])
        np.testing.assert_array_equal(term, [o[2] for o in out])
        np.testing.assert_array_equal(trunc, [o[3] for o in out])
    assert trunc.all() and t == 29


def _collect(game, policies, stepper, mapping=None, **kwargs):
    with pb.RolloutPool(game, envs_per_worker=4, seed=0, stepper=stepper) as pool:
        return pool.collect(policies=policies, mapping=mapping, seed=7, **kwargs)


@pytest.mark.parametrize("continuous", [False, True])
def test_numpy_route_gives_the_instances_routes_data_on_mpe(continuous):
    game = pb.load_game("pettingzoo:simple_spread_v3", max_cycles=5, continuous_actions=continuous)
    mapping = pb.AgentMapping(game, {"agent_0": "a", "agent_1": "b", "agent_2": "b"}, agent_id=True)
    if continuous:
        noise = pb.policies.noise.OrnsteinUhlenbeck(sigma=0.3, theta=0.15)
        pis = {"a": pb.policies.GaussianPolicy(mapping.group_game("a"), hidden=(8,), seed=0),
               "b": pb.policies.DeterministicPolicy(mapping.group_game("b"), hidden=(8,), noise=noise)}
    else:
        pis = {g: pb.MLPPolicy(mapping.group_game(g), hidden=(8,), seed=i) for i, g in enumerate(mapping.groups)}
    for whole in (True, False):
        ref = _collect(game, pis, "instances", mapping, steps=23, whole_episodes=whole)
        out = _collect(game, pis, "numpy", mapping, steps=23, whole_episodes=whole)
        for g in ref:
            assert_same_fields(ref[g], out[g])


def test_numpy_route_gives_the_instances_routes_data_on_simple_adversary():
    game = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=6)
    mapping = pb.AgentMapping(game, {"adversary_0": "red", "agent_0": "blue", "agent_1": "blue"}, agent_id=True)
    pis = {g: pb.MLPPolicy(mapping.group_game(g), hidden=(8,), seed=i) for i, g in enumerate(mapping.groups)}
    ref, out = _collect(game, pis, "instances", mapping, steps=20), _collect(game, pis, "numpy", mapping, steps=20)
    for g in ("red", "blue"):
        assert_same_fields(ref[g], out[g])


def test_gymnasium_routes_give_the_instances_routes_data():
    pend = pb.load_game("gym:Pendulum-v1", max_episode_steps=12)
    pi = {"player_0": pb.policies.GaussianPolicy(pend, hidden=(8,), seed=0)}
    ref = _collect(pend, pi, "instances", steps=60)["player_0"]
    for route in ("numpy", "sync_vector"):
        assert_same_fields(ref, _collect(pend, pi, route, steps=60)["player_0"])
    cart = pb.load_game("gym:CartPole-v1")
    pi = {"player_0": pb.MLPPolicy(cart, hidden=(8,), seed=0)}
    assert_same_fields(_collect(cart, pi, "instances", steps=120)["player_0"], _collect(cart, pi, "sync_vector", steps=120)["player_0"])
    assert available_steppers(cart)[0] == "vector_entry_point" and available_steppers(pend)[0] == "numpy"


def test_native_vector_route_keeps_episodes_apart_across_its_own_resets():
    cart = pb.load_game("gym:CartPole-v1", max_episode_steps=14)
    pi = {"player_0": pb.MLPPolicy(cart, hidden=(8,), seed=0)}
    tr = _collect(cart, pi, "auto", steps=150)["player_0"]
    assert tr.steps == len(tr) == tr.episode_lengths.sum() >= 150
    np.testing.assert_array_equal(tr.episode_seeds, -1)  # started by the vector env's own generator
    np.testing.assert_array_equal(tr.reward, 1.0)
    last = tr.time == tr.episode_lengths[tr.episode] - 1
    np.testing.assert_array_equal(tr.done, last)
    np.testing.assert_array_equal(tr.truncated, last & (tr.time == 13))
    assert tr.terminated.any() and tr.truncated.any() and not (tr.terminated & tr.truncated).any()
    first = tr.time == 0
    assert np.all(np.abs(tr.obs[first]) <= 0.05), "every episode starts from a fresh reset"
    follow = ~tr.done[:-1]
    np.testing.assert_array_equal(tr.next_obs[:-1][follow], tr.obs[1:][follow])  # no reset leaks into an episode
    np.testing.assert_array_equal(tr.next_obs[tr.terminated], 0.0)
    assert np.abs(tr.next_obs[tr.truncated]).sum() > 0


@pytest.mark.parametrize("stepper", ["instances", "auto"])
def test_whole_episodes_false_collects_exactly_the_steps_asked(stepper):
    """A whole-episode collect returns at least `steps` (overshooting on long episodes); whole_episodes=False exactly."""
    cart = pb.load_game("gym:CartPole-v1")
    pi = {"player_0": pb.MLPPolicy(cart, hidden=(8,), seed=0)}
    whole = _collect(cart, pi, stepper, steps=301)["player_0"]
    assert whole.steps > 301 and whole.done[-1] and not whole.truncated.any()
    exact = _collect(cart, pi, stepper, steps=301, whole_episodes=False)["player_0"]
    assert exact.steps == len(exact) == exact.episode_lengths.sum() == 301
    last = exact.time == exact.episode_lengths[exact.episode] - 1
    np.testing.assert_array_equal(exact.done, last)
    cut = exact.truncated  # CartPole's time limit (500) is never reached here: every truncation is a cut
    assert cut.sum() >= 1 and not (cut & exact.terminated).any()
    assert np.abs(exact.next_obs[cut]).sum() > 0 and not exact.next_legal_mask[cut].any()
    np.testing.assert_allclose(exact.episode_returns[:, 0], exact.episode_lengths)


def test_bad_stepper_names_what_is_available():
    cart = pb.load_game("gym:CartPole-v1")
    with pytest.raises(ValueError, match=r"unknown stepper 'fast'; use one of \('auto', 'numpy'"):
        pb.RolloutPool(cart, stepper="fast")
    with pytest.raises(ValueError, match=r"'numpy' is not available for 'gym:CartPole-v1'; available: "
                                         r"\['vector_entry_point', 'sync_vector', 'instances'\]"):
        pb.RolloutPool(cart, stepper="numpy")
    with pb.RolloutPool(cart, seed=0) as pool:
        with pytest.raises(TypeError, match="whole_episodes must be True or False, got 'no'"):
            pool.collect(policies={"player_0": pb.MLPPolicy(cart, hidden=(4,))}, steps=10, whole_episodes="no")


@pytest.mark.ray
def test_local_and_ray_agree_on_the_native_vector_route(ray_session):
    cart = pb.load_game("gym:CartPole-v1", max_episode_steps=20)
    pi = {"player_0": pb.MLPPolicy(cart, hidden=(8,), seed=0)}
    kwargs = dict(policies=pi, steps=120, seed=3)
    with pb.RolloutPool(cart, envs_per_worker=4, unit_steps=30, seed=0) as pool:
        local = pool.collect(**kwargs)["player_0"]
    with pb.RolloutPool(cart, backend="ray", num_workers=2, envs_per_worker=4, unit_steps=30, seed=0) as pool:
        remote = pool.collect(**kwargs)["player_0"]
    assert_same_fields(local, remote)
