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
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.rollout.records import EpisodeBook, RunOutput, Seat

ENGINES = ("auto", "tree", "states")


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
        >>> out = run_episodes(game, [pi, Mixture([a, b])], np.random.default_rng(0), episodes=1000)  # doctest: +SKIP
        >>> out.returns.mean(axis=0)  # doctest: +SKIP
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
