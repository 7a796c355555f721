"""The seams of the outer loop, as typed Protocols: what PSRO (and every driver) needs
from an oracle, an evaluator and a meta-solver, and nothing more.

* `Oracle`: ``respond(player, opponents) -> BestResponse(policy, value, env_steps)``;
  `ExactBestResponse` and every RL `Learner` (`DQN`, `PPO`, `A2C`) implement it.
* `BatchOracle`: an `Oracle` with ``respond_all(requests)``, every request of an iteration at
  once (`ParallelOracle` trains the players' best responses side by side).
* `Evaluator`: ``fill(table, episodes, *, seed)`` sets the table's missing cells;
  `ExactEvaluator` (exact payoffs, ignores `episodes` and `seed`) and `RolloutPool`
  (sampled payoffs) implement it. It returns the number of cells set (exact) or a
  `SampledFill` report that says how many environment steps it took.
* `Restorable`: ``snapshot()`` / ``restore(state)``, what an all-or-nothing step uses to
  put an object back as it was (see `pbmarl.runs.transaction`).

Example:
    >>> import pbmarl as pb
    >>> from pbmarl.protocols import Evaluator, Oracle
    >>> game = pb.load_game("kuhn_poker")
    >>> isinstance(pb.ExactBestResponse(game), Oracle), isinstance(pb.ExactEvaluator(game), Evaluator)
    (True, True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.payoffs import PayoffTable
    from pbmarl.policies.base import Policy
    from pbmarl.policies.mixture import Mixture
    from pbmarl.solvers.metastrategy import MetaStrategy

#: what an oracle answers: one Policy or Mixture per seat (the responding seat's entry is ignored)
Opponents = Sequence["Policy | Mixture | None"]


class BestResponse(NamedTuple):
    """An oracle's answer: the new policy, its (exact or estimated) value against the
    opponents, and the environment steps it cost (0 for an exact oracle)."""

    policy: Policy
    value: float
    env_steps: int


@runtime_checkable
class Oracle(Protocol):
    """Produces a new policy for `player` against a profile of opponents."""

    @property
    def name(self) -> str:
        """A short name recorded as the origin of the policies it makes (``"exact"``, ``"dqn"``)."""
        ...

    def respond(self, player: int, opponents: Opponents) -> BestResponse:
        """A best response of `player` to `opponents` with its value and cost."""
        ...


@runtime_checkable
class BatchOracle(Oracle, Protocol):
    """An oracle that takes every best-response request of an iteration at once (and may answer them
    side by side, as `ParallelOracle` does); PSRO then calls `respond_all` instead of `respond`."""

    def respond_all(self, requests: Sequence[tuple[int, Opponents]]) -> list[BestResponse]:
        """One answer per ``(player, opponents)`` request, in order."""
        ...


def respond_all(oracle: Oracle, requests: Sequence[tuple[int, Opponents]]) -> list[BestResponse]:
    """`oracle`'s answers to every ``(player, opponents)`` request, in order: all at once from a
    `BatchOracle` (which may train them side by side), else one `respond` after another.

    Raises:
        RuntimeError: a `BatchOracle` answered a different number of requests than it was given.
    """
    if isinstance(oracle, BatchOracle):
        answers = list(oracle.respond_all(requests))
        if len(answers) != len(requests):
            raise RuntimeError(f"{oracle!r} answered {len(answers)} of {len(requests)} best-response requests")
        return answers
    return [oracle.respond(player, opponents) for player, opponents in requests]


@runtime_checkable
class SampledFill(Protocol):
    """The part of a sampling evaluator's fill report that the outer loop reads."""

    @property
    def steps(self) -> int:
        """Environment steps the fill took."""
        ...

    @property
    def episodes(self) -> int:
        """Episodes the fill played."""
        ...


@runtime_checkable
class Evaluator(Protocol):
    """Fills the never-evaluated cells of a `PayoffTable` bound to a population."""

    def fill(self, table: PayoffTable, episodes: int = ..., *,
             seed: int | np.random.Generator | None = ...) -> int | SampledFill:
        """Set every missing cell; `episodes` per cell and `seed` matter to sampling evaluators only."""
        ...


@runtime_checkable
class Restorable(Protocol):
    """An object that can be put back exactly as it was (the learner's part of an all-or-nothing step)."""

    def snapshot(self) -> object:
        """What `restore` needs to undo everything done after this call."""
        ...

    def restore(self, state: object) -> None:
        """Undo everything done since `snapshot()` returned `state`."""
        ...


@runtime_checkable
class Checkpointed(Protocol):
    """An oracle with state worth keeping between iterations (an RL learner's networks and counters)."""

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write the state into `folder` (each file atomically)."""
        ...

    def load(self, folder: str | os.PathLike[str]) -> object:
        """Restore the state `save` wrote."""
        ...


@runtime_checkable
class Specified(Protocol):
    """An oracle or evaluator that describes itself for a run folder (its name and options, JSON-ready)."""

    def spec(self) -> dict[str, Any]:
        """What rebuilds an equal object when a run folder is loaded."""
        ...


@runtime_checkable
class PolicyLearner(Protocol):
    """What every learner family has in common (the turn-based oracles `DQN`/`PPO`/`A2C`, the control learners
    `SAC`/`TD3`/`DDPG`/`HDDPG`/`Rainbow`, the group learners `MAPPO`/`QMIX`/`MADDPG`/`Independent`): a name,
    the policy it has learnt so far, and a JSON-ready spec that rebuilds an equal, untrained learner."""

    @property
    def name(self) -> str:
        """The learner's registry name (``"dqn"``, ``"sac"``, ``"mappo"``)."""
        ...

    def policy(self) -> Any:
        """The learnt policy (for a group learner: the group's joint policy)."""
        ...

    def spec(self) -> dict[str, Any]:
        """Name, seed and config as JSON: what rebuilds an equal learner."""
        ...


