"""Gymnasium environments as one-player games: ``load_game("gym:CartPole-v1")``.

A `GymGame` describes an environment; it does not step many of them. What a
stepper needs:

- ``game.make_env()``: a fresh ``gymnasium.Env`` built from the registry with the
  game's keyword arguments (time limit wrapper included, so truncation at
  ``max_episode_steps`` is reported apart from termination). Seed it with
  ``env.reset(seed=...)``; ``game.env_fns(n)`` gives ``n`` such factories for
  ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``.
- ``game.action_space(0)``: the environment's own action space (`Discrete`, `Box`
  or `MultiDiscrete`).
- ``game.observation_space(0)``: a float32 `Box`; `Box` observations keep their
  shape and bounds, other spaces (`Discrete`, `MultiDiscrete`, ...) are flattened
  (one-hot) by ``game.flatten_observation(raw)``.
- rewards are the environment's, undiscounted, one per step; ``terminated`` (the
  MDP ended: do not bootstrap) and ``truncated`` (time limit: bootstrap) stay apart.

For testing and for the turn-based machinery, ``game.new_initial_state(seed=...)``
also gives a `GymState` that follows the pyspiel-like state protocol (one player,
no chance nodes; ``apply_action`` takes an int or a float vector).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.params import check_params, signature_of
from pbmarl.games.spaces import check_action, flat_observation_space, flatten_observation
from pbmarl.games.state import TERMINAL, OnePlayerState

GYM_PREFIX = "gym:"
#: keywords ``gymnasium.make`` takes itself, on the way to the environment
MAKE_KEYWORDS = {"max_episode_steps": (int, True), "autoreset": (bool, True),
                 "apply_api_compatibility": (bool, True), "disable_env_checker": (bool, True)}


def load_gym(name: str, **env_kwargs: Any) -> GymGame:
    """A Gymnasium environment by registry id, e.g. ``"CartPole-v1"`` or ``"Pendulum-v1(g=9.81)"``.

    Raises:
        ValueError: an unknown id (with the closest registered ids) or keywords the
            environment does not take.
    """
    import gymnasium

    from pbmarl.games.params import parse_name

    env_id, params = parse_name(name)
    params.update(env_kwargs)
    if env_id not in gymnasium.registry:
        known = list(gymnasium.registry)
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(GYM_PREFIX + c) for c in close)}?" if close else ""
        raise ValueError(
            f"unknown Gymnasium id {env_id!r}{hint} (registered ids such as 'CartPole-v1', 'Pendulum-v1'; "
            "environments from other packages need that package imported first)"
        )
    return GymGame(env_id, params)


def _check_gym_params(env_id: str, params: dict[str, Any]) -> None:
    """Refuse bad keywords of `env_id` before creating it (see `pbmarl.games.params`)."""
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    spec = gymnasium.registry[env_id]
    try:
        creator: Any = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    except Exception:  # a missing extra (Box2D, MuJoCo): gymnasium.make reports it
        return
    signature, open_ended = signature_of(creator)
    check_params(GYM_PREFIX + env_id, params, signature, open_ended=open_ended, extra=MAKE_KEYWORDS,
                 render_modes=(getattr(creator, "metadata", None) or {}).get("render_modes"))


class GymGame(Game):
    """One Gymnasium environment as a one-player game; see the module doc.

    Example:
        >>> game = pb.load_game("gym:Pendulum-v1")
        >>> game.action_space(0)
        Box(-2.0, 2.0, (1,), float32)
        >>> env = game.make_env(); obs, info = env.reset(seed=0)
    """

    spec_kind = "gym"

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None) -> None:
        import gymnasium

        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        extra = ", ".join(f"{k}={v!r}" for k, v in sorted(self.env_kwargs.items()))
        self.name = GYM_PREFIX + env_id + (f"({extra})" if extra else "")
        _check_gym_params(env_id, self.env_kwargs)
        try:
            probe = self.make_env()
        except (TypeError, gymnasium.error.Error) as exc:
            raise ValueError(f"cannot create {env_id!r} with {self.env_kwargs}: {exc}") from None
        self.env_action_space = probe.action_space
        self.env_observation_space = probe.observation_space
        self.max_episode_steps: int | None = probe.spec.max_episode_steps if probe.spec is not None else None
        probe.close()
        space = self.env_action_space
        if isinstance(space, gymnasium.spaces.Discrete):
            if int(space.start) != 0:
                raise ValueError(f"{env_id!r} has action space {space}; Discrete spaces must start at 0")
            self.num_actions = int(space.n)
        elif isinstance(space, (gymnasium.spaces.Box, gymnasium.spaces.MultiDiscrete)):
            self.num_actions = 0  # no single discrete action set: policies act on the space itself
        else:
            raise ValueError(f"{env_id!r} has action space {space}; supported: Discrete(n), Box and MultiDiscrete")
        self._obs_space = flat_observation_space(self.env_observation_space)
        self.observation_shape = tuple(self._obs_space.shape)
        self.num_players = 1
        self.turn_based = True
        self.zero_sum = False

    # -- what a stepper needs ------------------------------------------------------
    def make_env(self, **overrides: Any) -> Any:
        """A fresh ``gymnasium.Env`` of this game (keywords override the game's own)."""
        import gymnasium

        return gymnasium.make(self.env_id, **{**self.env_kwargs, **overrides})

    def env_fns(self, num_envs: int) -> list[Callable[[], Any]]:
        """`num_envs` factories, as ``gymnasium.vector.SyncVectorEnv(game.env_fns(8))`` takes them."""
        return [self.make_env for _ in range(int(num_envs))]

    def flatten_observation(self, raw: Any) -> np.ndarray:
        """The float32 observation (shape `observation_shape`) from the environment's raw one."""
        return flatten_observation(self.env_observation_space, raw)

    def check_action(self, action: Any) -> Any:
        """`action` as the environment takes it, or a ValueError naming it and the space."""
        return check_action(self.env_action_space, action, who=self.name)

    # -- spaces --------------------------------------------------------------------------
    def action_space(self, player: int) -> Any:
        self.check_player(player)
        return self.env_action_space

    def observation_space(self, player: int) -> Any:
        self.check_player(player)
        return self._obs_space

    # -- the state protocol (tests, turn-based machinery) --------------------------------
    @property
    def enumerable(self) -> bool:
        return False

    def new_initial_state(self, *, seed: int | None = None) -> GymState:
        """A fresh episode; `seed` seeds the environment's reset."""
        return GymState(self, seed)

    def observation(self, state: Any, player: int) -> np.ndarray:
        return state.observation(player)

    def info_key(self, state: Any, player: int) -> str:
        return f"t{state.steps}:{state.observation(player).tobytes().hex()}"

    def legal_mask(self, state: Any, player: int) -> np.ndarray:
        return np.full(self.num_actions, not state.is_terminal(), dtype=bool)

    def __reduce__(self) -> tuple[Any, ...]:
        return (GymGame, (self.env_id, self.env_kwargs))

    def __repr__(self) -> str:
        return f"GymGame({self.name!r}: action {self.env_action_space}, obs {self.observation_shape})"


class GymState(OnePlayerState):
    """One episode of a `GymGame`, following the pyspiel-like state protocol.

    ``terminated`` and ``truncated`` say how it ended; ``is_terminal()`` is either.
    """

    def __init__(self, game: GymGame, seed: int | None) -> None:
        self.game = game
        self.env: Any = game.make_env()
        raw, self.info = self.env.reset(seed=seed)
        self._obs = game.flatten_observation(raw)
        self.steps = 0
        self._reward = 0.0
        self._return = 0.0
        self.terminated = False
        self.truncated = False

    def is_terminal(self) -> bool:
        return self.terminated or self.truncated

    def is_chance_node(self) -> bool:
        return False

    def is_simultaneous_node(self) -> bool:
        return False

    def current_player(self) -> int:
        return TERMINAL if self.is_terminal() else 0

    def chance_outcomes(self) -> list[tuple[int, float]]:
        return []

    def legal_actions(self, player: int) -> list[int]:
        if self.is_terminal() or player != 0:
            return []
        return list(range(self.game.num_actions))

    def observation(self, player: int) -> np.ndarray:
        return self._obs

    def apply_action(self, action: Any) -> None:
        if self.is_terminal():
            raise ValueError(f"the episode of {self.game.name!r} is over")
        act = self.game.check_action(action)
        raw, reward, self.terminated, self.truncated, self.info = self.env.step(act)
        self._obs = self.game.flatten_observation(raw)
        self._reward = float(reward)
        self._return += self._reward
        self.steps += 1
        if self.is_terminal():
            self.env.close()

    def clone(self) -> GymState:
        raise NotImplementedError(f"states of {self.game.name!r} cannot be cloned (a Gymnasium env cannot be copied)")
