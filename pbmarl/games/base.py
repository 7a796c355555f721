"""The `Game` abstraction: what every adapter (OpenSpiel, matrix, PettingZoo) provides.

A game hands out *states* that follow the small, pyspiel-like protocol of
`pbmarl.games.state` and describes them; it does not step them. One stepper
(`pbmarl.games.stepper`: `VecEnv`, and the functions the rollout layer's state engine
steps through) and one tree builder (`pbmarl.games.tree`, kept by `pbmarl.games.tree_cache`)
serve every adapter whose states support it. Both need only `pbmarl.games.state`, so
`Game.tree()` and `Game.vec_env()` call down into them.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.games.stepper import VecEnv
from pbmarl.games.tree_cache import game_tree

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.state import State
    from pbmarl.games.tree import GameTree


class Game(abc.ABC):
    """A loaded game.

    Attributes:
        name: the name it was loaded by, e.g. ``"goofspiel(num_cards=4)"``.
        num_players: number of seats.
        num_actions: size of the discrete action space (distinct actions over all players);
            0 where every player's actions are continuous (`Box`).
        observation_shape: shape of one player's observation tensor (the largest one,
            where agents differ; `observation_space(player)` gives each agent its own).
        turn_based: False for simultaneous-move games.
        zero_sum: True when payoffs always sum to zero.

    Spaces and agents (for runners, learners and policies on any space):
        ``agents``: the environment's agent names in seat order (``"player_0"``, ...
        where the source has no names of its own). ``action_space(player)`` and
        ``observation_space(player)`` are `gymnasium.spaces` objects (`Discrete`,
        `Box`, `MultiDiscrete`), each agent with its own sizes. A `Discrete(n)` agent
        plays actions ``0..n-1`` and its legal mask is ``num_actions`` long.

    Real environments (for steppers that drive them directly):
        Gymnasium, PettingZoo and MDP games have ``make_env()``, a fresh environment
        seeded by its ``reset(seed=...)``; Gymnasium and PettingZoo games'
        ``new_initial_state(seed=...)`` seeds the state's own environment (MDP states
        draw their outcomes at chance nodes, like OpenSpiel's). Episodes end by termination or truncation (time
        limit, ``max_cycles``, an MDP's horizon), which their states and envs keep apart.

    Global state (centralised critics):
        ``has_global_state`` says whether ``global_state(state)`` answers: a float32
        vector of shape ``global_state_shape`` describing the whole state (MPE's
        ``env.state()``), the same for every agent. Games without one raise.
    """

    #: whether `global_state(state)` is available (e.g. MPE's ``state()``)
    has_global_state: bool = False
    #: shape of `global_state(state)` where `has_global_state`, else ``()``
    global_state_shape: tuple[int, ...] = ()

    @property
    def agents(self) -> list[str]:
        """The agent names in seat order; ``["player_0", ...]`` unless the source names them."""
        named: list[str] | None = self.__dict__.get("_agents")  # read often by steppers: no copy
        return named if named is not None else [f"player_{p}" for p in range(self.num_players)]

    @agents.setter
    def agents(self, names: Sequence[str]) -> None:
        self._agents = list(names)

    def action_space(self, player: int) -> Any:
        """`player`'s action space, a `gymnasium.spaces` object; `Discrete(num_actions)` by default."""
        from gymnasium import spaces

        self.check_player(player)
        counts = getattr(self, "action_counts", None)
        n = int(counts[player]) if counts is not None else int(self.num_actions)
        return spaces.Discrete(n)

    def observation_space(self, player: int) -> Any:
        """`player`'s observation space: an unbounded float32 `Box` of `observation_shape` by default."""
        from gymnasium import spaces

        self.check_player(player)
        return spaces.Box(-np.inf, np.inf, shape=tuple(self.observation_shape), dtype=np.float32)

    def global_state(self, state: State) -> np.ndarray:
        """The float32 global state at `state` (see the class doc); raises where there is none."""
        raise ValueError(
            f"game {self.name!r} has no global state (has_global_state is False); "
            "centralised critics can use the concatenated observations instead"
        )

    name: str
    num_players: int
    num_actions: int
    observation_shape: tuple[int, ...]
    turn_based: bool
    zero_sum: bool

    @abc.abstractmethod
    def new_initial_state(self) -> State:
        """A fresh state at the start of the game (possibly a chance node)."""

    @abc.abstractmethod
    def observation(self, state: State, player: int) -> np.ndarray:
        """The float32 observation tensor of `player` at `state`."""

    #: set (by the tree builder) when the game's own strings lack perfect recall: `info_key`
    #: then names information sets by the player's action-observation history (`pbmarl.games.recall`)
    recall_keys: bool = False
    #: why the exact engine cannot take this game (None: it can, if the tree fits in memory)
    exact_refusal: str | None = None

    @abc.abstractmethod
    def info_key(self, state: State, player: int) -> str:
        """A string that names `player`'s information state at `state`."""

    def info_string(self, state: State, player: int) -> str:
        """The game's own string for `player`'s information state (`info_key` unless recall keys are on)."""
        return self.info_key(state, player)

    @property
    def enumerable(self) -> bool:
        """Whether the game tree can be walked (needed for tabular policies and the exact engine)."""
        return True

    def tree(self, *, max_nodes: int | None = None) -> GameTree:
        """The whole game tree as flat arrays, built (or loaded from the disk cache) once and kept.

        Refused, with the reason, for games outside the exact engine and for trees whose
        estimated memory exceeds what is available (or with more than `max_nodes` histories).
        """
        return game_tree(self, max_nodes=max_nodes)

    def tree_identity(self) -> dict[str, str] | None:
        """What names this game's tree in the disk cache (`pbmarl.games.tree_cache`); None: never cached.

        A game whose tree is a pure function of a name and a library version says so here."""
        return None

    def legal_mask(self, state: State, player: int) -> np.ndarray:
        mask = np.zeros(self.num_actions, dtype=bool)
        mask[state.legal_actions(player)] = True
        return mask

    def vec_env(self, num_envs: int, *, seed: int | np.random.Generator | None = None) -> VecEnv:
        """`num_envs` game instances stepped together; see `pbmarl.games.stepper.VecEnv`."""
        return VecEnv(self, num_envs, seed=seed)

    def check_player(self, player: int) -> int:
        """Return `player` as an int, or raise naming the bad value and the accepted range."""
        if isinstance(player, (bool, np.bool_)) or not isinstance(player, (int, np.integer)):
            raise TypeError(f"player must be an int in 0..{self.num_players - 1}, got {player!r}")
        if not 0 <= player < self.num_players:
            raise ValueError(
                f"player {player} is out of range for {self.name!r}: "
                f"it has players 0..{self.num_players - 1}"
            )
        return int(player)

    def __repr__(self) -> str:
        kind = "turn-based" if self.turn_based else "simultaneous"
        payoff = "zero-sum" if self.zero_sum else "general-sum"
        return (
            f"{type(self).__name__}({self.name!r}: {self.num_players} players, "
            f"{self.num_actions or 'continuous'} actions, obs {self.observation_shape}, {kind}, {payoff})"
        )
