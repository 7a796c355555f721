"""One environment of a one-player game, stepped one action at a time: what the control learners train on.

`StepEnv` steps a Gymnasium game's real environment directly (the fastest path), or any
one-player pbmarl game through the state protocol, with chance outcomes drawn from the
reset seed, so a seeded reset always replays the same episode for the same actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from pbmarl.games.base import Game

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.rollout.results import EvalResult

__all__ = ["EnvSource", "StepEnv", "episode_returns", "evaluate_policy", "single_agent_env", "space_kind"]


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


def space_kind(space: Any, accepted: tuple[str, ...], *, who: str, where: str) -> tuple[str, Any, int]:
    """``(kind, bounds, size)`` of an action space `who` accepts (`accepted`: "box", "discrete"): a bounded Box
    gives ``((low, high), dim)`` as float32, a Discrete ``(None, n)``; anything else is a ValueError naming
    `where` (the game) and the learners that would take it."""
    from gymnasium import spaces

    kind = "box" if isinstance(space, spaces.Box) else "discrete" if isinstance(space, spaces.Discrete) else None
    if kind is None or kind not in accepted:
        wanted = " or ".join("Box" if s == "box" else "Discrete" for s in accepted)
        alt = {"box": "SAC, DDPG, TD3 or HDDPG", "discrete": "Rainbow, SAC or DQN"}.get(kind or "", "")
        raise ValueError(f"{who} needs {wanted} actions; {where} has {space}" + (f" (try {alt})" if alt else ""))
    if kind == "discrete":
        return kind, None, int(space.n)
    low, high = np.asarray(space.low), np.asarray(space.high)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"{who} needs a bounded Box action space, got {space}")
    return kind, (low.astype(np.float32), high.astype(np.float32)), int(np.prod(space.shape))


def episode_returns(game: Game, act: Callable[[np.ndarray], Any], episodes: int, rng: np.random.Generator
                    ) -> tuple[list[float], list[int]]:
    """The returns and lengths of `episodes` fresh episodes of one-player `game`, played by `act`
    (observation -> action), each reset with a seed drawn from `rng`."""
    env = StepEnv(game)
    returns, lengths = [], []
    for _ in range(int(episodes)):
        obs, total, over, n = env.reset(int(rng.integers(2**31))), 0.0, False, 0
        while not over:
            obs, reward, term, trunc = env.step(act(obs))
            total += reward
            over = term or trunc
            n += 1
        returns.append(total)
        lengths.append(n)
    return returns, lengths


def evaluate_policy(game: Game, policy: Any, episodes: int, rng: np.random.Generator, *, deterministic: bool,
                    acting: np.random.Generator) -> EvalResult:
    """`policy` (a `Policy`: one row per call) on `episodes` fresh episodes of one-player `game`: resets
    seeded from `rng`, exploring actions drawn with `acting`; a `pb.EvalResult` indexed by player 0."""
    import time

    from pbmarl.rollout.results import EvalResult

    space = game.action_space(0)
    legal = np.ones((1, int(space.n)), bool) if hasattr(space, "n") else None
    t0 = time.perf_counter()
    returns, lengths = episode_returns(game, lambda obs: policy.act(
        np.asarray(obs, np.float32).reshape(1, -1), legal, acting, deterministic=deterministic).action[0],
        episodes, rng)
    return EvalResult.from_returns(np.asarray(returns, float)[:, None], np.asarray(lengths), int(sum(lengths)),
                                   time.perf_counter() - t0, keep=False)
