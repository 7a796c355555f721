"""rMAPPO (`MAPPO(recurrent=True)`): GRU actor and critic whose training unroll matches what play did."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from run_checks import marl_straight_and_resumed

import pbmarl as pb
from pbmarl.learners.multiagent.episode_batch import sequence_grid, unroll
from pbmarl.policies.base import new_policy_from_state
from pbmarl.policies.recurrent import RecurrentNet, RecurrentPolicy


@pytest.fixture(scope="module")
def spread() -> pb.games.Game:
    return pb.load_game("pettingzoo:simple_spread_v3", N=3, local_ratio=0.5, max_cycles=6)


def _trained(spread: pb.games.Game, **options: object) -> tuple[pb.MARL, pb.AgentMapping]:
    mapping = pb.AgentMapping.shared(spread, agent_id=True)
    marl = pb.MARL(spread, {"shared": pb.MAPPO(seed=0, recurrent=True, steps_per_round=72, epochs=2, **options)},
                   mapping, seed=1, num_envs=4)
    marl.run(2, progress=False)
    return marl, mapping


def test_the_actor_carries_a_hidden_state_per_instance(spread: pb.games.Game) -> None:
    """The same observation after different histories gets different probabilities; a reset forgets the history;
    instances do not share states; without ids a row is an episode's first step."""
    marl, mapping = _trained(spread)
    pi = marl.learners["shared"].behaviour()
    assert isinstance(pi, RecurrentPolicy)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(2, pi.in_dim)).astype(np.float32)
    mask = np.ones((2, spread.num_actions), bool)
    pi.reset_state(None)
    first = pi.step_probabilities(obs, mask, np.array([0, 1]))
    np.testing.assert_allclose(first, pi.action_probabilities(obs, mask), atol=1e-6)
    pi.step_probabilities(obs[::-1].copy(), mask, np.array([0, 1]))   # instance 0 now saw obs[1], instance 1 obs[0]
    again = pi.step_probabilities(obs, mask, np.array([0, 1]))
    assert np.abs(again - first).max() > 1e-4
    pi.reset_state([1])
    after_reset = pi.step_probabilities(obs[1:], mask[1:], np.array([1]))
    np.testing.assert_allclose(after_reset[0], first[1], atol=1e-6)


def test_training_unroll_reproduces_the_log_probabilities_recorded_in_play(spread: pb.games.Game) -> None:
    """Before an update the PPO ratio is exactly 1: the whole-episode unroll gives what the step-by-step actor
    gave, and the recurrent critic's value of a row's next input is the value of the next row."""
    marl, mapping = _trained(spread)
    mappo = marl.learners["shared"]
    pool = pb.RolloutPool(spread, envs_per_worker=3)
    rows = pool.collect(policies={"shared": mappo.behaviour()}, mapping=mapping, steps=40, seed=3)["shared"]
    grid, valid = sequence_grid(rows)
    assert grid.shape[1] == 6 and valid.sum() == len(rows)           # one sequence per (episode, agent)
    assert set(np.unique(rows.agent[grid[:, 0]])) == {0, 1, 2}
    with torch.no_grad():
        logits, _, k = unroll(mappo.actor.net, torch.as_tensor(rows.obs), grid, valid)
        logp = torch.log_softmax(logits, -1).gather(1, torch.as_tensor(rows.action[k])[:, None]).squeeze(1)
    np.testing.assert_allclose(logp.double().numpy(), rows.log_prob[k], atol=1e-5)
    x, next_x = mappo.critic_inputs(rows)
    value, next_value = (mappo._in_return_units(r) for r in mappo._critic_outputs(x, next_x, (grid, valid)))
    inner = np.flatnonzero(~rows.done[:-1])
    np.testing.assert_allclose(next_value[inner], value[inner + 1], atol=1e-5)
    # the critic reads history: the same input valued from a zero state and from the state after 3 steps differs
    critic = mappo.critic
    assert isinstance(critic, RecurrentNet)
    with torch.no_grad():
        row = torch.as_tensor(x[grid[:1, 3]])
        _, later = critic(torch.as_tensor(x[grid[:1, :3]]), critic.initial(1))
        assert abs(float(critic.step(row, critic.initial(1))[0]) - float(critic.step(row, later[:, -1])[0])) > 1e-4


def test_recurrent_mappo_save_resume_gives_the_same_history(tmp_path, spread: pb.games.Game) -> None:
    def make() -> pb.MARL:
        return pb.MARL(spread, {"shared": pb.learners.RMAPPO(seed=3, steps_per_round=36, epochs=2, value_clip=True)},
                       pb.AgentMapping.shared(spread, agent_id=True), seed=5, num_envs=3)

    straight, resumed = marl_straight_and_resumed(make, tmp_path / "run")
    assert type(resumed.learners["shared"]) is pb.learners.RMAPPO and resumed.learners["shared"].config.recurrent
    cols = [c for c in straight.history.columns if not c.startswith(("wall_time", "time/"))]
    pd.testing.assert_frame_equal(straight.history[cols], resumed.history[cols])
    pd.testing.assert_series_equal(resumed.evaluate(6, deterministic=True).mean,
                                   straight.evaluate(6, deterministic=True).mean)


def test_recurrent_policy_files_round_trip(spread: pb.games.Game) -> None:
    marl, mapping = _trained(spread)
    pi = marl.learners["shared"].policy()
    assert isinstance(pi, RecurrentPolicy)
    back = new_policy_from_state(mapping.group_game("shared"), pi.arrays(), pi.meta())
    assert isinstance(back, RecurrentPolicy) and back.hidden == pi.hidden
    obs = np.random.default_rng(1).normal(size=(5, 3, pi.in_dim)).astype(np.float32)
    mask = np.ones((3, spread.num_actions), bool)
    for p in (pi, back):
        p.reset_state(None)
    for t in range(5):
        np.testing.assert_array_equal(pi.step_probabilities(obs[t], mask, np.arange(3)),
                                      back.step_probabilities(obs[t], mask, np.arange(3)))


def test_recurrent_options_are_checked() -> None:
    from pbmarl.algorithms.teams.marl import make_group_learner

    assert pb.learners.RMAPPO().config.recurrent and not pb.MAPPO().config.recurrent
    assert type(make_group_learner("rmappo")) is pb.learners.RMAPPO
    with pytest.raises(ValueError, match="recurrent must be True or False, got 'yes'"):
        pb.MAPPO(recurrent="yes")
    with pytest.raises(ValueError, match=r"at least one hidden layer before its GRU, got hidden=\(\)"):
        RecurrentNet(4, (), 2)
    game = pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5)
    with pytest.raises(ValueError, match="MAPPO .* needs Discrete actions"):
        pb.MARL(game, {"team": pb.MAPPO(recurrent=True)})
