"""Control learners as PSRO oracles on games of several seats (`pbmarl.learners.control.seat_oracle`), tiny budgets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.learners.control.ddpg import DDPG
from pbmarl.learners.control.rainbow import Rainbow
from pbmarl.learners.control.sac import SAC
from pbmarl.learners.control.td3 import TD3
from pbmarl.protocols import Oracle

TINY = {"hidden": (16,), "batch_size": 16, "learning_starts": 20, "buffer_size": 1_000, "num_envs": 2}


def test_rainbow_answers_a_fixed_opponent_in_a_matrix_game_with_the_exact_best_response() -> None:
    # payoffs to the row player (zero-sum); against a uniform row player the column player's expected
    # payoffs are -(3+1+2)/3 = -2, -(0+2+1)/3 = -1 and -(-1-3-2)/3 = +2: column 2 is the best response
    game = pb.MatrixGame([[3, 0, -1], [1, 2, -3], [2, 1, -2]])
    oracle = Rainbow(game, seed=0, budget=200, steps_per_round=100, lr=3e-3, n_step=1, v_min=-3.0, v_max=3.0,
                     atoms=13, target_update_interval=20, eval_episodes=200, **TINY)
    assert isinstance(oracle, Oracle)
    answer = oracle.respond(1, [pb.RandomPolicy(game), None])
    assert answer.env_steps >= 200 and oracle.env_steps == answer.env_steps
    probs = answer.policy.action_probabilities(np.zeros((1, *game.observation_shape), np.float32),
                                               np.ones((1, 3), bool))
    assert probs.argmax() == 2
    assert answer.value == pytest.approx(2.0, abs=0.3)  # sampled row player: 200 episodes, std 0.8


@pytest.mark.parametrize("cls", [SAC, TD3, DDPG, Rainbow], ids=["sac", "td3", "ddpg", "rainbow-discrete"])
def test_learners_answer_one_seat_of_simple_adversary(cls: Any) -> None:
    continuous = cls is not Rainbow
    game = pb.load_game("pettingzoo:simple_adversary_v3", continuous_actions=continuous, max_cycles=5)
    extra = {} if continuous else {"v_min": -10.0, "v_max": 10.0, "atoms": 11}
    oracle = cls(game, seed=0, budget=60, steps_per_round=30, eval_episodes=4, **TINY, **extra)
    views = pb.AgentMapping.independent(game)
    rivals = [pb.policies.GaussianPolicy(game, (8,), player=p, seed=p) if continuous
              else pb.RandomPolicy(views.group_game(views.groups[p])) for p in range(3)]
    for seat, obs_width in ((0, 8), (1, 10)):  # the adversary sees 8 numbers, a good agent 10
        answer = oracle.respond(seat, [None if p == seat else rivals[p] for p in range(3)])
        if continuous:
            assert answer.policy.in_dim == obs_width and answer.policy.act_dim == 5
        else:
            assert answer.policy.observation_shape == (obs_width,) and answer.policy.num_actions == 5
        assert answer.env_steps >= 60 and np.isfinite(answer.value)
    assert oracle.responses == 2
    policy = oracle.best_response(2, [rivals[0], rivals[1], None], budget=30)
    assert tuple(policy.observation_shape) == (10,) and oracle.responses == 3


def test_several_seat_learner_is_an_oracle_only_and_checks_its_opponents() -> None:
    game = pb.load_game("pettingzoo:simple_adversary_v3", continuous_actions=True, max_cycles=5)
    sac = SAC(game, seed=0, budget=30, **TINY)
    with pytest.raises(ValueError, match=r"\(3 seats\) is an oracle only, so it has no step\(\)"):
        sac.step()
    with pytest.raises(ValueError, match="has no policy"):
        sac.policy()
    with pytest.raises(ValueError, match=r"opponents\[1\] \(agent 'agent_0'\) is None"):
        sac.respond(0, [None, None, None])
    with pytest.raises(ValueError, match=r"one entry per seat \(3\)"):
        sac.respond(0, [None])
    with pytest.raises(ValueError, match="budget must be a positive int"):
        sac.best_response(0, [None, None, None], budget=0)
    discrete = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
    with pytest.raises(ValueError, match="SAC needs Box or Discrete|DDPG needs Box actions; player 0 of"):
        DDPG(discrete)
