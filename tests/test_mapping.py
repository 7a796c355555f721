"""AgentMapping: groups, lookups, padding and agent-id features, and dispatch of rows to policies."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.policies.base import Policy
from pbmarl.rollout.mapping import AgentIdFeature, PadObservation


@pytest.fixture(scope="module")
def spread():
    return pb.load_game("pettingzoo:simple_spread_v3", max_cycles=5)


@pytest.fixture(scope="module")
def adversary():
    return pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)


def test_independent_shared_dict_and_callable(spread):
    ind = pb.AgentMapping.independent(spread)
    assert ind.groups == ("agent_0", "agent_1", "agent_2")
    assert [ind[a] for a in spread.agents] == spread.agents
    shared = pb.AgentMapping.shared(spread)
    assert shared.groups == ("shared",) and shared.agents_of("shared") == tuple(spread.agents)
    m = pb.AgentMapping(spread, {"agent_0": "a", "agent_1": "b", "agent_2": "a"})
    assert m.groups == ("a", "b") and m.agents_of("a") == ("agent_0", "agent_2") and m.seats_of("a") == (0, 2)
    c = pb.AgentMapping(spread, lambda agent: "lead" if agent == "agent_0" else "rest")
    assert c.groups == ("lead", "rest") and c["agent_2"] == "rest"
    assert pb.AgentMapping.from_spec(spread, m.spec()) == m


def test_mapping_that_misses_or_invents_an_agent_is_refused(spread):
    with pytest.raises(ValueError, match=r"misses agent\(s\) \['agent_2'\]"):
        pb.AgentMapping(spread, {"agent_0": "a", "agent_1": "a"})
    with pytest.raises(ValueError, match="agent 'agent_9'.*agents are"):
        pb.AgentMapping(spread, {"agent_0": "a", "agent_1": "a", "agent_2": "a", "agent_9": "a"})
    with pytest.raises(KeyError, match="'nobody' is not an agent"):
        pb.AgentMapping.shared(spread)["nobody"]


def test_agent_id_appends_a_one_hot_within_the_group(spread):
    m = pb.AgentMapping.shared(spread, agent_id=True)
    view = m.group_game("shared")
    assert view.observation_shape == (18 + 3,) and view.num_actions == 5
    out = AgentIdFeature(3)(np.ones((2, 4), np.float32), np.array([2, 0]))
    np.testing.assert_array_equal(out[:, 4:], [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(PadObservation(5)(np.ones((1, 3), np.float32), np.zeros(1, int)), [[1, 1, 1, 0, 0]])
    assert pb.AgentMapping.independent(spread, agent_id=True).group_game("agent_0").observation_shape == (18,)


def test_different_shapes_in_one_group_need_pad(adversary):
    widths = [int(np.prod(adversary.observation_space(p).shape)) for p in range(3)]
    assert widths[0] != widths[1], "simple_adversary_v3 gives the adversary a smaller observation"
    with pytest.raises(ValueError, match="different observation sizes.*pad=True"):
        pb.AgentMapping.shared(adversary)
    padded = pb.AgentMapping.shared(adversary, pad=True)
    assert padded.group_game("shared").observation_shape == (max(widths),)


class SpyPolicy(Policy):
    """Uniform over legal actions; remembers every batch of observations it was handed."""

    kind = "test_spy"

    def __init__(self, game) -> None:
        super().__init__(game)
        self.seen: list[np.ndarray] = []

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        self.seen.append(np.array(obs, copy=True))
        return legal_mask.astype(float)


def _rows(a: np.ndarray) -> list[bytes]:
    return sorted(r.tobytes() for r in np.ascontiguousarray(a, dtype=np.float32))


def test_each_agents_rows_reach_its_groups_policy_and_no_other(spread):
    m = pb.AgentMapping(spread, {"agent_0": "solo", "agent_1": "pair", "agent_2": "pair"}, agent_id=True)
    spies = {g: SpyPolicy(m.group_game(g)) for g in m.groups}
    with pb.RolloutPool(spread, envs_per_worker=3, seed=0) as pool:
        out = pool.collect(policies=spies, mapping=m, steps=20, seed=1)
    solo, pair = out["solo"], out["pair"]
    assert set(solo.agent.tolist()) == {0} and set(pair.agent.tolist()) == {1, 2}
    # what each policy saw is exactly its group's rows, no more, no fewer
    assert _rows(np.concatenate(spies["solo"].seen)) == _rows(solo.obs)
    assert _rows(np.concatenate(spies["pair"].seen)) == _rows(pair.obs)
    # one forward pass per group per step: as many calls as env steps, each over all instances
    steps_per_call = solo.steps // len(spies["solo"].seen)
    assert len(spies["solo"].seen) == len(spies["pair"].seen) and steps_per_call == 3
    assert all(len(b) == 2 * 3 for b in spies["pair"].seen)
    # the agent-id one-hot names the row's agent within the pair
    np.testing.assert_array_equal(pair.obs[:, -2:], np.eye(2)[pair.agent - 1])
