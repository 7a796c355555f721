"""`Trajectories`: what a learner gets from `RolloutPool.collect`, and the buffer that builds it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Trajectories:
    """The learning seat's transitions from whole episodes, as numpy arrays.

    Each episode's transitions are contiguous and in time order; episodes follow
    one another in the order of `episode_returns`.

    Attributes:
        obs: ``[T, *obs_shape] float32``, the learner's observation at its decision.
        legal_mask: ``[T, A] bool``, its legal actions there.
        action: ``[T] int64``, the action it took.
        action_prob: ``[T] float64``, that action's probability under the behaviour policy.
        reward: ``[T] float64``, what the learner received after this action until its
            next decision (or the episode's end), terminal payoff included.
        done: ``[T] bool``, the episode ended after this decision.
        next_obs: ``[T, *obs_shape] float32``, the learner's observation at its next
            decision in the same episode (zeros where `done`).
        next_legal_mask: ``[T, A] bool``, the legal actions there (all False where `done`).
        episode: ``[T] int64``, the row of `episode_returns` each transition belongs to.
        episode_returns: ``[E, P] float64``, every collected episode's return per seat
            (episodes where the learner never acted included).
        episode_lengths: ``[E] int64``, decision steps (all seats) of each episode.
        steps: env decision steps taken in total (all seats).
        player: the learning seat (for a group: its first agent's seat).

    Multi-agent collection (`RolloutPool.collect(policies=..., mapping=...)`) fills
    these too, one row per agent per step; rows are ordered by (episode, agent,
    time), so each agent's rows in an episode are contiguous and end with `done`.

    Attributes:
        terminated: ``[T] bool``, the agent's episode ended in a terminal state (do not bootstrap).
        truncated: ``[T] bool``, it was cut off (time limit, ``max_cycles``): bootstrap from
            `next_obs`, which holds the real final observation there (zeros only where terminated).
        log_prob: ``[T] float64``, log-probability (density, for Box spaces) of `action`
            under the behaviour policy; `action` is ``[T, d] float32`` for Box spaces.
        agent: ``[T] int64``, the seat of the agent the row belongs to.
        time: ``[T] int64``, the env step within the episode.
        global_state, next_global_state: ``[T, S] float32``, the game's global state before
            and after the step, where ``game.has_global_state`` (else None).
        group: the group the rows belong to.
        episode_seeds: ``[E] int64``, the seed each episode's environment was reset with
            (replaying its actions from that reset reproduces it); -1 where the environment
            restarted the copy from its own generator (Gymnasium's native vector envs).
    """

    obs: np.ndarray
    legal_mask: np.ndarray
    action: np.ndarray
    action_prob: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    next_obs: np.ndarray
    next_legal_mask: np.ndarray
    episode: np.ndarray
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    steps: int
    player: int
    terminated: np.ndarray | None = None
    truncated: np.ndarray | None = None
    log_prob: np.ndarray | None = None
    agent: np.ndarray | None = None
    time: np.ndarray | None = None
    global_state: np.ndarray | None = None
    next_global_state: np.ndarray | None = None
    group: str | None = None
    episode_seeds: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.action)

    @property
    def num_episodes(self) -> int:
        return len(self.episode_returns)

    def __repr__(self) -> str:
        mean = np.round(self.episode_returns.mean(axis=0), 3).tolist() if self.num_episodes else []
        who = f"group {self.group!r}" if self.group is not None else f"player {self.player}"
        return (
            f"Trajectories({who}: {len(self)} transitions, {self.num_episodes} episodes, "
            f"{self.steps} env steps, mean return {mean})"
        )


def concat_trajectories(parts: Sequence[Trajectories]) -> Trajectories:
    """Join trajectories collected separately (in order), renumbering episodes."""
    if not parts:
        raise ValueError("nothing to concatenate")
    offsets = np.cumsum([0] + [p.num_episodes for p in parts[:-1]])
    arrays: dict[str, Any] = {}
    for f in fields(Trajectories):
        if f.name in ("steps", "player", "group"):
            continue
        if getattr(parts[0], f.name) is None:
            arrays[f.name] = None
            continue
        if f.name == "episode":
            arrays[f.name] = np.concatenate([p.episode + o for p, o in zip(parts, offsets)])
        else:
            arrays[f.name] = np.concatenate([getattr(p, f.name) for p in parts])
    return Trajectories(**arrays, steps=sum(p.steps for p in parts), player=parts[0].player, group=parts[0].group)


class TransitionBuffer:
    """Records the learner's transitions as instances step, in any interleaving.

    `add` stores decisions and returns their transition indices; `add_reward` and
    `end` attribute rewards and episode ends to each instance's latest transition;
    `build` orders everything by (episode, time) and derives next observations.
    """

    def __init__(self, num_actions: int, obs_shape: tuple[int, ...]) -> None:
        self.num_actions = num_actions
        self.obs_shape = obs_shape
        self.size = 0
        self._episode: list[np.ndarray] = []
        self._obs: list[np.ndarray] = []
        self._mask: list[np.ndarray] = []
        self._action: list[np.ndarray] = []
        self._prob: list[np.ndarray] = []
        self._reward = np.zeros(1024)
        self._done = np.zeros(1024, dtype=bool)

    def add(self, episode: np.ndarray, obs: np.ndarray, mask: np.ndarray, action: np.ndarray, prob: np.ndarray) -> np.ndarray:
        k = len(episode)
        index = np.arange(self.size, self.size + k)
        self.size += k
        if self.size > len(self._reward):
            grow = max(self.size, 2 * len(self._reward))
            self._reward = np.concatenate([self._reward, np.zeros(grow - len(self._reward))])
            self._done = np.concatenate([self._done, np.zeros(grow - len(self._done), dtype=bool)])
        self._episode.append(np.asarray(episode, dtype=np.int64))
        self._obs.append(np.asarray(obs, dtype=np.float32))
        self._mask.append(np.asarray(mask, dtype=bool))
        self._action.append(np.asarray(action, dtype=np.int64))
        self._prob.append(np.asarray(prob, dtype=float))
        return index

    def add_reward(self, transition: np.ndarray, reward: np.ndarray) -> None:
        """Add `reward` to the given transitions (indices must be distinct; -1 entries are skipped)."""
        ok = transition >= 0
        self._reward[transition[ok]] += reward[ok]

    def end(self, transition: np.ndarray) -> None:
        ok = transition >= 0
        self._done[transition[ok]] = True

    def build(self, episode_returns: np.ndarray, episode_lengths: np.ndarray, steps: int, player: int) -> Trajectories:
        T, A = self.size, self.num_actions
        if T:
            episode = np.concatenate(self._episode)
            order = np.argsort(episode, kind="stable")  # stable: time order within an episode
            episode = episode[order]
            obs = np.concatenate(self._obs)[order]
            mask = np.concatenate(self._mask)[order]
            action = np.concatenate(self._action)[order]
            prob = np.concatenate(self._prob)[order]
            reward = self._reward[:T][order]
            done = self._done[:T][order]
        else:
            episode = np.zeros(0, np.int64)
            obs = np.zeros((0,) + self.obs_shape, np.float32)
            mask = np.zeros((0, A), bool)
            action, prob, reward, done = np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, bool)
        has_next = ~done
        nxt = np.minimum(np.arange(T) + 1, max(T - 1, 0))
        next_obs = np.where(has_next.reshape((T,) + (1,) * len(self.obs_shape)), obs[nxt] if T else obs, 0.0).astype(np.float32)
        next_mask = (mask[nxt] if T else mask) & has_next[:, None]
        return Trajectories(
            obs=obs, legal_mask=mask, action=action, action_prob=prob, reward=reward, done=done,
            next_obs=next_obs, next_legal_mask=next_mask, episode=episode,
            episode_returns=np.asarray(episode_returns, dtype=float),
            episode_lengths=np.asarray(episode_lengths, dtype=np.int64), steps=int(steps), player=int(player),
        )