@runtime_checkable
class RunLearner(PolicyLearner, Oracle, Protocol):
    """A learner that is also a run and an oracle: `step` one round, `run` many, its `history`, `save`/`load`,
    and PSRO's `respond`. The oracles and the control learners implement it; a group learner is driven by
    `pb.MARL` (the run around it), so it is a `PolicyLearner` only."""

    @property
    def history(self) -> Any:
        """One row per step so far (a pandas DataFrame)."""
        ...

    def step(self) -> Any:
        """One round; its record."""
        ...

    def run(self, steps: int | None = ..., **options: Any) -> Any:
        """`steps` rounds, or up to the budget; the records."""
        ...

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the run folder at `path`."""
        ...

    @classmethod
    def load(cls, path: str | os.PathLike[str], **overrides: Any) -> Any:
        """The learner a run folder holds."""
        ...


@runtime_checkable
class GradientSource(Protocol):
    """What a parameter server's rounds and its gradient workers need from a learner (`pbmarl.distributed`).

    `PPO`, `A2C` (and `A3C`) and `DQN` answer it, so `pbmarl.distributed` imports no learner: the rounds
    build the server over `server_modules` and the workers from `worker_class`; a gradient worker holds
    its own copy of the learner (same class and config, one worker) and asks it for `minibatch_plan`,
    `gradient_loss` and `stop_early` (an off-policy worker, DQN's, asks its copy for its TD loss instead).
    The learner's `config` carries the `ParallelOptions` (``workers``, ``sync``, ``staleness``,
    ``backend``) and ``max_grad_norm``; the workers never look at its type.
    """

    @property
    def config(self) -> Any:
        """A learner config with `pbmarl.distributed.options.ParallelOptions` and ``max_grad_norm``."""
        ...

    @property
    def game(self) -> Any: ...

    @property
    def rng(self) -> np.random.Generator: ...

    @property
    def optimizer(self) -> Any:
        """The torch optimiser the server copies (and whose state it hands back)."""
        ...

    @property
    def task(self) -> Any: ...

    def server_modules(self) -> list[Any]:
        """The torch modules the server trains, in the order of the flat weight vectors."""
        ...

    def worker_class(self) -> type:
        """The gradient worker class (built with ``(game, learner class, config, player, opponents)``)."""
        ...

    def job_args(self, rounds: Any) -> tuple[Any, ...]:
        """Extra arguments of the next job, after ``(weights, version, seeds)``."""
        ...

    def weights_changed(self) -> None:
        """The server applied an update (policies cached by version must be refreshed)."""
        ...

    def minibatch_plan(self, size: int, workers: int, rng: np.random.Generator) -> list[tuple[np.ndarray, bool]]:
        """A worker's minibatches of its batch of `size` samples, ``(index, ends an epoch)``, for `workers` workers."""
        ...

    def gradient_loss(self, batch: Any) -> tuple[Any, dict[str, float]]:
        """The loss (a torch scalar) on a minibatch at the current weights, and its statistics."""
        ...

    def stop_early(self, stats: dict[str, float]) -> bool:
        """Whether a worker stops its plan after an epoch whose last minibatch had `stats`."""
        ...


@runtime_checkable
class ReplayStore(Protocol):
    """What a learner and `pbmarl.distributed.replay` use of a replay buffer: `ReplayBuffer` and
    `PrioritizedReplayBuffer` (`pbmarl.learners.common.buffers`) answer it, and so does the hosted
    `RemoteReplay` standing in their place, so the distributed layer needs no learner import."""

    capacity: int

    def __len__(self) -> int: ...

    def add(self, traj: Any) -> np.ndarray:
        """Add a collection's transitions; the slots written."""
        ...

    def append(self, obs: np.ndarray, action: np.ndarray | int, reward: float, done: bool, next_obs: np.ndarray,
               legal_mask: np.ndarray | bool = True, next_legal_mask: np.ndarray | bool = True) -> int:
        """Add one transition; its slot."""
        ...

    def sample(self, batch_size: int, rng: np.random.Generator) -> Any:
        """A minibatch (a `Batch`), drawn with `rng`."""
        ...

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None: ...

    def mark(self) -> Any:
        """Start journalling the writes; what `rollback` takes."""
        ...

    def rollback(self, journal: Any) -> None: ...

    def state_arrays(self) -> dict[str, np.ndarray]: ...

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None: ...


#: a meta-solver: a payoff table in, a meta-strategy (one distribution per player) out
MetaSolverLike = Callable[["PayoffTable"], "MetaStrategy"]

__all__ = ["BatchOracle", "BestResponse", "Checkpointed", "Evaluator", "GradientSource", "MetaSolverLike", "Opponents", "Oracle", "PolicyLearner", "ReplayStore", "Restorable", "RunLearner", "SampledFill", "respond_all"]
