"""One environment instance behind one small interface, for the parallel engine.

PettingZoo Parallel environments already speak it (dicts keyed by agent); a
Gymnasium environment (and an ``mdp:`` game's env) becomes a one-agent Parallel environment. The engine steps
many of these itself (pbmarl's batch stepper): `benchmarks/env_throughput.py`
measures it against Gymnasium's `SyncVectorEnv` in the same run.
"""

from __future__ import annotations

from collections import defaultdict
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


class CycledAECInstance(ParallelInstance):
    """A PettingZoo ``aec_to_parallel`` environment driven through its raw AEC environment.

    It does what PettingZoo's ``aec_to_parallel_wrapper.step`` does, in the same order
    (so rewards, observations and flags are the same, bit for bit), minus the work whose
    result that wrapper discards (an observation per agent per cycle) and minus the
    checking wrappers (order enforcing, action bounds: pbmarl's actions are in the
    space already). Used only where every wrapper in between is one of those.
    """

    def __init__(self, env: Any, agents: list[str]) -> None:
        super().__init__(env, agents)
        self.aec = env.aec_env.unwrapped

    def reset(self, seed: int) -> tuple[Obs, dict[str, Any]]:
        aec = self.aec
        aec.reset(seed=seed)
        obs = {a: aec.observe(a) for a in aec.agents if not (aec.terminations[a] or aec.truncations[a])}
        return obs, dict(**aec.infos)

    def step(self, actions: dict[str, Any]) -> tuple[Obs, dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        aec = self.aec
        rewards: dict[str, float] = defaultdict(int)  # as the wrapper: ints until a reward arrives
        for agent in aec.agents:
            if agent != aec.agent_selection:
                raise AssertionError(f"expected agent {agent}, got {aec.agent_selection}: agents must step in a cycle")
            aec.step(actions[agent])
            for other in aec.agents:
                rewards[other] += aec.rewards[other]
        terms, truncs, infos = dict(**aec.terminations), dict(**aec.truncations), dict(**aec.infos)
        obs = {agent: aec.observe(agent) for agent in aec.agents}
        while aec.agents and (aec.terminations[aec.agent_selection] or aec.truncations[aec.agent_selection]):
            aec.step(None)
        return obs, rewards, terms, truncs, infos

    def live_agents(self) -> list[str]:
        return list(self.aec.agents)

    def state(self) -> np.ndarray:
        return np.asarray(self.aec.state(), dtype=np.float32).ravel()


def _cycled(env: Any) -> bool:
    """Whether `env` is an ``aec_to_parallel`` wrapper over only checking wrappers (see `CycledAECInstance`)."""
    from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    from pettingzoo.utils.wrappers import (
        AssertOutOfBoundsWrapper,
        BaseWrapper,
        ClipOutOfBoundsWrapper,
        OrderEnforcingWrapper,
    )

    if type(env) is not aec_to_parallel_wrapper:
        return False
    inner = env.aec_env
    while isinstance(inner, BaseWrapper):
        if type(inner) not in (OrderEnforcingWrapper, AssertOutOfBoundsWrapper, ClipOutOfBoundsWrapper):
            return False
        inner = inner.env
    return True


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
        env = game.make_env()
        return (CycledAECInstance if _cycled(env) else ParallelInstance)(env, list(game.agents))
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
