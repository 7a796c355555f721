"""Adapter for PettingZoo environments (AEC and Parallel) behind the `Game` interface.

``load_game("pettingzoo:connect_four_v3")`` finds the environment in PettingZoo's
registry (``pettingzoo.make``) or among the MPE environments of `mpe2`, reads the
agents from ``env.possible_agents`` and gives seat ``p`` to ``possible_agents[p]``.
AEC environments become turn-based games, Parallel ones simultaneous-move games
(``api="auto"`` picks Parallel where the module offers ``parallel_env``).
Agents act on `Discrete` or `Box` spaces (MPE's ``continuous_actions=True``);
``action_space(p)`` / ``observation_space(p)`` give each agent its own, and where
the environment has a ``state()`` (MPE) ``has_global_state`` is True and
``global_state(state)`` returns it.

Every state wraps one environment instance (environments are reused: a state
hands its instance back to the game when its episode ends). Observations are
flattened to float32 and zero-padded to the largest agent's size; for dict
observations with ``"observation"``/``"action_mask"`` those two are used, and an
``"action_mask"`` in the infos is honoured too. An episode ends when every agent
is terminated or truncated (``max_cycles`` truncation included). The environment's
own randomness is seeded at reset, so states cannot be cloned and the tree cannot
be walked: these games are not enumerable.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.params import check_params, parse_name, signature_of
from pbmarl.games.pettingzoo_sources import available_environments, canonical, family
from pbmarl.games.state import SIMULTANEOUS, TERMINAL

#: MPE lives in its own package, outside PettingZoo's registry
#: classic environments whose payoffs always sum to zero
ZERO_SUM = {"rps", "tictactoe", "connect_four", "leduc_holdem", "texas_holdem", "texas_holdem_no_limit", "chess", "go"}
APIS = ("auto", "aec", "parallel")


def load_pettingzoo(name: str, *, api: str = "auto", **env_kwargs: Any) -> PettingZooGame:
    """Load a PettingZoo environment as a `Game`; keywords go to the environment's constructor.

    Names follow the environment modules (``"connect_four_v3"``, ``"simple_push_v3"``);
    registry ids (``"classic/connect_four-v3"``) work too.

    Example:
        >>> game = load_pettingzoo("connect_four_v3")
        >>> game = load_pettingzoo("simple_push_v3", max_cycles=10)

    Raises:
        ValueError: unknown environment (with close matches), unknown `api`, or an
            environment whose action spaces are not discrete.
    """
    base, params = parse_name(name)
    api = params.pop("api", api)
    params.update(env_kwargs)
    if api not in APIS:
        raise ValueError(f"unknown api {api!r}; use one of {APIS}")
    short = canonical(base)
    known = available_environments()
    if short not in known:
        close = difflib.get_close_matches(short, list(known), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"unknown PettingZoo environment {short!r}{hint} (PettingZoo's registry and mpe2 "
            f"environments such as 'connect_four_v3', 'simple_push_v3')"
        )
    source = known[short]
    raw_env = source.constructor()
    if raw_env is not None:  # refuse bad values before building anything (N=4000 would take a minute)
        signature, open_ended = signature_of(raw_env.__init__)
        check_params(f"pettingzoo:{short}", params, signature, open_ended=open_ended,
                     render_modes=getattr(raw_env, "metadata", {}).get("render_modes"))
    default = "parallel" if "parallel" in source.apis else "aec"
    if api == "auto":
        api = default
    if api not in source.apis:
        raise ValueError(f"{short!r} has no {api} version; use api={default!r}")
    return PettingZooGame(short, source.factory(api), api=api, env_kwargs=params, default_api=default)


class PettingZooGame(Game):
    """A PettingZoo environment behind the `Game` interface; see the module doc."""

    spec_kind = "pettingzoo"

    def __init__(self, env_name: str, factory: Any, *, api: str, env_kwargs: dict[str, Any], default_api: str) -> None:
        import gymnasium

        self.env_name = env_name
        self.api = api
        self.env_kwargs = dict(env_kwargs)
        extra = [f"{k}={v!r}" for k, v in sorted(self.env_kwargs.items())]
        if api != default_api:
            extra.insert(0, f"api={api!r}")
        self.name = f"pettingzoo:{env_name}" + (f"({', '.join(extra)})" if extra else "")
        self._factory = factory
        try:
            probe = factory(**self.env_kwargs)
        except TypeError as exc:
            raise ValueError(f"cannot create {env_name!r} with {self.env_kwargs}: {exc}") from None
        except Exception as exc:
            # PettingZoo raises its own FailedToImport when a family's extra is missing
            if not (isinstance(exc, ImportError) or type(exc).__name__ == "FailedToImport"):
                raise
            needs = family(env_name)
            raise ValueError(f"{env_name!r} needs dependencies that are not installed: "
                             f"pip install 'pettingzoo[{needs}]' ({exc})") from None
        probe.reset(seed=0)
        self.agents = list(probe.possible_agents)
        if not self.agents:
            raise ValueError(f"{self.name!r} has no agents with parameters {self.env_kwargs}")
        self.seat = {agent: p for p, agent in enumerate(self.agents)}
        self.num_players = len(self.agents)
        self.turn_based = api == "aec"
        self.zero_sum = env_name.rpartition("_v")[0] in ZERO_SUM
        self._obs_spaces, counts = [], []
        self._action_spaces: list[Any] = []
        for agent in self.agents:
            space = probe.action_space(agent)
            if isinstance(space, gymnasium.spaces.Box):
                counts.append(0)  # continuous: no discrete actions, an empty legal mask
            elif isinstance(space, gymnasium.spaces.Discrete) and int(space.start) == 0:
                counts.append(int(space.n))
            else:
                raise ValueError(
                    f"{env_name!r}: agent {agent!r} has action space {space}; supported are Discrete(n) and Box"
                )
            self._action_spaces.append(space)
            obs_space = probe.observation_space(agent)
            if isinstance(obs_space, gymnasium.spaces.Dict) and "observation" in obs_space.spaces:
                obs_space = obs_space["observation"]
            self._obs_spaces.append(obs_space)
        self.action_counts = tuple(counts)
        self.num_actions = max(counts)
        self._flat_dims = [int(gymnasium.spaces.flatdim(s)) for s in self._obs_spaces]
        self.observation_shape = (max(self._flat_dims),)
        #: per seat, whether the agent's actions are continuous (a Box)
        self.continuous = tuple(isinstance(s, gymnasium.spaces.Box) for s in self._action_spaces)
        try:  # MPE and other Parallel environments describe the whole world in state()
            self.global_state_shape = tuple(np.asarray(probe.state(), dtype=np.float32).reshape(-1).shape)
            self.has_global_state = True
        except (NotImplementedError, AttributeError, TypeError, ValueError):  # none, or not a numeric vector
            self.has_global_state = False
        self._free: list[Any] = [probe]

    @property
    def enumerable(self) -> bool:
        return False

    def action_space(self, player: int) -> Any:
        """The agent's own action space (`Discrete` or `Box`), as the environment gives it."""
        return self._action_spaces[self.check_player(player)]

    def observation_space(self, player: int) -> Any:
        """The agent's own flattened float32 `Box` (unpadded: agents keep their own sizes)."""
        import gymnasium

        flat: Any = gymnasium.spaces.flatten_space(self._obs_spaces[self.check_player(player)])
        return gymnasium.spaces.Box(flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32)

    def global_state(self, state: Any) -> np.ndarray:
        """The environment's ``state()`` at `state` as a flat float32 vector (see `Game`)."""
        if not self.has_global_state:
            return super().global_state(state)
        if state.env is None:
            raise ValueError(f"the episode of {self.name!r} is over: its global state is gone with its environment")
        return np.asarray(state.env.state(), dtype=np.float32).reshape(-1)

    def env_action(self, player: int, action: Any) -> Any:
        """`action` of seat `player` as the environment takes it: an int, or a float array
        checked against the agent's Box (a ValueError names the value and the bounds)."""
        if self.continuous[player]:
            from pbmarl.games.spaces import check_action

            who = f"agent {self.agents[player]!r} of {self.name!r}"
            return check_action(self._action_spaces[player], action, who=who)
        return int(action)

    def make_env(self) -> Any:
        """A fresh environment instance of this game (unreset), for steppers that drive it directly."""
        return self._factory(**self.env_kwargs)

    def new_initial_state(self, *, seed: int | None = None) -> PettingZooState:
        """A fresh episode; `seed` seeds the environment's own randomness."""
        env = self._free.pop() if self._free else self._factory(**self.env_kwargs)
        return PettingZooState(self, env, seed)

    def observation(self, state: Any, player: int) -> np.ndarray:
        return state.observation(player)

    def legal_mask(self, state: Any, player: int) -> np.ndarray:
        return state.legal_mask(player)

    def info_key(self, state: Any, player: int) -> str:
        return f"{self.agents[player]}:{state.observation(player).tobytes().hex()}"

    def flatten(self, player: int, raw: Any) -> np.ndarray:
        """The padded float32 observation of `player` from the environment's raw one."""
        if isinstance(raw, dict) and "observation" in raw:
            raw = raw["observation"]
        if isinstance(raw, np.ndarray) and raw.dtype != object:
            flat = raw.astype(np.float32, copy=False).ravel()
        else:
            import gymnasium

            flat = np.asarray(gymnasium.spaces.flatten(self._obs_spaces[player], raw), dtype=np.float32).ravel()
        size = self.observation_shape[0]
        if len(flat) == size:
            return flat
        out = np.zeros(size, dtype=np.float32)
        out[: len(flat)] = flat
        return out

    def mask_from(self, player: int, raw: Any, info: Any) -> np.ndarray:
        """Legal actions of `player` from its raw observation or infos (all of its actions if neither has a mask)."""
        mask = None
        if isinstance(raw, dict) and "action_mask" in raw:
            mask = raw["action_mask"]
        elif isinstance(info, dict) and "action_mask" in info:
            mask = info["action_mask"]
        out = np.zeros(self.num_actions, dtype=bool)
        if mask is None:
            out[: self.action_counts[player]] = True
        else:
            m = np.asarray(mask).astype(bool).ravel()
            out[: len(m)] = m
        return out

    def _release(self, env: Any) -> None:
        self._free.append(env)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.env_name, self.api, self.env_kwargs))


