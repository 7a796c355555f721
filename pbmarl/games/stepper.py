"""The one stepper over game states: chance resolution, who acts, applying actions, and `VecEnv`.

Games only describe states (the pyspiel-like `State` protocol of `pbmarl.games.state`);
stepping them lives here. The runner's state engine (`pbmarl.rollout.state_engine`)
and `VecEnv`, the public many-instances-at-once stepper, both step through the
functions below, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.state import State, as_rng

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game


def draw_chance(state: State, uniform: Callable[[], float]) -> int:
    """A chance outcome of `state` by inverse CDF over `chance_outcomes()` with one `uniform()` draw."""
    outcomes = state.chance_outcomes()
    u = uniform() * sum(p for _, p in outcomes)
    acc = 0.0
    for action, p in outcomes:
        acc += p
        if u < acc:
            return int(action)
    return int(outcomes[-1][0])


def advance_chance(state: State, uniform: Callable[[], float], credit: Callable[[list[float]], None]) -> None:
    """Resolve chance nodes until a player must act (or the game ends), crediting their rewards."""
    while state.is_chance_node():
        state.apply_action(draw_chance(state, uniform))
        credit(state.rewards())


def acting_players(state: State, num_players: int) -> list[int]:
    """The players who act at `state`: none when terminal, all with legal actions at a simultaneous node."""
    if state.is_terminal():
        return []
    if state.is_simultaneous_node():
        return [p for p in range(num_players) if len(state.legal_actions(p)) > 0]
    return [int(state.current_player())]


def apply_joint(state: State, actions: dict[int, int], num_players: int) -> None:
    """Apply `{player: action}` at `state` (one entry at a turn node; acting players at a simultaneous one)."""
    if state.is_simultaneous_node():
        state.apply_actions([int(actions.get(p, 0)) for p in range(num_players)])
    else:
        (a,) = actions.values()
        state.apply_action(int(a))


class Uniforms:
    """Scalar uniform draws from `rng`, fetched in blocks (one numpy call per 4096 draws)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.block: list[float] = []
        self.pos = 0

    def __call__(self) -> float:
        if self.pos >= len(self.block):
            self.block = self.rng.random(4096).tolist()
            self.pos = 0
        self.pos += 1
        return self.block[self.pos - 1]


@dataclass(frozen=True)
class StepResult:
    """What `VecEnv.step` returns: per instance rewards of this step and whether it ended.

    `returns` holds the whole episode's return for instances where `done` is True
    (those instances have already been restarted when `autoreset` is on).
    """

    rewards: np.ndarray  # [N, P] float
    done: np.ndarray  # [N] bool
    returns: np.ndarray  # [N, P] float, meaningful where done
    lengths: np.ndarray  # [N] int, decision steps of the finished episodes, where done


class VecEnv:
    """Many instances of one game stepped together.

    Chance nodes are resolved inside with the env's own rng, so every instance
    always waits on players. `acting[i, p]` says whether player `p` must act in
    instance `i`; `observe(p)` gathers the observations of the instances where
    `p` acts; `step(actions)` takes an ``[N, P]`` int array (``-1`` where a player
    does not act) and restarts finished instances at once (``autoreset``).

    Example:
        >>> from pbmarl import load_game
        >>> env = load_game("kuhn_poker").vec_env(64, seed=0)
        >>> idx, obs, mask, keys = env.observe(0)
    """

    def __init__(
        self,
        game: Game,
        num_envs: int,
        *,
        seed: int | np.random.Generator | None = None,
        autoreset: bool = True,
    ) -> None:
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.game = game
        self.num_envs = int(num_envs)
        self.autoreset = autoreset
        self.rng = as_rng(seed)
        self._uniform = Uniforms(self.rng)
        P = game.num_players
        self.states: list[Any] = [None] * self.num_envs
        self.acting = np.zeros((self.num_envs, P), dtype=bool)
        self.episode_returns = np.zeros((self.num_envs, P))
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int64)
        for i in range(self.num_envs):
            self._restart(i)

    # -- internals -------------------------------------------------------
    def _advance_chance(self, i: int) -> None:
        def credit(rewards: list[float]) -> None:
            self.episode_returns[i] += rewards

        advance_chance(self.states[i], self._uniform, credit)
        self.acting[i] = False
        self.acting[i, acting_players(self.states[i], self.game.num_players)] = True

    def _restart(self, i: int) -> None:
        self.states[i] = self.game.new_initial_state()
        self.episode_returns[i] = 0.0
        self.episode_lengths[i] = 0
        self._advance_chance(i)

    # -- public ----------------------------------------------------------
    def reset(self) -> None:
        """Restart every instance."""
        for i in range(self.num_envs):
            self._restart(i)

    def observe(self, player: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """(instance indices, observations, legal masks, info keys) where `player` acts."""
        idx = np.flatnonzero(self.acting[:, player])
        shape = (len(idx),) + tuple(self.game.observation_shape)
        obs = np.empty(shape, dtype=np.float32)
        mask = np.zeros((len(idx), self.game.num_actions), dtype=bool)
        keys: list[str] = []
        for k, i in enumerate(idx):
            state = self.states[i]
            obs[k] = self.game.observation(state, player)
            mask[k, state.legal_actions(player)] = True
            keys.append(self.game.info_key(state, player))
        return idx, obs, mask, keys

    def step(self, actions: np.ndarray) -> StepResult:
        """Apply one action per acting player in every instance; see the class doc."""
        actions = np.asarray(actions)
        N, P = self.num_envs, self.game.num_players
        if actions.shape != (N, P):
            raise ValueError(f"actions must have shape {(N, P)} (instances, players), got {actions.shape}")
        rewards = np.zeros((N, P))
        done = np.zeros(N, dtype=bool)
        returns = np.zeros((N, P))
        lengths = np.zeros(N, dtype=np.int64)
        for i in range(N):
            state = self.states[i]
            if state.is_terminal():
                continue
            before = self.episode_returns[i].copy()
            joint = {int(p): int(actions[i, p]) for p in np.flatnonzero(self.acting[i])}
            self._check_legal(i, joint)
            apply_joint(state, joint, P)
            self.episode_returns[i] += state.rewards()
            self.episode_lengths[i] += 1
            if not state.is_terminal():
                self._advance_chance(i)
            rewards[i] = self.episode_returns[i] - before
            if state.is_terminal():
                done[i] = True
                returns[i] = self.episode_returns[i]
                lengths[i] = self.episode_lengths[i]
                if self.autoreset:
                    self._restart(i)
                else:
                    self.acting[i] = False
        return StepResult(rewards=rewards, done=done, returns=returns, lengths=lengths)

    def _check_legal(self, i: int, joint: dict[int, int]) -> None:
        state = self.states[i]
        for p, a in joint.items():
            if a not in state.legal_actions(p):
                raise ValueError(
                    f"illegal action {a} for player {p} in instance {i}; "
                    f"legal actions are {state.legal_actions(p)}"
                )
