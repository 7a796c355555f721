"""A control learner (SAC, TD3, DDPG, HDDPG, Rainbow) as a PSRO oracle on a game of several seats.

``pb.SAC(game).best_response(player, opponents)`` on a PettingZoo Parallel game (or a
matrix game): the learner trains one agent, seat `player`, while every other seat plays
its entry of `opponents` (a policy, or a mixture drawn once per episode), fixed. It is
independent learning through an `AgentMapping` (one group per agent), with the rows the
rollout pool collects going through a fresh learner of the same algorithm and config
built for that seat's spaces (`pb.learners.Independent`), so the algorithm is the one-agent
algorithm, unchanged. The value is the mean return of seat `player` over
``eval_episodes`` episodes of the trained policy (no exploration) against the same
opponents.

Example:
    >>> game = pb.load_game("pettingzoo:simple_adversary_v3", continuous_actions=True, max_cycles=5)
    >>> sac = pb.SAC(game, seed=0, budget=200, hidden=(16,))
    >>> rival = [None, pb.RandomPolicy(game, player=1), pb.RandomPolicy(game, player=2)]  # doctest: +SKIP
    >>> answer = sac.respond(0, rival)                     # BestResponse(policy, value, env_steps)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.protocols import BestResponse
from pbmarl.torchutil import torch_threads

if TYPE_CHECKING:
    from pbmarl.learners.control.base import ControlLearner

__all__ = ["answer_in_seat", "control_best_response", "respond_in_seat", "seat_game"]


def seat_game(game: Game, *, who: str = "a control learner") -> Game:
    """`game` as the multi-agent rollout layer steps it (a `MatrixGame` becomes a Parallel env of the same name)."""
    from pbmarl.envs.instances import parallel_capable
    from pbmarl.games.matrix import MatrixGame

    if isinstance(game, MatrixGame):
        from pbmarl.games.matrix_env import parallel_matrix_game

        return parallel_matrix_game(game)
    if not parallel_capable(game):
        raise ValueError(f"{who} trains one agent, or answers for one seat of a PettingZoo Parallel game or a matrix "
                         f"game; {game.name!r} ({game.num_players} players) is neither (for turn-based games use DQN "
                         "or PPO as the oracle)")
    return game


def respond_in_seat(learner: ControlLearner, player: int, opponents: Sequence[Any], *, budget: int,
                    seed: int) -> BestResponse:
    """Train a fresh copy of `learner`'s algorithm for seat `player` against fixed `opponents`; see the module doc.

    Args:
        learner: the oracle (its config and algorithm are copied; its own networks are not used).
        player: the responding seat.
        opponents: one entry per seat; entry `player` is ignored, every other one is a Policy or Mixture.
        budget: env steps of training (whole rounds of ``steps_per_round``, so a few more).
        seed: seeds the fresh learner, the rollouts and the evaluation.
    """
    from pbmarl.learners.multiagent.independent import Independent, IndependentConfig
    from pbmarl.rollout.mapping import AgentMapping
    from pbmarl.rollout.parallel_engine import run_parallel
    from pbmarl.rollout.pool import RolloutPool
    from pbmarl.rollout.records import Seat

    game = learner.game
    player = game.check_player(player)
    if len(opponents) != game.num_players:
        raise ValueError(f"opponents needs one entry per seat ({game.num_players}) of {game.name!r}, "
                         f"got {len(opponents)}")
    stepped = seat_game(game)
    mapping = AgentMapping.independent(stepped)
    groups = list(mapping.groups)
    fixed: dict[str, Any] = {}
    for p, group in enumerate(groups):
        if p == player:
            continue
        if opponents[p] is None:
            raise ValueError(f"opponents[{p}] (agent {group!r}) is None; every seat but the responder's needs a "
                             "Policy or Mixture")
        fixed[group] = opponents[p]
    cfg = learner.config
    options = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    seat = Independent(config=IndependentConfig(algo=learner.name, options=options, steps_per_round=cfg.steps_per_round),
                       seed=seed)
    seat.bind(mapping, groups[player])
    rng = np.random.default_rng(seed)
    pool = RolloutPool(stepped, envs_per_worker=cfg.num_envs, seed=seed)
    steps = 0
    with torch_threads(cfg.num_threads):
        while steps < budget:
            rows = pool.collect(policies={groups[player]: seat.behaviour(), **fixed}, mapping=mapping,
                                learning={groups[player]}, steps=cfg.steps_per_round, seed=rng, progress=False)
            mine = rows[groups[player]]
            steps += int(mine.steps)
            seat.train(mine, steps)
        policy = seat.policy()
        seats = {g: Seat.of(policy if g == groups[player] else fixed[g]) for g in groups}
        out = run_parallel(stepped, mapping, seats, set(), rng, num_envs=cfg.num_envs,
                           episodes=int(cfg.eval_episodes))
    value = float(np.asarray(out.returns, dtype=float)[:, player].mean())
    return BestResponse(policy, value, steps)


def control_best_response(learner: ControlLearner, player: int, opponents: Sequence[Any], budget: int | None) -> Any:
    """`ControlLearner.best_response`: on a one-player game the learner trains on (until its budget, or `budget`
    more env steps) and hands back its policy; on a game of several seats a fresh learner answers for the seat."""
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise ValueError(f"budget must be a positive int (env steps), got {budget!r}")
    if learner.multi_seat:
        return answer_in_seat(learner, player, opponents, budget).policy
    learner.game.check_player(player)
    if any(o is not None for i, o in enumerate(opponents) if i != player):
        raise ValueError(f"{type(learner).__name__} trains on one-player games; got opponents {opponents!r}")
    if budget is not None:
        learner.config = dataclasses.replace(learner.config, budget=learner.env_steps + int(budget))
    learner.run(progress=False)
    return learner.policy()


def answer_in_seat(learner: ControlLearner, player: int, opponents: Sequence[Any], budget: int | None) -> BestResponse:
    """A multi-seat learner's answer for seat `player` (`respond_in_seat` with a fresh seed per answer)."""
    answer = respond_in_seat(learner, player, opponents, budget=int(budget or learner.config.budget),
                             seed=learner.seed + learner.responses)
    learner.responses += 1
    learner.env_steps += answer.env_steps
    return answer
