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

from pbmarl.lazy import lazy_exports
from pbmarl.learners.oracles.exact import ExactBestResponse as ExactBestResponse

#: public name -> module that defines it (loaded lazily)
_LAZY: dict[str, str] = {
    "Learner": "pbmarl.learners.oracles.base",
    "LearnerConfig": "pbmarl.learners.oracles.base",
    "LearnerRecord": "pbmarl.learners.common.config",
    "StepRecord": "pbmarl.learners.oracles.base",
    "DQN": "pbmarl.learners.oracles.dqn",
    "DQNConfig": "pbmarl.learners.oracles.dqn",
    "DQNRecord": "pbmarl.learners.oracles.dqn",
    "PPO": "pbmarl.learners.oracles.ppo",
    "PPOConfig": "pbmarl.learners.oracles.ppo",
    "PPORecord": "pbmarl.learners.oracles.ppo",
    "A2C": "pbmarl.learners.oracles.a2c",
    "A2CConfig": "pbmarl.learners.oracles.a2c",
    "A2CRecord": "pbmarl.learners.oracles.a2c",
    "ReplayBuffer": "pbmarl.learners.common.buffers",
    "PrioritizedReplayBuffer": "pbmarl.learners.common.buffers",
    "make_learner": "pbmarl.learners.common.registry",
    "ControlLearner": "pbmarl.learners.control.base",
    "SAC": "pbmarl.learners.control.sac",
    "TD3": "pbmarl.learners.control.td3",
    "DDPG": "pbmarl.learners.control.ddpg",
    "HDDPG": "pbmarl.learners.control.hddpg",
    "Rainbow": "pbmarl.learners.control.rainbow",
    "LEARNERS": "pbmarl.learners.common.registry",
    "GroupLearner": "pbmarl.learners.multiagent.group",
    "SACConfig": "pbmarl.learners.control.sac",
    "TD3Config": "pbmarl.learners.control.td3",
    "DDPGConfig": "pbmarl.learners.control.ddpg",
    "HDDPGConfig": "pbmarl.learners.control.hddpg",
    "RainbowConfig": "pbmarl.learners.control.rainbow",
    "IPPO": "pbmarl.learners.multiagent.mappo",
    "RMAPPO": "pbmarl.learners.multiagent.mappo",
    "MAPPOConfig": "pbmarl.learners.multiagent.mappo",
    "IQL": "pbmarl.learners.multiagent.qmix",
    "QMIXConfig": "pbmarl.learners.multiagent.qmix",
    "MADDPGConfig": "pbmarl.learners.multiagent.maddpg",
    "Independent": "pbmarl.learners.multiagent.independent",
    "IndependentConfig": "pbmarl.learners.multiagent.independent",
    "independent_learners": "pbmarl.learners.multiagent.independent",
    "IMPALAConfig": "pbmarl.learners.oracles.impala",
    "ApeXConfig": "pbmarl.learners.oracles.apex",
    "apex_epsilons": "pbmarl.learners.oracles.apex",
    "ApeXDDPG": "pbmarl.learners.control.apex_ddpg",
    "MAPPO": "pbmarl.learners.multiagent.mappo",
    "QMIX": "pbmarl.learners.multiagent.qmix",
    "MADDPG": "pbmarl.learners.multiagent.maddpg",
    "A3C": "pbmarl.learners.oracles.a3c",
    "IMPALA": "pbmarl.learners.oracles.impala",
    "ApeX": "pbmarl.learners.oracles.apex",
}

__all__ = sorted(["ExactBestResponse", *_LAZY])


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
