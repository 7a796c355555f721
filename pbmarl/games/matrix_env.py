"""A `MatrixGame` as a PettingZoo Parallel environment, so the multi-agent rollout layer can step it.

Each episode is one simultaneous move (``rounds`` of them on request): every agent
sees its one-hot seat, picks an action, and receives its payoff. This is how the
cooperative matrix games of the MARL literature (the climbing game of Claus &
Boutilier 1998, the penalty game) are played by `pb.MARL`.

Example:
    >>> climbing = pb.MatrixGame([CLIMBING, CLIMBING], name="climbing")
    >>> game = parallel_matrix_game(climbing)       # steppable by pool.collect(policies=...) and pb.MARL
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pbmarl.games.matrix import MatrixGame
from pbmarl.games.pettingzoo import PettingZooGame

#: the climbing game's common payoff (Claus & Boutilier 1998); the optimum is (0, 0) with 11
CLIMBING = ((11.0, -30.0, 0.0), (-30.0, 7.0, 6.0), (0.0, 0.0, 5.0))


class MatrixParallelEnv:
    """PettingZoo Parallel API over a `MatrixGame` (duck-typed: PettingZoo's ParallelEnv needs no base class)."""

    metadata: dict[str, Any] = {"name": "matrix_parallel_v0", "is_parallelizable": True}

    def __init__(self, game: MatrixGame, rounds: int = 1) -> None:
        from gymnasium import spaces

        self.game = game
        self.rounds = int(rounds)
        self.possible_agents = list(game.agents)
        self.agents: list[str] = []
        self._obs = {a: spaces.Box(0.0, 1.0, shape=(game.num_players,), dtype=np.float32) for a in self.possible_agents}
        self._act = {a: spaces.Discrete(int(n)) for a, n in zip(self.possible_agents, game.action_counts)}
        self._t = 0

    def observation_space(self, agent: str) -> Any:
        return self._obs[agent]

    def action_space(self, agent: str) -> Any:
        return self._act[agent]

    def _observe(self) -> dict[str, np.ndarray]:
        return {a: np.eye(self.game.num_players, dtype=np.float32)[p] for p, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self.agents = list(self.possible_agents)
        self._t = 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float], dict[str, bool],
                                                     dict[str, bool], dict[str, Any]]:
        joint = tuple(int(actions[a]) for a in self.possible_agents)
        pay = self.game.payoffs[joint]
        self._t += 1
        over = self._t >= self.rounds
        rewards = {a: float(pay[p]) for p, a in enumerate(self.possible_agents)}
        terms = {a: over for a in self.possible_agents}
        truncs = {a: False for a in self.possible_agents}
        obs = self._observe()
        if over:
            self.agents = []
        return obs, rewards, terms, truncs, {a: {} for a in self.possible_agents}

    def close(self) -> None:
        pass


def parallel_matrix_game(game: MatrixGame, *, rounds: int = 1) -> PettingZooGame:
    """`game` as a Parallel PettingZoo game under the same name (so mappings made for `game` still fit)."""
    if not isinstance(game, MatrixGame):
        raise TypeError(f"parallel_matrix_game takes a pb.MatrixGame, got {type(game).__name__}")
    if int(rounds) < 1:
        raise ValueError(f"rounds must be a positive int, got {rounds!r}")
    out = PettingZooGame(f"{game.name}_parallel", lambda: MatrixParallelEnv(game, rounds), api="parallel",
                         env_kwargs={}, default_api="parallel")
    out.name = game.name
    out.zero_sum = game.zero_sum
    return out
