"""One environment instance behind one small interface, for the parallel engine.

PettingZoo Parallel environments already speak it (dicts keyed by agent); a
Gymnasium environment (and an ``mdp:`` game's env) becomes a one-agent Parallel environment. The engine steps
many of these itself (pbmarl's batch stepper): `benchmarks/env_throughput.py`
measures it against Gymnasium's `SyncVectorEnv` in the same run.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pbmarl.games.base import Game

#: reset and step answers, keyed by agent name
Obs = dict[str, Any]


class EnvInstance(Protocol):
    """One environment instance, Parallel-API style."""

    observation_spaces: dict[str, Any]

    def reset(self, seed: int) -> tuple[Obs, dict[str, Any]]: ...
    def step(self, actions: dict[str, Any]) -> tuple[Obs, dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]: ...
    def live_agents(self) -> list[str]: ...
    def state(self) -> np.ndarray: ...


class ParallelInstance:
    """A PettingZoo Parallel environment; observations of dict spaces use their ``"observation"`` part."""

    def __init__(self, env: Any, agents: list[str]) -> None:
        from gymnasium import spaces

        self.env = env
        self.observation_spaces = {}
        for agent in agents:
            space = env.observation_space(agent)
            if isinstance(space, spaces.Dict) and "observation" in space.spaces:
                space = space["observation"]
            self.observation_spaces[agent] = space

    def reset(self, seed: int) -> tuple[Obs, dict[str, Any]]:
        obs, infos = self.env.reset(seed=seed)
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[Obs, dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return obs, rewards, terms, truncs, infos

    def live_agents(self) -> list[str]:
        return list(self.env.agents)

    def state(self) -> np.ndarray:
        return np.asarray(self.env.state(), dtype=np.float32).ravel()


class GymInstance:
    """A Gymnasium environment as a one-agent Parallel environment."""

    def __init__(self, env: Any, agent: str, space: Any) -> None:
        self.env = env
        self.agent = agent
        self.observation_spaces = {agent: space}
        self._live = False

    def reset(self, seed: int) -> tuple[Obs, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed)
        self._live = True
        return {self.agent: obs}, {self.agent: info}

    def step(self, actions: dict[str, Any]) -> tuple[Obs, dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        a = self.agent
        obs, reward, terminated, truncated, info = self.env.step(actions[a])
        self._live = not (terminated or truncated)
        return {a: obs}, {a: float(reward)}, {a: bool(terminated)}, {a: bool(truncated)}, {a: info}

    def live_agents(self) -> list[str]:
        return [self.agent] if self._live else []

    def state(self) -> np.ndarray:
        raise ValueError("Gymnasium environments have no global state apart from the observation")


def make_instance(game: Game) -> EnvInstance:
    """A fresh instance of `game` for the parallel engine.

    Raises:
        ValueError: for games that are not PettingZoo Parallel or Gymnasium environments.
    """
    from pbmarl.games.gym import GymGame
    from pbmarl.games.mdp import MDPGame
    from pbmarl.games.pettingzoo import PettingZooGame

    if isinstance(game, (GymGame, MDPGame)):
        env = game.make_env()
        return GymInstance(env, game.agents[0], env.observation_space)
    if isinstance(game, PettingZooGame) and game.api == "parallel":
        return ParallelInstance(game.make_env(), list(game.agents))
    raise ValueError(
        f"multi-agent collection steps PettingZoo Parallel, Gymnasium and mdp: environments; {game.name!r} is neither. "
        "Use collect(player, policy, opponents, steps) for turn-based games"
    )


def parallel_capable(game: Game) -> bool:
    """Whether `make_instance` accepts `game`."""
    from pbmarl.games.gym import GymGame
    from pbmarl.games.mdp import MDPGame
    from pbmarl.games.pettingzoo import PettingZooGame

    return isinstance(game, (GymGame, MDPGame)) or (isinstance(game, PettingZooGame) and game.api == "parallel")
