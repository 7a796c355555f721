"""The vectorised runner: one worker steps hundreds of game instances at once.

`run_episodes` plays whole episodes of `game` with one `Seat` per player (a policy,
or a mixture of policies whose member is drawn ONCE PER EPISODE) and returns
per-episode returns and lengths, plus, for a learning seat, its `Trajectories`.

Two engines share this entry point and the episode bookkeeping:

* ``"tree"`` (`pbmarl.rollout.tree_engine`): for games whose whole tree compiles
  to flat arrays (see `pbmarl.rollout.compiled`); every policy is evaluated once
  over all information states of its seats, and then stepping is pure numpy.
* ``"states"`` (`pbmarl.rollout.state_engine`): any game following the state
  protocol (OpenSpiel, PettingZoo, ...); each step makes one batched
  `action_probabilities` call per distinct policy over the instances it acts in.

``engine="auto"`` picks the tree where the game compiles. Both draw chance
outcomes, mixture members and actions from the caller's `rng`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture, check_distribution
from pbmarl.rollout.trajectories import Trajectories

ENGINES = ("auto", "tree", "states")


@dataclass(frozen=True, eq=False)
class Seat:
    """Who plays a seat: one policy, or several with weights (one drawn per episode)."""

    policies: tuple[Policy, ...]
    weights: np.ndarray

    @classmethod
    def of(cls, entry: Policy | Mixture | Seat) -> Seat:
        """A seat from a Policy, a Mixture or a Seat."""
        if isinstance(entry, Seat):
            return entry
        if isinstance(entry, Policy):
            return cls((entry,), np.ones(1))
        if isinstance(entry, Mixture):
            return cls(tuple(entry.policies), np.asarray(entry.weights, dtype=float))
        raise TypeError(f"a seat is played by a Policy or a Mixture, got {type(entry).__name__}: {entry!r}")

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", check_distribution(self.weights, len(self.policies)))

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Member indices for `size` new episodes."""
        if len(self.policies) == 1:
            return np.zeros(size, dtype=np.int64)
        return rng.choice(len(self.policies), size=size, p=self.weights).astype(np.int64)


@dataclass(frozen=True, eq=False)
class RunOutput:
    """What one runner call produced; episodes in the order they were started."""

    returns: np.ndarray  # [E, P]
    lengths: np.ndarray  # [E] decision steps
    steps: int
    trajectories: Trajectories | None = None


class EpisodeBook:
    """Episode bookkeeping shared by the engines: starts, budgets, finished returns."""

    def __init__(self, num_players: int, seats: Sequence[Seat], episodes: int | None, min_learner_steps: int | None) -> None:
        self.seats = seats
        self.episodes = episodes
        self.min_learner_steps = min_learner_steps
        self.started = 0
        self.steps = 0
        self.learner_steps = 0
        self._ids: list[np.ndarray] = []
        self._returns: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self.num_players = num_players

    def may_start(self, wanted: int) -> int:
        """How many of `wanted` new episodes may start now."""
        if self.episodes is not None:
            return max(0, min(wanted, self.episodes - self.started))
        assert self.min_learner_steps is not None
        if self.learner_steps >= self.min_learner_steps:
            return 0
        if self.started >= 1_000 + 100 * self.min_learner_steps:
            raise RuntimeError(
                f"the learning seat made {self.learner_steps} decisions in {self.started} episodes, "
                f"short of {self.min_learner_steps}: does it ever act in this game?"
            )
        return wanted

    def start(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Episode ids and drawn members ``[count, P]`` for `count` new episodes."""
        ids = np.arange(self.started, self.started + count)
        self.started += count
        members = np.stack([seat.draw(rng, count) for seat in self.seats], axis=1) if count else np.zeros((0, self.num_players), np.int64)
        return ids, members

    def finish(self, ids: np.ndarray, returns: np.ndarray, lengths: np.ndarray) -> None:
        self._ids.append(np.asarray(ids))
        self._returns.append(np.asarray(returns, dtype=float).reshape(-1, self.num_players))
        self._lengths.append(np.asarray(lengths))

    def results(self) -> tuple[np.ndarray, np.ndarray]:
        """(returns [E, P], lengths [E]) ordered by episode id."""
        if not self._ids:
            return np.zeros((0, self.num_players)), np.zeros(0, np.int64)
        ids = np.concatenate(self._ids)
        order = np.argsort(ids)
        return np.concatenate(self._returns)[order], np.concatenate(self._lengths)[order].astype(np.int64)


def run_episodes(
    game: Game,
    seats: Sequence[Policy | Mixture | Seat],
    rng: np.random.Generator,
    *,
    episodes: int | None = None,
    learner: int | None = None,
    min_learner_steps: int | None = None,
    num_envs: int = 256,
    engine: str = "auto",
    tables: dict[Any, Any] | None = None,
) -> RunOutput:
    """Play whole episodes of `game` with `num_envs` instances stepped together.

    Give `episodes` (play exactly that many) or, with a `learner` seat,
    `min_learner_steps` (start episodes until the learner has made that many
    decisions, then let running ones finish). `tables` is an optional dict the tree
    engine uses to keep per-policy probability tables between calls (keyed by policy
    object and version).

    Example:
        >>> out = run_episodes(game, [pi, Mixture([a, b])], np.random.default_rng(0), episodes=1000)
        >>> out.returns.mean(axis=0)
    """
    seat_list = [Seat.of(s) for s in seats]
    if len(seat_list) != game.num_players:
        raise ValueError(f"expected one seat per player ({game.num_players}) for {game.name!r}, got {len(seat_list)}")
    if (episodes is None) == (min_learner_steps is None):
        raise ValueError("give exactly one of episodes and min_learner_steps")
    if min_learner_steps is not None and learner is None:
        raise ValueError("min_learner_steps needs a learner seat")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of {ENGINES}")
    book = EpisodeBook(game.num_players, seat_list, episodes, min_learner_steps)
    if episodes == 0:
        return RunOutput(np.zeros((0, game.num_players)), np.zeros(0, np.int64), 0, None)
    tree = None
    if engine in ("auto", "tree"):
        from pbmarl.rollout.compiled import NotCompilable, compiled_tree

        try:
            tree = compiled_tree(game)
        except NotCompilable as exc:
            if engine == "tree":
                raise ValueError(f"engine='tree' cannot run {game.name!r}: {exc.args[0]}") from None
    if tree is not None:
        from pbmarl.rollout.tree_engine import run_tree

        return run_tree(game, tree, seat_list, book, rng, num_envs=num_envs, learner=learner,
                        tables={} if tables is None else tables)
    from pbmarl.rollout.state_engine import run_states

    return run_states(game, seat_list, book, rng, num_envs=num_envs, learner=learner)
