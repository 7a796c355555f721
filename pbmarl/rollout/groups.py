"""Checking a multi-agent `collect` call before anything runs: which policies play which group.

`group_plan` turns ``policies={group: policy_or_mixture}``, a mapping and the learning
groups into a `GroupPlan`, or raises naming the bad value: a group the mapping does not
have (or one it has that no policy plays), a learning group that is not a group, a
policy whose observation or action size does not fit its group's agents.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.rollout.mapping import AgentMapping
from pbmarl.rollout.units import GroupsRef, SeatRef


@dataclass(frozen=True, eq=False)
class GroupPlan:
    """A checked dispatch: the mapping, each group's members and weights, the learning groups."""

    mapping: AgentMapping
    seats: tuple[tuple[str, tuple[Policy, ...], tuple[float, ...]], ...]
    learning: tuple[str, ...]

    def members(self) -> list[Policy]:
        return [pi for _, members, _ in self.seats for pi in members]

    def ref(self, token: Callable[[Policy], str], *, stepper: str = "auto", whole_episodes: bool = True) -> GroupsRef:
        """The plan by reference, as work units carry it (policies named by `token`)."""
        spec = self.mapping.spec()
        seats = tuple((g, SeatRef(tuple(token(pi) for pi in members), weights)) for g, members, weights in self.seats)
        return GroupsRef(tuple(spec["assignment"].items()), self.mapping.agent_id, self.mapping.pad, seats, self.learning,
                         stepper, bool(whole_episodes))


def group_plan(game: Game, policies: Mapping[str, Policy | Mixture], mapping: AgentMapping | None,
               learning: Collection[str] | None) -> GroupPlan:
    """Check a multi-agent collect's arguments; see the module doc. `mapping` None: one group per agent."""
    from pbmarl.envs.instances import parallel_capable

    if not parallel_capable(game):
        raise ValueError(f"collect(policies=...) steps PettingZoo Parallel, Gymnasium and mdp: games; {game.name!r} "
                         "is neither: use collect(player, policy, opponents, steps)")
    if mapping is None:
        mapping = AgentMapping.independent(game)
    if not isinstance(mapping, AgentMapping):
        raise TypeError(f"mapping must be a pb.AgentMapping, got {type(mapping).__name__}: {mapping!r}")
    if mapping.game.name != game.name:
        raise ValueError(f"the mapping was made for {mapping.game.name!r}, but this pool plays {game.name!r}")
    if not isinstance(policies, Mapping):
        raise TypeError(f"policies must be a dict {{group: Policy or Mixture}}, got {policies!r}")
    unknown = [g for g in policies if g not in mapping.groups]
    missing = [g for g in mapping.groups if g not in policies]
    if unknown or missing:
        said = [f"unknown group(s) {unknown}"] * bool(unknown) + [f"missing group(s) {missing}"] * bool(missing)
        raise ValueError(f"policies must name every group of the mapping {list(mapping.groups)} and no other; "
                         + ", ".join(said))
    learn = tuple(mapping.groups) if learning is None else tuple(learning)
    if isinstance(learning, str) or any(g not in mapping.groups for g in learn):
        raise ValueError(f"learning must be a set of groups out of {list(mapping.groups)}, got {learning!r}")
    from gymnasium import spaces

    seats = []
    for group in mapping.groups:
        space = mapping.group_game(group).action_space(0)
        if not isinstance(space, (spaces.Discrete, spaces.Box)):
            raise ValueError(f"group {group!r} acts in {space}; multi-agent collection supports Discrete and Box actions")
        entry = policies[group]
        members: tuple[Policy, ...]
        weights: tuple[float, ...]
        if isinstance(entry, Policy):
            members, weights = (entry,), (1.0,)
        elif isinstance(entry, Mixture):
            members, weights = tuple(entry.policies), tuple(float(w) for w in entry.weights)
        else:
            raise TypeError(f"group {group!r} must be played by a Policy or a Mixture, got {type(entry).__name__}: {entry!r}")
        for pi in members:
            check_fits(pi, mapping, group)
        seats.append((group, members, weights))
    return GroupPlan(mapping, tuple(seats), tuple(g for g in mapping.groups if g in learn))


def check_fits(policy: Any, mapping: AgentMapping, group: str) -> None:
    """Raise unless `policy` is a Policy whose observation and action sizes fit `group`'s rows."""
    if not isinstance(policy, Policy):
        raise TypeError(f"group {group!r}'s policy must be a pbmarl Policy, got {type(policy).__name__}: {policy!r}")
    view = mapping.group_game(group)
    if policy.game_name != view.name:
        raise ValueError(f"group {group!r}'s policy {policy!r} was made for game {policy.game_name!r}, not {view.name!r}")
    if tuple(policy.observation_shape) != tuple(view.observation_shape) or policy.num_actions != view.num_actions:
        raise ValueError(
            f"group {group!r}'s policy {policy!r} takes observations {tuple(policy.observation_shape)} and "
            f"{policy.num_actions} actions, but the group's agents {list(mapping.agents_of(group))} give observations "
            f"{view.observation_shape} and act in {view.action_space(0)}; build it from mapping.group_game({group!r})"
        )
    if view.num_actions == 0:  # a Box group: the policy must act in the same Box
        from pbmarl.policies.continuous import BoxPolicy

        if not isinstance(policy, BoxPolicy) or policy.action_space != view.action_space(0):
            space = policy.action_space if isinstance(policy, BoxPolicy) else "a discrete space"
            raise ValueError(f"group {group!r}'s policy {policy!r} acts in {space}, but the group's agents "
                             f"{list(mapping.agents_of(group))} act in {view.action_space(0)}")
