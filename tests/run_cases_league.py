"""Contract cases of the League and NFSP runs (see run_cases.py), on Kuhn poker with tiny budgets."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb


def _league(game: Any, **kw: Any) -> Any:
    return pb.League(game, seed=0, **{"snapshot_min_steps": 1, "snapshot_max_steps": 2, **kw})


def _league_dqn(game: Any, **kw: Any) -> Any:
    """A league whose agents train with DQN and play sampled matches: learners, pools and buffers in every step."""
    g = pb.load_game(game) if isinstance(game, str) else game
    dqn = pb.DQN(g, seed=0, budget=40, hidden=(8,), steps_per_round=20, learning_starts=20, num_envs=2,
                 eval_episodes=0)
    return pb.League(g, dqn, "rollout", seed=0, **{"main_exploiters": 1, "league_exploiters": 0,
                                                  "steps_per_match": 40, "match_episodes": 4,
                                                  "snapshot_min_steps": 40, "snapshot_max_steps": 80, **kw})


def _nfsp(game: Any, **kw: Any) -> Any:
    return pb.NFSP(game, seed=0, **{"episodes_per_step": 30, "min_buffer": 16, "batch_size": 8, "learn_every": 8,
                                    "hidden": (8,), **kw})


CASES = {
    "League": Case("kuhn_poker", _league, "main_exploiter"),
    "League[dqn]": Case("kuhn_poker", _league_dqn, "steps_per_matc"),
    "NFSP": Case("kuhn_poker", _nfsp, "episodes_per_stp"),
}
