"""Batched environments: every copy of an environment a worker holds, stepped in one call.

The array engine (`pbmarl.rollout.batch_engine`) steps a `BatchEnv`: one observation
array per agent, one reward array, one termination and one truncation flag per
copy. Which implementation steps the copies is a *stepper*; ``RolloutPool(...,
stepper=...)`` picks one, ``"auto"`` the fastest this environment has, in the order
`benchmarks/env_throughput.py` measured (``--routes`` prints every route side by side):

- ``"numpy"``: pbmarl's own numpy port of the environment, all copies in one array
  operation (``Pendulum-v1``: `pbmarl.envs.classic_control`; ``simple_spread_v3``,
  ``simple_adversary_v3``, ``simple_reference_v3``, ``simple_tag_v3``: `pbmarl.envs.mpe.batch`). Each port is tested to give the same initial states,
  observations, rewards and flags as the original, so its data equal the
  ``"instances"`` route's for the same seed.
- ``"vector_entry_point"``: Gymnasium's native vectorised environment
  (``gymnasium.make_vec(id, vectorization_mode="vector_entry_point")``, e.g.
  ``CartPoleVectorEnv``). It restarts finished copies itself on the next step from
  its own generator (seeded once per work unit), so its episodes carry seed -1.
- ``"sync_vector"``: Gymnasium's ``SyncVectorEnv`` with autoreset disabled; pbmarl
  resets finished copies with per-episode seeds (data equal the ``"instances"`` route's).
- ``"instances"``: one environment object per copy stepped in a loop by
  `pbmarl.rollout.parallel_engine` (any PettingZoo Parallel or Gymnasium environment,
  agents that leave mid-episode included). The opt-out: the original environments only.

A route exists only where it reproduces the environment exactly as the game was
loaded (``available_steppers(game)`` lists them); asking for one that does not
raises, naming the ones that do.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pbmarl.games.base import Game

#: every stepper name; "auto" is the first available of ROUTES
STEPPERS = ("auto", "numpy", "vector_entry_point", "sync_vector", "instances")
#: "auto" takes the first of these that the game has (fastest first, as measured)
ROUTES = ("numpy", "vector_entry_point", "sync_vector", "instances")


class BatchEnv(Protocol):
    """`num_envs` copies of one environment whose agents all act from reset to the episode's end.

    `own_resets` False: `reset(index, seeds)` restarts the copies `index` (a seed
    each) and the engine calls it when a copy ends. True: the environment restarts a
    finished copy itself on its next `step` (Gymnasium's next-step autoreset: that
    step ignores the copy's action and gives its first observation, reward 0 and
    no flags); `reset` is called once, for all copies, with one seed.
    """

    num_envs: int
    agents: tuple[str, ...]
    own_resets: bool
    has_state: bool

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None: ...
    def observations(self) -> list[np.ndarray]: ...  # per agent [N, d] float32
    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...  # [N, A], [N], [N]
    def state(self) -> np.ndarray: ...  # [N, S] float32, where has_state


class GymVectorBatch:
    """Gymnasium's native vectorised environment (``vector_entry_point``), next-step autoreset."""

    own_resets = True
    has_state = False

    def __init__(self, game: Any, num_envs: int) -> None:
        import gymnasium

        self.env = gymnasium.make_vec(game.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                                      **game.env_kwargs)
        self.num_envs = int(num_envs)
        self.agents: tuple[str, ...] = (str(game.agents[0]),)
        self._obs: np.ndarray = np.zeros((self.num_envs,) + tuple(game.observation_shape), dtype=np.float32)

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        obs, _ = self.env.reset(seed=int(seeds[0]))
        self._obs = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)

    def observations(self) -> list[np.ndarray]:
        return [self._obs]

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        obs, reward, term, trunc, _ = self.env.step(actions[0])
        self._obs = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)
        return np.asarray(reward, dtype=float).reshape(-1, 1), np.asarray(term, bool), np.asarray(trunc, bool)

    def state(self) -> np.ndarray:
        raise ValueError("Gymnasium environments have no global state apart from the observation")


