"""What the multi-agent learners share: the `GroupLearner` seam and the joint view of a group's rows.

A group learner (MAPPO, IPPO, QMIX, MADDPG) trains the policy of one group of an
`AgentMapping` from the rows `RolloutPool.collect(policies=..., mapping=...)` returns.
`pb.MARL` drives it: ``bind`` once (build the networks for the group's agents),
then every round ``behaviour()`` plays, ``train(rows)`` learns. Every group learner is built
as ``Type(game=None, *, seed=0, config=None, **options)``: the game may be left out (the
driver hands it over) or given as a `Game` or a name, which the driver then checks.

`joint_steps` turns the rows (ordered by episode, agent, time) into one row per env
step with the agents side by side, ``[S, n, ...]``: what centralised critics and
mixers read. The global state is the game's (``game.has_global_state``) or, where
there is none, the agents' observations concatenated (`central_input`).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import Rule, build_config, check_seed, is_int
from pbmarl.games.base import Game
from pbmarl.learners.common.config import refuse_device
from pbmarl.policies.base import Policy
from pbmarl.rollout.mapping import AgentMapping, GroupGame
from pbmarl.rollout.trajectories import Trajectories

#: the rule of ``hidden`` (layer widths): a tuple or list of positive ints, never a string or a float
HIDDEN: Rule = (lambda v: isinstance(v, tuple) and all(is_int(h) and h >= 1 for h in v),
                "a sequence of positive ints (layer widths), such as (64, 64)")


def as_widths(value: Any) -> Any:
    """A list of widths as a tuple of ints (what `HIDDEN` then checks); anything else unchanged."""
    if isinstance(value, (list, tuple)) and all(is_int(h) for h in value):
        return tuple(int(h) for h in value)
    return value


@dataclass(frozen=True, eq=False)
class JointSteps:
    """A group's rows with its agents side by side: S env steps, n agents.

    ``obs``/``next_obs`` ``[S, n, d]``, ``legal_mask``/``next_legal_mask`` ``[S, n, A]``,
    ``action`` ``[S, n]`` (or ``[S, n, k]`` for Box), ``log_prob``/``reward``/``terminated``/
    ``truncated`` ``[S, n]``, ``state``/``next_state`` ``[S, W]`` (None without a global
    state), ``episode``/``time`` ``[S]``, and ``index`` ``[S, n]``: each entry's row in the
    original `Trajectories`.
    """

    obs: np.ndarray
    next_obs: np.ndarray
    legal_mask: np.ndarray
    next_legal_mask: np.ndarray
    action: np.ndarray
    log_prob: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    state: np.ndarray | None
    next_state: np.ndarray | None
    episode: np.ndarray
    time: np.ndarray
    index: np.ndarray

    def __len__(self) -> int:
        return len(self.episode)

    @property
    def done(self) -> np.ndarray:
        """``[S]``: the episode ended after this step (any agent finished)."""
        return (self.terminated | self.truncated).any(axis=1)


def joint_steps(traj: Trajectories, seats: tuple[int, ...]) -> JointSteps:
    """Line up the rows of the agents `seats` (in that order) step by step.

    Raises:
        ValueError: the agents do not act at the same steps (turn-based games, or agents
            that leave an episode early): their rows cannot be put side by side.
    """
    if traj.agent is None or traj.time is None or traj.log_prob is None:
        raise ValueError("joint_steps needs multi-agent rows (RolloutPool.collect(policies=..., mapping=...))")
    keys = None
    cols = []
    for seat in seats:
        rows = np.flatnonzero(traj.agent == seat)  # already in (episode, time) order
        k = np.stack([traj.episode[rows], traj.time[rows]], axis=1)
        if keys is None:
            keys = k
        elif k.shape != keys.shape or not np.array_equal(k, keys):
            raise ValueError(
                f"the agents of group {traj.group!r} (seats {list(seats)}) do not act at the same steps, so their "
                "rows cannot be lined up for a centralised critic or mixer; use a game whose agents act together "
                "(PettingZoo Parallel, a matrix game) or an independent learner"
            )
        cols.append(rows)
    index = np.stack(cols, axis=1)
    assert keys is not None
    terminated = traj.terminated if traj.terminated is not None else traj.done
    truncated = traj.truncated if traj.truncated is not None else np.zeros_like(traj.done)
    first = index[:, 0]
    return JointSteps(
        obs=traj.obs[index], next_obs=traj.next_obs[index], legal_mask=traj.legal_mask[index],
        next_legal_mask=traj.next_legal_mask[index], action=traj.action[index], log_prob=traj.log_prob[index],
        reward=traj.reward[index], terminated=terminated[index], truncated=truncated[index],
        state=None if traj.global_state is None else traj.global_state[first],
        next_state=None if traj.next_global_state is None else traj.next_global_state[first],
        episode=keys[:, 0].copy(), time=keys[:, 1].copy(), index=index,
    )


def central_input(steps: JointSteps, source: str, *, nxt: bool = False) -> np.ndarray:
    """``[S, W]``: the global state (``source="state"``) or the concatenated observations (``"concat"``)."""
    if source == "state":
        state = steps.next_state if nxt else steps.state
        if state is None:
            raise ValueError("these rows carry no global state; use source='concat'")
        return state
    obs = steps.next_obs if nxt else steps.obs
    return obs.reshape(len(obs), -1)


def central_source(game: Any, option: str, who: str) -> str:
    """Resolve a learner's ``central`` option (``"auto"``, ``"state"``, ``"concat"``) for `game`.

    Raises:
        ValueError: ``"state"`` on a game without a global state, or a turn-based game with
            none (its agents' observations cannot be concatenated step by step).
    """
    if option not in ("auto", "state", "concat"):
        raise ValueError(f"{who}: central must be 'auto', 'state' or 'concat', got {option!r}")
    has_state = bool(getattr(game, "has_global_state", False))
    if option == "state" and not has_state:
        raise ValueError(f"{who}: central='state' but {game.name!r} has no global state (has_global_state is False); "
                         "use central='concat' (the agents' observations side by side) or 'auto'")
    if getattr(game, "turn_based", False) and not has_state:
        raise ValueError(f"{who} needs a global state or agents that act together, and {game.name!r} is turn-based "
                         "with no global state: its agents' observations cannot be concatenated step by step; "
                         "use an independent learner (IPPO, IQL) or a game with a global state")
    if option == "auto":
        return "state" if has_state else "concat"
    return option


class GroupLearner(abc.ABC):
    """Trains one group's policy from the rows the group's agents made; see the module doc."""

    #: registry name ("mappo", "qmix", ...), used by save files and the command line
    name: ClassVar[str] = "group"
    #: False for learners that must play with a behaviour policy different from `policy()` (epsilon, noise)
    off_policy: ClassVar[bool] = False

    #: the config changes that make `train` take one step of each optimiser (one job of a
    #: parameter-server worker, `pbmarl.algorithms.teams.rounds`); None: no parameter-server mode
    one_gradient: ClassVar[dict[str, int] | None] = None

    #: the config dataclass of the learner (a `pbmarl.config.Config`)
    config_class: ClassVar[type]
    #: option defaults of this class where they differ from its config's (IPPO's local critic)
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, game: Game | str | None = None, *, seed: int = 0, config: Any = None, **options: Any) -> None:
        if isinstance(game, str):
            from pbmarl.games.registry import load_game

            game = load_game(game)
        if game is not None and not isinstance(game, Game):
            raise TypeError(f"game of {type(self).__name__} must be a pbmarl Game, a game name or None (pb.MARL hands "
                            f"its game over), got {type(game).__name__}: {game!r}")
        self.game: Game | None = game
        wanted = options if config is not None else {**self.defaults, **options}
        self.config: Any = build_config(self.config_class, config, wanted, owner=type(self).__name__)
        refuse_device(self.device, type(self).__name__, self._cpu_only())
        self.seed = check_seed(seed)
        self.rng = np.random.default_rng(self.seed)
        self.torch_gen = torch.Generator().manual_seed(self.seed)
        self.env_steps = 0
        self.mapping: AgentMapping | None = None
        self.group: str | None = None

    # -- binding ------------------------------------------------------------------------------
    def bind(self, mapping: AgentMapping, group: str) -> None:
        """Build the networks for `group` of `mapping`, once: a learner trains one group of one run.

        Raises:
            ValueError: the learner is bound already (given to another `pb.MARL`, or to two groups), or was
                built for another game than the mapping's.
        """
        if self.mapping is not None:
            raise ValueError(f"this {type(self).__name__} already trains group {self.group!r} of a run on "
                             f"{self.mapping.game.name!r}; a learner trains one group of one run: build a new one "
                             f"(e.g. pb.{type(self).__name__}(seed=...)) for group {group!r}")
        if self.game is not None and self.game.name != mapping.game.name:
            raise ValueError(f"this {type(self).__name__} was built for {self.game.name!r}, not {mapping.game.name!r}")
        view = mapping.group_game(group)
        self.seats: tuple[int, ...] = mapping.seats_of(group)
        self.n_agents = len(self.seats)
        self._build(view)
        self.mapping, self.group = mapping, group
        if self.game is None:
            self.game = mapping.game

    def release(self) -> None:
        """Forget the binding (`pb.MARL` calls it when its own set-up fails, so the learner can serve another run)."""
        self.mapping = self.group = None

    @property
    def view(self) -> GroupGame:
        if self.mapping is None or self.group is None:
            raise RuntimeError(f"{type(self).__name__} is not bound to a group yet: pb.MARL binds it")
        return self.mapping.group_game(self.group)

    def _cpu_only(self) -> str | None:
        """Why this learner, so configured, runs on the CPU only (None: its ``device=`` is honoured)."""
        if getattr(self.config, "workers", 1) > 1:
            return "with workers > 1 the parameter server and its workers exchange weights and gradients as CPU arrays"
        return None

    @property
    def device(self) -> str:
        """Where the learner's networks live and its updates run (the config's ``device``; "cpu" where it has none)."""
        return str(getattr(self.config, "device", "cpu"))

    @abc.abstractmethod
    def _build(self, view: GroupGame) -> None:
        """Create networks and optimisers for the group's agents (observation and action spaces of `view`)."""

    # -- the round -----------------------------------------------------------------------------
    @property
    def steps_per_round(self) -> int:
        return int(self.config.steps_per_round)

    @abc.abstractmethod
    def behaviour(self) -> Policy:
        """The policy that plays the group's agents while collecting (exploration included)."""

    @abc.abstractmethod
    def policy(self) -> Policy:
        """The trained policy, for evaluation and populations (no exploration noise)."""

    @abc.abstractmethod
    def train(self, rows: Trajectories, env_steps: int) -> dict[str, float]:
        """Learn from one round's rows; `env_steps` is the run's env-step count so far. Returns the losses."""

    # -- on a parameter server ------------------------------------------------------------------
    def _update_report(self) -> dict[str, float]:
        """What a worker's one-gradient `train` leaves for the server's `_after_update` (default: nothing)."""
        return {}

    def _after_update(self, reports: Sequence[tuple[dict[str, float], int]]) -> None:
        """What moves after an update's optimiser steps besides the trained weights (target networks,
        running statistics). `reports`: the `_update_report` of each gradient the update averaged, with
        the env steps behind it. `train` calls it after each of its own updates too."""

    def _weights_loaded(self) -> None:
        """The networks were overwritten in place: refresh what caches them (policies by version)."""

    # -- saving ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def modules(self) -> dict[str, Any]:
        """Everything with a ``state_dict`` (networks, optimisers) under stable names."""

    def extra_state(self) -> dict[str, torch.Tensor]:
        """Tensors beyond the modules (replay buffers, normalisers)."""
        return {}

    def load_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        """Put back what `extra_state` returned."""

    def state_dict(self) -> dict[str, Any]:
        return {"modules": {k: m.state_dict() for k, m in self.modules().items()}, "extra": self.extra_state(),
                "torch_gen": self.torch_gen.get_state(), "env_steps": torch.tensor(self.env_steps)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        self.load_extra_state(state["extra"])
        self.torch_gen.set_state(state["torch_gen"])
        self.env_steps = int(state["env_steps"])

    def spec(self) -> dict[str, Any]:
        """``{"name", "seed", "config"}``, JSON-ready: what `group_learner_from_spec` rebuilds the learner from."""
        return {"name": self.name, "seed": self.seed, "config": self.config.to_dict()}

    def __repr__(self) -> str:
        where = f", group {self.group!r}" if self.group is not None else ""
        return f"{type(self).__name__}(seed={self.seed}{where})"


class ReplayGroupLearner(GroupLearner):
    """A group learner that learns off-policy from a replay of its rows kept as named arrays (`buffer`:
    QMIX's episodes, MADDPG's transitions). It plays a behaviour policy of its own (epsilon, noise), takes
    one update per parameter-server job, runs on the CPU, and saves its replay with its state as
    ``buffer/<name>`` tensors."""

    off_policy = True
    one_gradient = {"updates_per_round": 1}

    def __init__(self, game: Game | str | None = None, *, seed: int = 0, config: Any = None, **options: Any) -> None:
        super().__init__(game, seed=seed, config=config, **options)
        self.buffer: dict[str, np.ndarray] = {}

    def _cpu_only(self) -> str | None:
        return super()._cpu_only() or "its networks, replay and acting are not placed on a device yet"

    def extra_state(self) -> dict[str, torch.Tensor]:
        return {f"buffer/{k}": torch.as_tensor(v) for k, v in self.buffer.items()}

    def load_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        self.buffer = {k[len("buffer/"):]: v.numpy() for k, v in state.items() if k.startswith("buffer/")}


def check_discrete(view: GroupGame, who: str) -> int:
    """The group's number of actions; raises for Box action spaces."""
    if view.num_actions < 1:
        raise ValueError(f"{who} needs Discrete actions, but group {view.group!r} of {view.name!r} acts in "
                         f"{view.action_space(0)}; use MADDPG for continuous actions")
    return view.num_actions


def agent_onehot(S: int, n: int) -> np.ndarray:
    """``[S, n, n]``: each agent's one-hot id, for critics that value every agent from one state."""
    return np.broadcast_to(np.eye(n, dtype=np.float32), (S, n, n))
