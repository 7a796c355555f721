"""Which policy plays which agent: `AgentMapping` (Tianshou's `MultiAgentPolicyManager`,
MALib's ``agent_mapping_func``), and the small observation transforms a shared policy uses.

A mapping sends every agent of a game to a *group*; one policy (or mixture) plays
each group, and the runner hands it the rows of that group's agents only, in one
forward pass per step. The agents of one group must look alike to their policy:
same observation width and same action space. Where they do not, a mapping can
pad observations (``pad=True``, zeros at the end, and `Discrete` action counts up
to the largest, the extra actions illegal) -- only when asked. A shared policy
can also see which agent a row belongs to (``agent_id=True`` appends a one-hot
of the agent's index within its group).

Example:
    >>> import pbmarl as pb
    >>> game = pb.load_game("pettingzoo:simple_adversary_v3")
    >>> m = pb.AgentMapping(game, {"adversary_0": "red", "agent_0": "blue", "agent_1": "blue"})
    >>> m.groups, m["agent_0"], m.agents_of("blue")
    (('red', 'blue'), 'blue', ('agent_0', 'agent_1'))
    >>> pi_blue = pb.MLPPolicy(m.group_game("blue"))      # sized for the blue agents' rows
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbmarl.config import did_you_mean
from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.games.state import State


@dataclass(frozen=True)
class PadObservation:
    """Zero-pads observation rows ``[B, d]`` to ``[B, width]`` (``d <= width``)."""

    width: int

    def __call__(self, obs: np.ndarray, index: np.ndarray) -> np.ndarray:
        if obs.shape[1] == self.width:
            return obs
        out = np.zeros((len(obs), self.width), dtype=np.float32)
        out[:, : obs.shape[1]] = obs
        return out

    def out_width(self, width: int) -> int:
        return self.width


@dataclass(frozen=True)
class AgentIdFeature:
    """Appends a one-hot of each row's agent index (within its group, ``0..size-1``) to ``[B, d]`` rows."""

    size: int

    def __call__(self, obs: np.ndarray, index: np.ndarray) -> np.ndarray:
        onehot = np.zeros((len(obs), self.size), dtype=np.float32)
        onehot[np.arange(len(obs)), index] = 1.0
        return np.concatenate([obs.astype(np.float32, copy=False), onehot], axis=1)

    def out_width(self, width: int) -> int:
        return width + self.size


Transform = PadObservation | AgentIdFeature


