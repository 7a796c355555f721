"""`GroupOracle`: a multi-agent learner as a PSRO oracle (`pbmarl.protocols.Oracle`).

``respond(player, opponents)`` trains a fresh learner for seat `player` with `pb.MARL`
(every other seat played by its opponent policy or mixture, fixed) for `steps` env steps,
and answers the trained policy with its evaluated return. Each seat keeps its own
population in PSRO, so on a game whose seats are the members of groups this is one
population per seat. On a `pbmarl.algorithms.teams.team_game.TeamGame` the players are the
groups of its mapping: the learner trains one group (all its agents) against the other
groups' mixtures, and PSRO keeps one population per group; `team_psro` builds that PSRO.

Example:
    >>> oracle = GroupOracle(lambda seed: pb.learners.IPPO(seed=seed, steps_per_round=256), steps=2048)  # doctest: +SKIP
    >>> psro = pb.PSRO(game, solver="nash", learner=oracle, evaluator=pb.ExactEvaluator(game))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pbmarl.algorithms.teams.team_game import TeamEvaluator, TeamGame
from pbmarl.games.base import Game
from pbmarl.learners.multiagent.group import GroupLearner
from pbmarl.protocols import BestResponse, Opponents
from pbmarl.rollout.mapping import AgentMapping
from pbmarl.runs.stop import Stop

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.psro.psro import PSRO


class GroupOracle:
    """See the module doc.

    Args:
        game: the game PSRO plays.
        make: ``seed -> GroupLearner``, a fresh learner per response.
        steps: env steps of training per response.
        eval_episodes: episodes that estimate the response's value.
        seed: first seed; each response uses the next one.
    """

    def __init__(self, game: Game, make: Callable[[int], GroupLearner], *, steps: int = 10_000,
                 eval_episodes: int = 100, seed: int = 0, num_envs: int = 32) -> None:
        if not callable(make):
            raise TypeError(f"make must be a callable seed -> learner (e.g. lambda s: pb.learners.IPPO(seed=s)), got {make!r}")
        if int(steps) < 1 or int(eval_episodes) < 1:
            raise ValueError(f"steps and eval_episodes must be positive, got {steps!r} and {eval_episodes!r}")
        self.game, self.make, self.steps, self.eval_episodes = game, make, int(steps), int(eval_episodes)
        self.seed, self.num_envs, self.calls = int(seed), int(num_envs), 0

    @property
    def name(self) -> str:
        return f"marl-{self.make(0).name}"

    def respond(self, player: int, opponents: Opponents) -> BestResponse:
        from pbmarl.algorithms.teams.marl import MARL

        player = self.game.check_player(player)
        if isinstance(self.game, TeamGame):  # players are the groups of the team game's mapping
            base, mapping = self.game.base, self.game.mapping
        else:
            base, mapping = self.game, AgentMapping.independent(self.game)
        agents = list(mapping.groups)
        fixed = {}
        for p, agent in enumerate(agents):
            if p == player:
                continue
            entry = opponents[p]
            if entry is None:
                raise ValueError(f"opponents[{p}] (agent {agent!r}) is None; every seat but the responder's needs a "
                                 "Policy or Mixture")
            fixed[agent] = entry
        seed = self.seed + self.calls
        self.calls += 1
        marl = MARL(base, {agents[player]: self.make(seed)}, mapping, fixed=fixed, seed=seed,
                    num_envs=self.num_envs)
        marl.run(until=Stop(env_steps=self.steps), progress=False)
        value = float(marl.evaluate(self.eval_episodes, seed=seed + 7919).mean[agents[player]])
        policy = marl.learners[agents[player]].policy()
        return BestResponse(policy, value, marl.env_steps)


def team_psro(game: Game, mapping: AgentMapping, make: Callable[[int], GroupLearner], *, steps: int = 10_000,
              eval_episodes: int = 100, solver: str = "nash", seed: int = 0, num_envs: int = 32) -> PSRO:
    """PSRO over the groups of `mapping`: one population per group, each grown by a fresh `make(seed)` learner.

    Example:
        >>> psro = team_psro(game, mapping, lambda s: pb.MAPPO(seed=s), steps=20_000)  # doctest: +SKIP
    """
    from pbmarl.algorithms.psro.psro import PSRO

    team = TeamGame(game, mapping)
    oracle = GroupOracle(team, make, steps=steps, eval_episodes=eval_episodes, seed=seed, num_envs=num_envs)
    return PSRO(team, solver=solver, learner=oracle, evaluator=TeamEvaluator(team, num_envs=num_envs),
                initial_policies=team.random_policies(), eval_episodes=eval_episodes, seed=seed,
                stop_exploitability=None)
