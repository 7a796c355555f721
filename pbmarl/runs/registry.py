"""Run types by name: what ``run.json``'s ``type`` may say, and where that class lives.

A fixed table, never a module path read from a file: loading a folder imports only pbmarl's own modules.
"""

from __future__ import annotations

import importlib
from typing import Any

from pbmarl.config import did_you_mean

#: run type -> module that defines it
RUN_TYPES: dict[str, str] = {
    "PSRO": "pbmarl.algorithms.psro.psro",
    "SelfPlay": "pbmarl.algorithms.psro.psro",
    "FictitiousPlay": "pbmarl.algorithms.psro.psro",
    "XDO": "pbmarl.algorithms.xdo",
    "MMD": "pbmarl.algorithms.mmd",
    "PPOSelfPlay": "pbmarl.algorithms.selfplay.ppo",
    "DeepMMD": "pbmarl.algorithms.selfplay.deep_mmd",
    "JPSRO": "pbmarl.algorithms.jpsro",
    "P2SRO": "pbmarl.algorithms.psro.p2sro",
    "League": "pbmarl.algorithms.league.league",
    "NFSP": "pbmarl.algorithms.nfsp",
    "MARL": "pbmarl.algorithms.teams.marl",
    "DQN": "pbmarl.learners.oracles.dqn",
    "PPO": "pbmarl.learners.oracles.ppo",
    "A2C": "pbmarl.learners.oracles.a2c",
    "SAC": "pbmarl.learners.control.sac",
    "TD3": "pbmarl.learners.control.td3",
    "DDPG": "pbmarl.learners.control.ddpg",
    "HDDPG": "pbmarl.learners.control.hddpg",
    "Rainbow": "pbmarl.learners.control.rainbow",
    "A3C": "pbmarl.learners.oracles.a3c",
    "IMPALA": "pbmarl.learners.oracles.impala",
    "ApeX": "pbmarl.learners.oracles.apex",
    "ApeXDDPG": "pbmarl.learners.control.apex_ddpg",
}


def run_class(name: Any) -> type:
    """The run class registered under `name`; an unknown name raises ValueError with a suggestion."""
    if not isinstance(name, str) or name not in RUN_TYPES:
        raise ValueError(f"unknown run type {name!r}{did_you_mean(name, RUN_TYPES)} "
                         f"Known run types: {', '.join(RUN_TYPES)}")
    cls: type = getattr(importlib.import_module(RUN_TYPES[name]), name)
    return cls


def type_name(run: Any) -> str:
    """The registered name of `run`'s class (its own, or the nearest registered base's)."""
    for cls in type(run).__mro__:
        if RUN_TYPES.get(cls.__name__) == cls.__module__:
            return cls.__name__
    raise ValueError(f"{type(run).__name__} is not a registered run type; add it to pbmarl.runs.registry.RUN_TYPES")
