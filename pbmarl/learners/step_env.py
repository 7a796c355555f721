"""One environment of a one-player game, stepped one action at a time: what the control learners train on.

`StepEnv` steps a Gymnasium game's real environment directly (the fastest path), or any
one-player pbmarl game through the state protocol, with chance outcomes drawn from the
reset seed, so a seeded reset always replays the same episode for the same actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pbmarl.games.base import Game

__all__ = ["EnvSource", "StepEnv", "episode_returns", "single_agent_env"]


@runtime_checkable
class EnvSource(Protocol):
    """A game that builds real environments (`GymGame`): stepped directly, the fastest path."""

    def make_env(self) -> Any: ...
    def flatten_observation(self, raw: Any) -> np.ndarray: ...


class StepEnv:
    """One environment, stepped one action at a time: ``reset(seed) -> obs``, ``step(a) -> (obs, r, term, trunc)``.

    Built from a Gymnasium game (its real env) or from any one-player pbmarl game
    through the state protocol (chance outcomes drawn with the reset seed).
    """

    def __init__(self, game: Game) -> None:
        self.game = game
        self.action_space = game.action_space(0)
        self.observation_shape = tuple(game.observation_shape)
        self._env = game.make_env() if isinstance(game, EnvSource) else None
        self._state: Any = None
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> np.ndarray:
        if self._env is not None:
            raw, _ = self._env.reset(seed=int(seed))
            return self.game.flatten_observation(raw)  # type: ignore[attr-defined]
        self._rng = np.random.default_rng(int(seed))
        self._state = self.game.new_initial_state()
        self._skip_chance()
        return np.asarray(self.game.observation(self._state, 0), np.float32).reshape(-1)

    def _skip_chance(self) -> None:
        while not self._state.is_terminal() and self._state.is_chance_node():
            outcomes, probs = zip(*self._state.chance_outcomes())
            self._state.apply_action(int(outcomes[self._rng.choice(len(outcomes), p=np.asarray(probs) / sum(probs))]))

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        if self._env is not None:
            raw, reward, terminated, truncated, _ = self._env.step(action)
            return self.game.flatten_observation(raw), float(reward), bool(terminated), bool(truncated)  # type: ignore[attr-defined]
        state = self._state
        state.apply_action(int(action) if np.ndim(action) == 0 else action)
        self._skip_chance()
        reward = float(state.rewards()[0])
        done = bool(state.is_terminal())
        obs = np.zeros(self.observation_shape, np.float32).reshape(-1) if done else \
            np.asarray(self.game.observation(state, 0), np.float32).reshape(-1)
        return obs, reward, done, False


def single_agent_env(game: Game, *, who: str) -> StepEnv:
    """A `StepEnv` of a one-player game, or a ValueError saying what `who` needs."""
    if game.num_players != 1:
        raise ValueError(f"{who} trains one agent; {game.name!r} has {game.num_players} players. Use it as an oracle "
                         "on one-player games, or a multi-agent learner")
    return StepEnv(game)


def episode_returns(game: Game, act: Callable[[np.ndarray], Any], episodes: int, rng: np.random.Generator) -> list[float]:
    """The returns of `episodes` fresh episodes of one-player `game`, played by `act` (observation -> action),
    each reset with a seed drawn from `rng`."""
    env = StepEnv(game)
    returns = []
    for _ in range(int(episodes)):
        obs, total, over = env.reset(int(rng.integers(2**31))), 0.0, False
        while not over:
            obs, reward, term, trunc = env.step(act(obs))
            total += reward
            over = term or trunc
        returns.append(total)
    return returns