class AgentMapping:
    """Agents to groups; see the module doc.

    Args:
        game: the game whose agents are mapped (``game.agents``, in seat order).
        assignment: ``{agent: group}`` naming every agent, or a callable ``agent -> group``.
        agent_id: append a one-hot agent index to the observations of groups with more than one agent.
        pad: let agents of different observation widths (or `Discrete` action counts) share a group.

    Raises:
        ValueError: an agent missing from `assignment`, an agent the game does not have,
            or, without `pad`, agents of different shapes in one group.
    """

    def __init__(self, game: Game | str, assignment: Mapping[str, str] | Callable[[str], str], *,
                 agent_id: bool = False, pad: bool = False, **unknown: Any) -> None:
        if unknown:
            name = next(iter(unknown))
            raise TypeError(f"unknown option {name!r} for AgentMapping{did_you_mean(name, ('agent_id', 'pad'))} "
                            "Accepted options: agent_id, pad")
        game = as_game(game)
        for name, flag in (("agent_id", agent_id), ("pad", pad)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {flag!r}")
        self.game = game
        self.agents: tuple[str, ...] = tuple(game.agents)
        if callable(assignment) and not isinstance(assignment, Mapping):
            table = {agent: assignment(agent) for agent in self.agents}
        elif isinstance(assignment, Mapping):
            table = dict(assignment)
            strangers = [a for a in table if a not in self.agents]
            if strangers:
                close = difflib.get_close_matches(str(strangers[0]), self.agents, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"the mapping names agent {strangers[0]!r}{hint}, which {game.name!r} does not have; "
                                 f"its agents are {list(self.agents)}")
            missing = [a for a in self.agents if a not in table]
            if missing:
                raise ValueError(f"the mapping misses agent(s) {missing} of {game.name!r}; map every agent of "
                                 f"{list(self.agents)} to a group")
        else:
            raise TypeError(f"assignment must be a dict {{agent: group}} or a callable agent -> group, got {assignment!r}")
        for agent, group in table.items():
            if not isinstance(group, str) or not group:
                raise ValueError(f"agent {agent!r} is mapped to {group!r}; group names are non-empty strings")
        self._group_of: dict[str, str] = {a: table[a] for a in self.agents}
        self.groups: tuple[str, ...] = tuple(dict.fromkeys(self._group_of[a] for a in self.agents))
        self.agent_id = bool(agent_id)
        self.pad = bool(pad)
        self._members = {g: tuple(a for a in self.agents if self._group_of[a] == g) for g in self.groups}
        self._games = {g: self._group_game(g) for g in self.groups}

    # -- constructors ---------------------------------------------------------------
    @classmethod
    def independent(cls, game: Game | str, **options: Any) -> AgentMapping:
        """One group per agent, named after the agent."""
        game = as_game(game)
        return cls(game, {a: a for a in game.agents}, **options)

    @classmethod
    def shared(cls, game: Game | str, group: str = "shared", **options: Any) -> AgentMapping:
        """All agents in one group (one policy plays them all)."""
        game = as_game(game)
        return cls(game, {a: group for a in game.agents}, **options)

    # -- lookups --------------------------------------------------------------------
    def __getitem__(self, agent: str) -> str:
        try:
            return self._group_of[agent]
        except KeyError:
            raise KeyError(f"{agent!r} is not an agent of {self.game.name!r}; its agents are {list(self.agents)}") from None

    def agents_of(self, group: str) -> tuple[str, ...]:
        """The group's agents, in seat order."""
        return self._members[self._check_group(group)]

    def seats_of(self, group: str) -> tuple[int, ...]:
        """The seats (player indices) of the group's agents."""
        return tuple(self.agents.index(a) for a in self.agents_of(group))

    def group_game(self, group: str) -> GroupGame:
        """The game as the group's policy sees it: build the group's policy from this."""
        return self._games[self._check_group(group)]

    def transforms(self, group: str) -> tuple[Transform, ...]:
        """The observation transforms applied to the group's rows, in order."""
        return self._games[self._check_group(group)].transforms

    def spec(self) -> dict[str, Any]:
        """JSON-able description; `AgentMapping.from_spec(game, spec)` rebuilds it."""
        return {"assignment": dict(self._group_of), "agent_id": self.agent_id, "pad": self.pad}

    @classmethod
    def from_spec(cls, game: Game, spec: Mapping[str, Any]) -> AgentMapping:
        """The mapping `spec()` describes: ``{"assignment": {agent: group}, "agent_id": bool, "pad": bool}``."""
        keys = ("assignment", "agent_id", "pad")
        if not isinstance(spec, Mapping) or set(spec) != set(keys) or not isinstance(spec["assignment"], Mapping):
            got = sorted(spec) if isinstance(spec, Mapping) else spec
            raise ValueError(f"a mapping spec holds exactly the keys {list(keys)} (assignment a dict agent -> group), "
                             f"got {got!r}")
        return cls(game, dict(spec["assignment"]), agent_id=spec["agent_id"], pad=spec["pad"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentMapping) and other.game.name == self.game.name and other.spec() == self.spec()

    def __hash__(self) -> int:
        return hash((self.game.name, tuple(self._group_of.items()), self.agent_id, self.pad))

    def __repr__(self) -> str:
        parts = ", ".join(f"{g}: {list(self._members[g])}" for g in self.groups)
        opts = "".join(f", {k}=True" for k in ("agent_id", "pad") if getattr(self, k))
        return f"AgentMapping({self.game.name!r}, {{{parts}}}{opts})"

    # -- internals --------------------------------------------------------------------
    def _check_group(self, group: str) -> str:
        if group not in self._members:
            raise KeyError(f"unknown group {group!r}; this mapping has groups {list(self.groups)}")
        return group

    def _group_game(self, group: str) -> GroupGame:
        from gymnasium import spaces

        seats = [self.agents.index(a) for a in self._members[group]]
        obs_spaces = [self.game.observation_space(p) for p in seats]
        act_spaces = [self.game.action_space(p) for p in seats]
        widths = [int(np.prod(s.shape)) for s in obs_spaces]
        names = list(self._members[group])
        transforms: list[Transform] = []
        if len(set(widths)) > 1:
            if not self.pad:
                raise ValueError(
                    f"group {group!r} maps agents of different observation sizes to one policy: "
                    f"{dict(zip(names, widths))}; pass pad=True to zero-pad them to {max(widths)}, "
                    "or map them to different groups"
                )
            transforms.append(PadObservation(max(widths)))
        action = _common_action_space(group, names, act_spaces, pad=self.pad, spaces=spaces)
        if self.agent_id and len(seats) > 1:
            transforms.append(AgentIdFeature(len(seats)))
        width = max(widths)
        for t in transforms:
            width = t.out_width(width)
        return GroupGame(self.game, group, tuple(names), action, width, tuple(transforms), max(widths))


def _common_action_space(group: str, names: Sequence[str], act_spaces: Sequence[Any], *, pad: bool, spaces: Any) -> Any:
    first = act_spaces[0]
    if all(s == first for s in act_spaces):
        return first
    if pad and all(isinstance(s, spaces.Discrete) and int(s.start) == 0 for s in act_spaces):
        return spaces.Discrete(max(int(s.n) for s in act_spaces))
    described = {n: str(s) for n, s in zip(names, act_spaces)}
    fix = "" if pad else "; pass pad=True where they are Discrete of different sizes"
    raise ValueError(f"group {group!r} maps agents of different action spaces to one policy: {described}{fix}, "
                     "or map them to different groups")


class GroupGame(Game):
    """The game seen by one group's policy: the group's observation width and action space.

    It carries the game's name (policies made from it check against the game) and
    describes no states: the rollout layer steps the real game.
    """

    def __init__(self, game: Game, group: str, agents: tuple[str, ...], action: Any, width: int,
                 transforms: tuple[Transform, ...], agent_width: int) -> None:
        from gymnasium import spaces

        self.base = game
        self.group = group
        self.name = game.name
        self.num_players = game.num_players
        self.turn_based = game.turn_based
        self.zero_sum = game.zero_sum
        self.group_agents = agents
        self.transforms = transforms
        #: the widest of the agents' own observations (rows are laid out this wide before `transforms`)
        self.agent_width = int(agent_width)
        self._action = action
        self._obs = spaces.Box(-np.inf, np.inf, shape=(int(width),), dtype=np.float32)
        self.num_actions = int(action.n) if isinstance(action, spaces.Discrete) else 0
        self.observation_shape = (int(width),)
        self.agents = list(game.agents)
        self.has_global_state = game.has_global_state
        self.global_state_shape = game.global_state_shape

    def action_space(self, player: int) -> Any:
        return self._action

    def observation_space(self, player: int) -> Any:
        return self._obs

    @property
    def enumerable(self) -> bool:
        return False

    def new_initial_state(self) -> State:
        raise TypeError(f"{self!r} describes what group {self.group!r}'s policy sees; step {self.base.name!r} itself")

    def observation(self, state: State, player: int) -> np.ndarray:
        raise TypeError(f"{self!r} has no states; step {self.base.name!r} itself")

    def info_key(self, state: State, player: int) -> str:
        raise TypeError(f"{self!r} has no states; step {self.base.name!r} itself")

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError("a GroupGame is not shipped; ship the AgentMapping's spec and rebuild it")

    def __repr__(self) -> str:
        return f"GroupGame({self.name!r}, group {self.group!r}: obs {self.observation_shape}, action {self._action})"
