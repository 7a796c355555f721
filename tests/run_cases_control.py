"""Contract cases of the control learners (see run_cases.py): SAC, TD3, DDPG, HDDPG, Rainbow and Ape-X DDPG."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb

#: tiny networks and budgets: a round is one Pendulum episode (200 steps) or a few CartPole ones, with an
#: update every 4 env steps
SMALL = {"budget": 400, "steps_per_round": 100, "learning_starts": 50, "hidden": (16, 16), "batch_size": 16,
         "buffer_size": 1000, "train_freq": 4}


def _seeded(cls: Any, **fixed: Any) -> Any:
    return lambda game, **kw: cls(game, seed=0, **{**SMALL, **fixed, **kw})


CASES = {
    "SAC": Case("gym:Pendulum-v1", _seeded(pb.SAC), "learning_start"),
    "TD3": Case("gym:Pendulum-v1", _seeded(pb.TD3), "policy_dealy"),
    "DDPG": Case("gym:Pendulum-v1", _seeded(pb.DDPG, noise="ornstein_uhlenbeck", buffer_size=300), "noise_sgima"),
    "HDDPG": Case("gym:Pendulum-v1", _seeded(pb.HDDPG, prioritized=True, buffer_size=300), "q_decrease"),
    # a buffer smaller than the run: later rounds overwrite rows, which an interrupted round must put back
    "Rainbow": Case("gym:CartPole-v1", _seeded(pb.Rainbow, buffer_size=120, learning_starts=30,
                                               target_update_interval=20), "n_steps"),
    "ApeXDDPG": Case("gym:Pendulum-v1", _seeded(pb.learners.ApeXDDPG, actors=1, backend="local", buffer_size=300), "actor"),
}
