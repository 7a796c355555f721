"""Learners: produce a new policy for a player against a mixture of opponents.

`ExactBestResponse` (no torch) is imported eagerly; the RL learners (`DQN`, `PPO`,
`A2C`, their configs, `Learner`, `make_learner`) load on first access, so
``import pbmarl.learners`` does not import torch.

Example:
    >>> import pbmarl
    >>> learner = pbmarl.learners.DQN(game, seed=0, budget=200)    # 20_000 to learn
    >>> br, value = learner.best_response_with_value(0, pop.mixture(sigma))
"""

from __future__ import annotations

import importlib
from typing import Any

from pbmarl.learners.exact import ExactBestResponse as ExactBestResponse

#: public name -> module that defines it (loaded lazily)
_LAZY: dict[str, str] = {
    "Learner": "pbmarl.learners.base",
    "LearnerConfig": "pbmarl.learners.base",
    "LearnerRecord": "pbmarl.learners.config",
    "StepRecord": "pbmarl.learners.base",
    "DQN": "pbmarl.learners.dqn",
    "DQNConfig": "pbmarl.learners.dqn",
    "DQNRecord": "pbmarl.learners.dqn",
    "PPO": "pbmarl.learners.ppo",
    "PPOConfig": "pbmarl.learners.ppo",
    "PPORecord": "pbmarl.learners.ppo",
    "A2C": "pbmarl.learners.a2c",
    "A2CConfig": "pbmarl.learners.a2c",
    "A2CRecord": "pbmarl.learners.a2c",
    "ReplayBuffer": "pbmarl.learners.buffers",
    "PrioritizedReplayBuffer": "pbmarl.learners.buffers",
    "make_learner": "pbmarl.learners.registry",
    "ControlLearner": "pbmarl.learners.control",
    "SAC": "pbmarl.learners.sac",
    "TD3": "pbmarl.learners.td3",
    "DDPG": "pbmarl.learners.ddpg",
    "HDDPG": "pbmarl.learners.hddpg",
    "Rainbow": "pbmarl.learners.rainbow",
    "LEARNERS": "pbmarl.learners.registry",
}

__all__ = sorted(["ExactBestResponse", *_LAZY])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pbmarl.learners' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