class SyncVectorBatch:
    """Gymnasium's ``SyncVectorEnv`` with autoreset disabled: pbmarl resets finished copies with their seeds."""

    own_resets = False
    has_state = False

    def __init__(self, game: Any, num_envs: int) -> None:
        import gymnasium

        self.env = gymnasium.vector.SyncVectorEnv(game.env_fns(num_envs), autoreset_mode="Disabled")
        self.num_envs = int(num_envs)
        self._ended = np.zeros(self.num_envs, dtype=bool)
        self.agents: tuple[str, ...] = (str(game.agents[0]),)
        self._obs: np.ndarray = np.zeros((self.num_envs,) + tuple(game.observation_shape), dtype=np.float32)

    def reset(self, index: np.ndarray, seeds: np.ndarray) -> None:
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[index] = True
        every = np.zeros(self.num_envs, dtype=np.int64)
        every[index] = seeds
        obs, _ = self.env.reset(seed=[int(s) for s in every], options={"reset_mask": mask})
        self._obs[mask] = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)[mask]
        self._ended[mask] = False

    def observations(self) -> list[np.ndarray]:
        return [self._obs]

    def step(self, actions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._ended.any():  # copies the engine retired: Gymnasium steps only running ones, so restart them idle
            idle = np.flatnonzero(self._ended)
            self.reset(idle, np.zeros(len(idle), dtype=np.int64))
        obs, reward, term, trunc, _ = self.env.step(actions[0])
        self._obs = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)
        self._ended = np.asarray(term, bool) | np.asarray(trunc, bool)
        return np.asarray(reward, dtype=float).reshape(-1, 1), np.asarray(term, bool), np.asarray(trunc, bool)

    def state(self) -> np.ndarray:
        raise ValueError("Gymnasium environments have no global state apart from the observation")


def available_steppers(game: Game) -> tuple[str, ...]:
    """The routes that step `game` exactly as loaded, fastest first (see the module doc)."""
    from pbmarl.envs.instances import parallel_capable
    from pbmarl.games.gym import GymGame

    if not parallel_capable(game):
        return ()
    found = []
    if _numpy_port(game) is not None:
        found.append("numpy")
    if isinstance(game, GymGame) and _box_observations(game):
        import gymnasium

        spec = gymnasium.registry[game.env_id]
        if spec.vector_entry_point is not None and set(game.env_kwargs) <= {"max_episode_steps"}:
            found.append("vector_entry_point")
        found.append("sync_vector")
    found.append("instances")
    return tuple(found)


def resolve_stepper(game: Game, stepper: str) -> str:
    """The route `stepper` means for `game` (``"auto"``: the fastest available), or a ValueError."""
    if stepper not in STEPPERS:
        raise ValueError(f"unknown stepper {stepper!r}; use one of {STEPPERS}")
    have = available_steppers(game)
    if stepper == "auto":
        return have[0] if have else "instances"
    if stepper not in have:
        raise ValueError(f"stepper {stepper!r} is not available for {game.name!r}; available: {list(have) or ['instances']}")
    return stepper


def make_batch(game: Game, route: str, num_envs: int) -> BatchEnv:
    """A `BatchEnv` of `num_envs` copies of `game` stepped by `route` (not ``"instances"``)."""
    if route == "numpy":
        port = _numpy_port(game)
        assert port is not None, f"no numpy port for {game.name!r}"
        return port(num_envs)
    if route == "vector_entry_point":
        return GymVectorBatch(game, num_envs)
    if route == "sync_vector":
        return SyncVectorBatch(game, num_envs)
    raise ValueError(f"route {route!r} has no batched environment; use one of {ROUTES[:-1]}")


def _box_observations(game: Any) -> bool:
    from gymnasium import spaces

    return isinstance(game.env_observation_space, spaces.Box)


def _numpy_port(game: Game) -> Any:
    """A factory ``num_envs -> BatchEnv`` of pbmarl's numpy port of `game`, or None where there is none."""
    from pbmarl.games.gym import GymGame
    from pbmarl.games.pettingzoo import PettingZooGame

    if isinstance(game, GymGame):
        from pbmarl.envs.classic_control import pendulum_port

        return pendulum_port(game)
    if isinstance(game, PettingZooGame):
        from pbmarl.envs.mpe.batch import adversary_port, reference_port, spread_port, tag_port

        return spread_port(game) or adversary_port(game) or reference_port(game) or tag_port(game)
    return None
