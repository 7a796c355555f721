"""PSRO over team games: one population per group, group learners as oracles, group payoffs."""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.algorithms.teams.oracle import team_psro
from pbmarl.algorithms.teams.team_game import TeamEvaluator, TeamGame


def test_team_payoffs_are_the_groups_summed_returns_exactly() -> None:
    """A 3-player matrix game, player 0 in group red, players 1 and 2 in group blue: the table cell of pure
    actions (a, b) is (u0(a, b, b), u1(a, b, b) + u2(a, b, b)), with zero standard error."""
    payoffs = np.random.default_rng(0).integers(-5, 6, size=(2, 2, 2, 3)).astype(float)
    game = pb.MatrixGame(payoffs, name="three")
    mapping = pb.AgentMapping(game, {"player_0": "red", "player_1": "blue", "player_2": "blue"})
    team = TeamGame(game, mapping)
    assert team.num_players == 2 and team.agents == ["red", "blue"]
    pop = pb.Population(team)
    for p, view in enumerate(team.views):
        for a in range(2):
            pop.add(p, pb.policies.FixedPolicy.pure(view, a))
    table = pb.PayoffTable(pop)
    fill = TeamEvaluator(team, num_envs=4).fill(table, 3, seed=0)
    assert fill.cells == 4 and fill.steps == 4 * 3
    for a in range(2):
        for b in range(2):
            u = payoffs[a, b, b]
            np.testing.assert_allclose(table.values[a, b], [u[0], u[1] + u[2]])
    assert np.all(table.stderr == 0) and np.all(table.counts == 3)
    with pytest.raises(ValueError, match="same Discrete space"):
        TeamGame(pb.load_game("pettingzoo:simple_spread_v3", N=2, continuous_actions=True, max_cycles=5),
                 pb.AgentMapping.independent(pb.load_game("pettingzoo:simple_spread_v3", N=2,
                                                          continuous_actions=True, max_cycles=5)))


def test_psro_on_simple_adversary_keeps_one_population_per_group() -> None:
    game = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
    mapping = pb.AgentMapping(game, {"adversary_0": "adversary", "agent_0": "agents", "agent_1": "agents"})
    psro = team_psro(game, mapping, lambda s: pb.MAPPO(seed=s, steps_per_round=40, epochs=1), steps=40,
                     eval_episodes=6, num_envs=4, seed=1)
    record = psro.step()
    assert psro.population.sizes == (2, 2) and record.iteration == 1
    adversaries, agents = psro.population[0], psro.population[1]
    assert [pi.observation_shape for pi in adversaries] == [(8,), (8,)]      # the adversary's own observation
    assert [pi.observation_shape for pi in agents] == [(10,), (10,)]         # the good agents' observation
    assert isinstance(adversaries[1], pb.MLPPolicy) and isinstance(agents[1], pb.MLPPolicy)
    values = psro.table.values
    assert values.shape == (2, 2, 2) and np.isfinite(values).all()
    assert np.all(psro.table.counts == 6)
    # the table's cells are the evaluator's group returns for those members
    again, _ = TeamEvaluator(psro.game, num_envs=4).returns([adversaries[1], agents[0]], 200, 5)
    se = np.sqrt(psro.table.stderr[1, 0] ** 2 + again.std(axis=0) ** 2 / 200)
    assert np.all(np.abs(values[1, 0] - again.mean(axis=0)) < 4 * se + 1e-6)
    assert sum(psro.meta_strategy[0]) == pytest.approx(1.0) and len(psro.meta_strategy[1]) == 2
    # a policy sized for the other group is refused, naming the group
    with pytest.raises(ValueError, match="group 'adversary'"):
        TeamEvaluator(psro.game).returns([agents[0], agents[0]], 2, 0)
