"""Team games for PSRO: the groups of an `AgentMapping` as the players, one population per group.

``TeamGame(game, mapping)`` is the meta-game's view of a team game such as
``simple_adversary_v3`` (the adversary group against the agents group): player ``p`` is
group ``mapping.groups[p]``, a policy of player ``p`` plays every agent of that group
(built from ``mapping.group_game(group)``), and a player's payoff is its group's return,
the sum of its agents' episode returns (what `pb.MARL` reports as ``return/{group}``).

- `TeamEvaluator` fills a `PayoffTable` over the groups' populations by playing each
  profile for sampled episodes in the same parallel engine `pb.MARL` trains with;
- `pb.algorithms.GroupOracle` on a `TeamGame` trains a group learner (MAPPO, QMIX, ...) for one
  group against the other groups' meta-strategy mixtures;
- `team_psro` (`pbmarl.algorithms.teams.oracle`) puts the three into a `pb.PSRO`.

A `TeamGame` describes no states (the rollout layer steps the game it wraps); its
``new_initial_state`` is an already-finished placeholder, so `Population.add` checks a
member's game name and action count, and the rollout layer checks its observation width.

Example:
    >>> import pbmarl as pb
    >>> game = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
    >>> mapping = pb.AgentMapping(game, {"adversary_0": "red", "agent_0": "blue", "agent_1": "blue"})
    >>> team = TeamGame(game, mapping)
    >>> team.num_players, team.agents, [team.observation_space(p).shape for p in range(2)]
    (2, ['red', 'blue'], [(8,), (10,)])
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.state import State
from pbmarl.policies.base import Policy
from pbmarl.rollout.mapping import AgentMapping
from pbmarl.torchutil import torch_threads

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.payoffs import PayoffTable


class _Finished:
    """The placeholder state of a `TeamGame`: terminal, so nothing asks it for observations."""

    def is_terminal(self) -> bool:
        return True

    def is_chance_node(self) -> bool:
        return False


class TeamGame(Game):
    """The groups of `mapping` as the players of `game`; see the module doc.

    Raises:
        ValueError: groups with Box actions or with different numbers of actions (a meta-game
            population checks one action count for all its players).
    """

    def __init__(self, game: Game, mapping: AgentMapping) -> None:
        from pbmarl.algorithms.teams.marl import steppable

        if not isinstance(mapping, AgentMapping) or mapping.game.name != game.name:
            raise ValueError(f"mapping must be a pb.AgentMapping of {game.name!r}, got {mapping!r}")
        self.base = game
        self.stepped = steppable(game)
        self.mapping = AgentMapping.from_spec(self.stepped, mapping.spec())
        self.views = [self.mapping.group_game(g) for g in self.mapping.groups]
        counts = [v.num_actions for v in self.views]
        if min(counts) < 1 or len(set(counts)) != 1:
            raise ValueError(f"a TeamGame needs every group to act in the same Discrete space; groups "
                             f"{list(self.mapping.groups)} of {game.name!r} act in "
                             f"{[str(v.action_space(0)) for v in self.views]}")
        self.name = game.name
        self.num_players = len(self.views)
        self.agents = list(self.mapping.groups)
        self.num_actions = counts[0]
        self.observation_shape = tuple(self.views[0].observation_shape)
        self.turn_based = False
        self.zero_sum = False
        self.exact_refusal = f"{game.name!r} as a team game is sampled by the rollout layer, not walked as a tree"

    def observation_space(self, player: int) -> Any:
        return self.views[self.check_player(player)].observation_space(0)

    def action_space(self, player: int) -> Any:
        return self.views[self.check_player(player)].action_space(0)

    @property
    def enumerable(self) -> bool:
        return False

    def tree(self, *, max_nodes: int | None = None) -> Any:
        raise ValueError(self.exact_refusal)

    def new_initial_state(self) -> State:
        return _Finished()  # type: ignore[return-value]

    def observation(self, state: State, player: int) -> np.ndarray:
        raise TypeError(f"{self!r} has no states; the rollout layer steps {self.base.name!r}")

    def info_key(self, state: State, player: int) -> str:
        raise TypeError(f"{self!r} has no states; the rollout layer steps {self.base.name!r}")

    def random_policies(self) -> list[Policy]:
        """A uniformly random policy per group: PSRO's usual first members."""
        from pbmarl.policies.simple import RandomPolicy

        return [RandomPolicy(v) for v in self.views]

    def __repr__(self) -> str:
        return f"TeamGame({self.base.name!r}, groups {self.agents})"


@dataclass(frozen=True)
class TeamFill:
    """What a `TeamEvaluator.fill` did: cells filled, episodes and env steps, seconds."""

    cells: int
    episodes: int
    steps: int
    seconds: float


class TeamEvaluator:
    """Fills a team game's payoff table by sampling; see the module doc (a `pbmarl.protocols.Evaluator`)."""

    def __init__(self, team: TeamGame, *, num_envs: int = 32, num_threads: int | None = 1) -> None:
        if not isinstance(team, TeamGame):
            raise TypeError(f"TeamEvaluator needs a pb TeamGame, got {type(team).__name__}")
        self.team, self.num_envs, self.num_threads = team, int(num_envs), num_threads

    def returns(self, profile: list[Any], episodes: int, seed: int | np.random.Generator | None) -> tuple[np.ndarray,
                                                                                                        int]:
        """``([episodes, groups] returns, env steps)`` of one profile (a Policy or Mixture per group)."""
        from pbmarl.rollout.groups import group_plan
        from pbmarl.rollout.parallel_engine import run_parallel
        from pbmarl.rollout.records import Seat

        team = self.team
        group_plan(team.stepped, dict(zip(team.agents, profile)), team.mapping, set())  # fits, or says why
        seats = {g: Seat.of(pi) for g, pi in zip(team.agents, profile)}
        with torch_threads(self.num_threads):  # one thread: several times faster for small nets on a busy machine
            out = run_parallel(team.stepped, team.mapping, seats, set(), np.random.default_rng(seed),
                               num_envs=self.num_envs, episodes=int(episodes))
        ret = np.asarray(out.returns, dtype=float)
        per_group = np.stack([ret[:, list(team.mapping.seats_of(g))].sum(axis=1) for g in team.agents], axis=1)
        return per_group, int(out.steps)

    def fill(self, table: PayoffTable, episodes: int = 100, *,
             seed: int | np.random.Generator | None = None) -> TeamFill:
        """Sample every missing cell `episodes` times; the table changes only if every cell succeeds."""
        t0 = time.perf_counter()
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise ValueError(f"episodes must be a positive int, got {episodes!r}")
        pop = table.population
        if pop is None or pop.game is not self.team and pop.game.name != self.team.name:
            raise ValueError("the table must be bound to a Population of this TeamGame")
        rng = np.random.default_rng(seed)
        done, steps = [], 0
        for cell in table.missing_cells():
            r, s = self.returns([pop[p][i] for p, i in enumerate(cell)], int(episodes), rng)
            done.append((cell, r))
            steps += s
        for cell, r in done:
            table.update(cell, r)
        return TeamFill(len(done), len(done) * int(episodes), steps, time.perf_counter() - t0)
