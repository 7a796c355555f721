"""Contract cases of the RL oracle learners, trained on their own, and the distributed ones (see run_cases.py)."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb

CARTPOLE = "gym:CartPole-v1"
#: a round of a few short CartPole episodes: the contract's seven steps take well under a second each
TINY = {"budget": 2_000, "steps_per_round": 64, "num_envs": 2, "hidden": (16,)}


def _seeded(cls: Any, **fixed: Any) -> Any:
    return lambda game, **kw: cls(game, seed=0, **{**TINY, **fixed, **kw})


CASES = {
    "DQN": Case(CARTPOLE, _seeded(pb.DQN, learning_starts=64, updates_per_round=4, batch_size=16), "learning_start"),
    "PPO": Case(CARTPOLE, _seeded(pb.PPO), "clip_coeff"),
    "A2C": Case(CARTPOLE, _seeded(pb.A2C), "ent_coeff"),
    "A3C": Case(CARTPOLE, _seeded(pb.A3C, workers=2), "worker"),
    # ASP PPO: workers hold a batch's minibatch plan between steps (saved and restored with the jobs in flight)
    "PPO-ASP": Case(CARTPOLE, _seeded(pb.PPO, workers=2, sync="asp", epochs=2, minibatches=2), "sinc"),
    # Gorila DQN: workers fill the learner's replay and take gradients of the minibatches it sends with their jobs
    "DQN-ASP": Case(CARTPOLE, _seeded(pb.DQN, workers=2, sync="asp", learning_starts=64, updates_per_round=4,
                                      batch_size=16), "learning_start"),
    "IMPALA": Case(CARTPOLE, _seeded(pb.IMPALA, actors=2, steps_per_round=32), "rho_barr"),
    "ApeX": Case(CARTPOLE, _seeded(pb.ApeX, actors=2, steps_per_round=32, learning_starts=64, updates_per_round=4,
                                   batch_size=16), "publish_intervall"),
}