def _rebuild(env_name: str, api: str, env_kwargs: dict[str, Any]) -> PettingZooGame:
    return load_pettingzoo(env_name, api=api, **env_kwargs)


class PettingZooState:
    """One episode of a PettingZoo environment, following the pyspiel-like state protocol.

    Rewards are summed over every environment step an action causes (including the
    steps that retire finished agents); `returns()` is their running total.
    """

    def __init__(self, game: PettingZooGame, env: Any, seed: int | None) -> None:
        self.game = game
        self.env: Any = env
        self._base: Any = env.unwrapped  # reads skip the wrappers' __getattr__ chains; steps go through them
        self._current = -1
        P = game.num_players
        self._returns = np.zeros(P)
        self._rewards = np.zeros(P)
        self._terminal = False
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._parallel = game.api == "parallel"
        if self._parallel:
            self._obs, self._infos = env.reset(seed=seed)
        else:
            env.reset(seed=seed)
            self._settle()

    # -- environment bookkeeping -------------------------------------------------
    def _collect(self, rewards: dict[str, float]) -> None:
        r = np.array([float(rewards.get(a, 0.0)) for a in self.game.agents])
        self._rewards += r
        self._returns += r

    def _settle(self) -> None:
        """Retire finished AEC agents until a live one must act, or end the episode."""
        base = self._base
        while True:
            alive = [a for a in base.agents if not (base.terminations[a] or base.truncations[a])]
            if not alive:
                self._end()
                return
            if base.agent_selection in alive:
                self._current = self.game.seat[base.agent_selection]
                return
            self.env.step(None)
            self._collect(base.rewards)

    def _end(self) -> None:
        self._terminal = True
        self._cache.clear()
        self.game._release(self.env)
        self.env = self._base = None

    def _check_live(self) -> None:
        if self._terminal:
            raise ValueError(f"the episode of {self.game.name!r} is over")

    # -- the state protocol ---------------------------------------------------------
    def is_terminal(self) -> bool:
        return self._terminal

    def is_chance_node(self) -> bool:
        return False

    def is_simultaneous_node(self) -> bool:
        return self._parallel and not self._terminal

    def current_player(self) -> int:
        if self._terminal:
            return TERMINAL
        if self._parallel:
            return SIMULTANEOUS
        return self._current

    def chance_outcomes(self) -> list[tuple[int, float]]:
        return []

    def _raw(self, player: int) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(player)
        if hit is None:
            self._check_live()
            agent = self.game.agents[player]
            if self._parallel:
                raw, info = self._obs.get(agent), self._infos.get(agent)
                if raw is None or agent not in self.env.agents:
                    hit = (np.zeros(self.game.observation_shape, np.float32), np.zeros(self.game.num_actions, bool))
                else:
                    hit = (self.game.flatten(player, raw), self.game.mask_from(player, raw, info))
            else:
                raw = self.env.observe(agent)
                hit = (self.game.flatten(player, raw), self.game.mask_from(player, raw, self._base.infos.get(agent)))
            self._cache[player] = hit
        return hit

    def observation(self, player: int) -> np.ndarray:
        return self._raw(player)[0]

    def legal_mask(self, player: int) -> np.ndarray:
        if self._terminal or (not self._parallel and player != self.current_player()):
            return np.zeros(self.game.num_actions, dtype=bool)
        return self._raw(player)[1]

    def legal_actions(self, player: int) -> list[int]:
        return np.flatnonzero(self.legal_mask(player)).tolist()

    def apply_action(self, action: int) -> None:
        self._check_live()
        if self._parallel:
            raise ValueError(f"{self.game.name!r} is a simultaneous-move (Parallel) game: use apply_actions")
        player = self.current_player()
        if not self.game.continuous[player]:
            self._check_legal(player, action)
        act = self.game.env_action(player, action)
        self._rewards = np.zeros(self.game.num_players)
        self._cache.clear()
        self.env.step(act)
        self._collect(self._base.rewards)
        self._settle()

    def apply_actions(self, actions: list[int]) -> None:
        self._check_live()
        if not self._parallel:
            raise ValueError(f"{self.game.name!r} is a turn-based (AEC) game: use apply_action")
        joint = {}
        for p, agent in enumerate(self.game.agents):
            if agent in self.env.agents:
                if not self.game.continuous[p]:
                    self._check_legal(p, actions[p])
                joint[agent] = self.game.env_action(p, actions[p])
        self._rewards = np.zeros(self.game.num_players)
        self._cache.clear()
        self._obs, rewards, terms, truncs, self._infos = self.env.step(joint)
        self._collect(rewards)
        if not self.env.agents or all(terms.get(a, False) or truncs.get(a, False) for a in self.env.agents):
            self._end()

    def _check_legal(self, player: int, action: int) -> None:
        mask = self.legal_mask(player)
        if not (0 <= int(action) < len(mask) and mask[int(action)]):
            raise ValueError(
                f"illegal action {action} for player {player} ({self.game.agents[player]!r}) in {self.game.name!r}; "
                f"legal actions are {np.flatnonzero(mask).tolist()}"
            )

    def rewards(self) -> list[float]:
        return self._rewards.tolist()

    def returns(self) -> list[float]:
        return self._returns.tolist()

    def clone(self) -> PettingZooState:
        raise NotImplementedError(
            f"PettingZoo states of {self.game.name!r} cannot be cloned (an environment's internal "
            "state cannot be copied); use the rollout runner, which never clones"
        )
