"""Every learner family implements pbmarl.protocols.PolicyLearner; the oracles and control learners RunLearner."""

from __future__ import annotations

import pbmarl as pb
from pbmarl.protocols import Oracle, PolicyLearner, RunLearner


def test_the_three_families_are_policy_learners_and_the_run_learners_are_oracles() -> None:
    kuhn = pb.load_game("kuhn_poker")
    oracles = [pb.DQN(kuhn, seed=0), pb.PPO(kuhn, seed=0), pb.A2C(kuhn, seed=0)]
    control = [pb.SAC(pb.load_game("gym:Pendulum-v1"), seed=0), pb.Rainbow(pb.load_game("gym:CartPole-v1"), seed=0)]
    group = [pb.MAPPO(), pb.QMIX(), pb.MADDPG(), pb.learners.Independent()]
    for learner in oracles + control:
        assert isinstance(learner, RunLearner) and isinstance(learner, Oracle), learner
    for learner in group:
        assert isinstance(learner, PolicyLearner) and not isinstance(learner, RunLearner), learner
