"""`Independent`: a single-agent control learner (SAC, DDPG, TD3, Rainbow, ...) as a group learner.

MALib's independent learning and Tianshou's ``MultiAgentPolicyManager``: each agent
learns as if the others were part of its environment. One `Independent` learner trains
one network from the rows of every agent of its group, so

- ``pb.AgentMapping.shared(game, agent_id=True)`` + one `Independent`: parameter sharing,
  each agent's rows marked by its one-hot id (the mapping's ``agent_id`` feature);
- ``pb.AgentMapping.independent(game)`` + one `Independent` per agent: no sharing
  (`independent_learners` builds both).

The wrapped learner keeps its own algorithm, replay and exploration: the rows
`pb.MARL` collects go through the learner's transition hooks in order (per agent, per
episode, so n-step returns stay within an agent's own trajectory), one update every
``train_freq`` of them, uniformly random actions for the first ``learning_starts``.
PPO and DQN have group forms of their own: `pb.learners.IPPO` (MAPPO with local critics) and
`pb.learners.IQL` (QMIX without a mixer).

Example:
    >>> import pbmarl as pb
    >>> game = pb.load_game("pettingzoo:simple_spread_v3", N=2, max_cycles=5)
    >>> mapping, learners = independent_learners(game, "sac", share=True, seed=0, steps_per_round=10)
    >>> marl = pb.MARL(game, learners, mapping, num_envs=2)
    >>> marl.step().env_steps >= 10
    True
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from pbmarl.config import POSITIVE_INT, Config, Rule, check_device, did_you_mean
from pbmarl.games.base import Game
from pbmarl.learners.common.config import refuse_device
from pbmarl.learners.multiagent.group import GroupLearner
from pbmarl.policies.base import ActionOutput, Policy
from pbmarl.policies.continuous import BoxPolicy
from pbmarl.rollout.mapping import AgentMapping, GroupGame
from pbmarl.rollout.trajectories import Trajectories

if TYPE_CHECKING:  # the wrapped learner's type only: control imports this module (seat_oracle), not back
    from pbmarl.learners.control.base import ControlLearner

#: the single-agent learners `Independent` wraps (their registry names)
CONTROL_ALGOS = ("sac", "ddpg", "td3", "hddpg", "rainbow")


def _algo_ok(algo: Any) -> bool:
    if algo in ("ppo", "dqn", "a2c"):
        alt = {"ppo": "pb.learners.IPPO", "dqn": "pb.learners.IQL", "a2c": "pb.learners.IPPO"}[algo]
        raise ValueError(f"Independent wraps the control learners {list(CONTROL_ALGOS)}; for independent "
                         f"{algo.upper()} use {alt}, its group form")
    return algo in CONTROL_ALGOS


@dataclass(frozen=True)
class IndependentConfig(Config):
    """Which single-agent learner, and its options."""

    algo: str = "sac"
    """Registry name of the wrapped learner: 'sac', 'ddpg', 'td3', 'hddpg' or 'rainbow'."""
    options: dict[str, Any] = field(default_factory=dict)
    """Fields of that learner's config (e.g. ``lr``, ``batch_size``, ``learning_starts``)."""
    steps_per_round: int = 1000
    """Env steps `pb.MARL` collects per round."""

    checks: ClassVar[dict[str, Rule]] = {
        "algo": (_algo_ok, f"one of {list(CONTROL_ALGOS)}"),
        "options": (lambda v: isinstance(v, dict), "a dict of the wrapped learner's config fields"),
        "steps_per_round": POSITIVE_INT,
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        from pbmarl.learners.common.registry import learner_class

        inner: Any = learner_class(self.algo)
        fields = [f.name for f in dataclasses.fields(inner.config_class)]
        for name in self.options:  # a misspelt option fails here, not when pb.MARL builds the learner
            if name not in fields:
                raise TypeError(f"unknown option {name!r} for Independent({self.algo!r}){did_you_mean(name, fields)} "
                                f"Accepted options: steps_per_round, {', '.join(fields)}")
        if "device" in self.options:  # the wrapped learner's option: checked here, at construction, not at binding
            device = check_device(self.options["device"])
            object.__setattr__(self, "options", {**self.options, "device": device})
            refuse_device(device, f"Independent({self.algo!r})", "it wraps a control learner, which acts and updates "
                          "with a CPU torch generator")

    @property
    def device(self) -> str:
        """The wrapped learner's ``device`` (the only device option an `Independent` has)."""
        return str(self.options.get("device", "cpu"))


class SeatGame(GroupGame):
    """A group's view as a one-player game: what a single-agent learner is built for (it never steps it)."""

    def __init__(self, view: GroupGame) -> None:
        super().__init__(view.base, view.group, view.group_agents, view.action_space(0), view.observation_shape[0],
                         view.transforms, view.agent_width)
        self.num_players = 1


def _learner_actions(learner: ControlLearner, obs: np.ndarray) -> list[Any]:
    """The learner's exploring action for each row (uniformly random before ``learning_starts``)."""
    rows = np.asarray(obs, np.float32).reshape(len(obs), -1)
    if learner.env_steps < learner.config.learning_starts:
        return [learner._random_action() for _ in rows]
    return [learner.act(x, deterministic=False) for x in rows]


class LearnerActs(Policy):
    """Discrete actions the wrapped learner draws, row by row, as one-hot probabilities.

    The learner samples with its own generator; off-policy learners never read the
    log-probabilities. The policy lives in the process of the learner (a local pool).
    """

    kind = "learner_acts"

    def __init__(self, game: Game, learner: ControlLearner) -> None:
        super().__init__(game)
        self.learner = learner

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        out = np.zeros(legal_mask.shape)
        out[np.arange(len(obs)), np.asarray(_learner_actions(self.learner, obs), dtype=np.int64)] = 1.0
        return out


class LearnerActsBox(BoxPolicy):
    """Box actions the wrapped learner draws (its exploration noise included), row by row."""

    kind = "learner_acts_box"

    def __init__(self, game: Game, learner: ControlLearner) -> None:
        Policy.__init__(self, game)  # no network of its own: the learner's acts
        space = game.action_space(0)
        self.player, self.action_space, self.action_shape = 0, space, tuple(space.shape)
        self.act_dim = int(np.prod(space.shape))
        self.learner = learner

    def act(self, obs: np.ndarray, legal_mask: np.ndarray | None, rng: Any = None, keys: Sequence[str] | None = None,
            *, deterministic: bool = False) -> ActionOutput:
        actions = np.stack([np.asarray(a, np.float32).reshape(-1) for a in _learner_actions(self.learner, obs)])
        return ActionOutput(actions, np.zeros(len(actions)))


class Independent(GroupLearner):
    """A single-agent control learner for a whole group; see the module doc.

    ``pb.learners.Independent(algo="sac", seed=0, steps_per_round=1000, lr=1e-3)``: ``algo`` and ``steps_per_round``
    (fields of `IndependentConfig`) set it, every other keyword goes to the wrapped learner's config.
    """

    name = "independent"
    off_policy = True
    config_class = IndependentConfig
    config: IndependentConfig

    def __init__(self, game: Any = None, *, seed: int = 0, config: IndependentConfig | None = None,
                 **options: Any) -> None:
        own: dict[str, Any] = {k: options.pop(k) for k in ("algo", "steps_per_round") if k in options}
        if options:
            inner = dict(config.options) if config is not None else {}
            own["options"] = {**inner, **options}
        super().__init__(game, seed=seed, config=config, **own)

    def _build(self, view: GroupGame) -> None:
        from pbmarl.learners.common.registry import learner_class

        cls = learner_class(self.config.algo)
        self.inner: ControlLearner = cls(SeatGame(view), seed=self.seed, **self.config.options)
        self._acting: Policy = (LearnerActs(view, self.inner) if self.inner.space == "discrete"
                                else LearnerActsBox(view, self.inner))

    def behaviour(self) -> Policy:
        return self._acting

    def policy(self) -> Policy:
        return self.inner.policy()

    def train(self, rows: Trajectories, env_steps: int) -> dict[str, float]:
        """Every row through the learner's transition hooks, in (episode, agent, time) order; updates as they come."""
        self.env_steps = int(env_steps)
        lr, cfg = self.inner, self.inner.config
        terminated = rows.terminated if rows.terminated is not None else rows.done
        losses: dict[str, list[float]] = {}
        obs, next_obs = rows.obs.reshape(len(rows), -1), rows.next_obs.reshape(len(rows), -1)
        for i in range(len(rows)):
            lr._store(obs[i], rows.action[i], float(rows.reward[i]), bool(terminated[i]), next_obs[i],
                      bool(rows.done[i]))
            lr.env_steps += 1
            if lr.env_steps >= cfg.learning_starts and lr.env_steps % cfg.train_freq == 0:
                lr._burst(cfg.gradient_steps, losses)
        return {k: float(np.mean(v)) for k, v in losses.items()} | {"updates": float(lr.updates)}

    # -- saving -------------------------------------------------------------------------------
    def modules(self) -> dict[str, Any]:
        return dict(self.inner._modules())

    def extra_state(self) -> dict[str, torch.Tensor]:
        lr = self.inner
        out = {f"replay/{k}": torch.as_tensor(np.asarray(v)) for k, v in lr.replay.state_arrays().items()}
        out.update({f"extra/{k}": torch.as_tensor(np.asarray(v)) for k, v in lr._extra_arrays().items()})
        out["gen"] = lr.gen.get_state()
        out["rng"] = torch.tensor(list(json.dumps(lr.rng.bit_generator.state).encode()), dtype=torch.uint8)
        out["counters"] = torch.tensor([lr.env_steps, lr.updates, lr.episodes])
        return out

    def load_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        lr = self.inner
        lr.replay.load_state_arrays({k[7:]: v.numpy() for k, v in state.items() if k.startswith("replay/")})
        lr._load_extra_arrays({k[6:]: v.numpy() for k, v in state.items() if k.startswith("extra/")})
        lr.gen.set_state(state["gen"])
        lr.rng.bit_generator.state = json.loads(bytes(state["rng"].tolist()).decode())
        lr.env_steps, lr.updates, lr.episodes = (int(x) for x in state["counters"].tolist())



def independent_learners(game: Game, algo: str, *, share: bool = True, agent_id: bool = True, seed: int = 0,
                         **options: Any) -> tuple[AgentMapping, dict[str, Independent]]:
    """``(mapping, {group: Independent})`` for `pb.MARL`: one shared learner (`share`), or one per agent.

    With `share`, every agent is in group ``"shared"`` and (with `agent_id`) sees its one-hot
    id; without, each agent is its own group (named after it) with its own learner and seed.
    """
    if share:
        mapping = AgentMapping.shared(game, agent_id=agent_id)
        return mapping, {g: Independent(algo=algo, seed=seed, **options) for g in mapping.groups}
    mapping = AgentMapping.independent(game)
    return mapping, {g: Independent(algo=algo, seed=seed + i, **options) for i, g in enumerate(mapping.groups)}
