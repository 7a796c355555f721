"""Contract cases of MARL (see run_cases.py): MAPPO, QMIX and MADDPG groups on tiny budgets."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb

SPREAD = "pettingzoo:simple_spread_v3(N=2, max_cycles=10)"
SPREAD_BOX = "pettingzoo:simple_spread_v3(N=2, max_cycles=5, continuous_actions=True)"


def _marl(make: Any) -> Any:
    def build(game: Any, **options: Any) -> pb.MARL:
        game = pb.load_game(game) if isinstance(game, str) else game
        return pb.MARL(game, {"shared": make()}, pb.AgentMapping.shared(game, agent_id=True), seed=0, num_envs=2,
                       **options)

    return build


CASES = {
    "MARL": Case(SPREAD, _marl(lambda: pb.MAPPO(seed=0, steps_per_round=40, epochs=2, hidden=(16,))), "num_env"),
    "MARL-QMIX": Case(SPREAD, _marl(lambda: pb.QMIX(seed=0, steps_per_round=40, hidden=(16,), batch_episodes=2,
                                                    updates_per_round=2, target_update=2)), "num_thread"),
    "MARL-MADDPG": Case(SPREAD_BOX, _marl(lambda: pb.MADDPG(seed=0, steps_per_round=20, hidden=(16,), batch_size=8,
                                                            learning_starts=10, updates_per_round=2)), "num_envz"),
}
