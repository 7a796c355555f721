"""The options and the round record of the control learners (Rainbow, DDPG, TD3, SAC, HDDPG).

`ControlConfig` holds what every one of them reads (networks, replay, the update
schedule); `PrioritizedOptions` the replay choice of those that run with or without
prioritised replay; `ControlRecord` is one round of `ControlLearner.step()`, one history row.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from pbmarl.config import FLAG, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.distributed.options import ParallelOptions
from pbmarl.learners.common.config import LearnerConfig
from pbmarl.runs.records import Record, shared_row

__all__ = ["MAX_BUFFER", "PRECISIONS", "TAU", "ControlConfig", "ControlRecord", "PrioritizedOptions"]

#: the largest `ControlConfig.buffer_size` accepted (a buffer is allocated whole when the learner is built)
MAX_BUFFER = 100_000_000

#: the accepted values of `ControlConfig.matmul_precision`
PRECISIONS = ("float32", "bfloat16", "medium")

TAU: Rule = (lambda v: isinstance(v, (int, float)) and math.isfinite(v) and 0 < v <= 1, "a number in (0, 1]")


@dataclass(frozen=True)
class ControlConfig(LearnerConfig, ParallelOptions):
    """Options of every control learner (plus the shared ones of `LearnerConfig`, and `ParallelOptions`:
    ``workers > 1`` puts it on a parameter server, `pbmarl.learners.control.rounds`).

    `budget` and `steps_per_round` count environment steps here; the plateau stop is not
    used by the step-by-step loop, and `num_envs` only by a best response on a game of
    several seats (`pbmarl.learners.control.seat_oracle`).
    """

    hidden: tuple[int, ...] = (256, 256)
    """Widths of the hidden layers of every network."""
    lr: float = 3e-4
    """Adam learning rate of every network."""
    gamma: float = 0.99
    """Discount factor."""
    budget: int = 20_000
    """Environment steps of a whole training run. `run()` stops at `ControlLearner.stop_step`: the budget rounded
    up to a whole ``train_freq``, right after the last burst, mid-episode if need be (other rounds end between
    episodes)."""
    steps_per_round: int = 1_000
    """Environment steps per `step()` (whole episodes, so a few more)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions."""
    batch_size: int = 256
    """Transitions per gradient step."""
    learning_starts: int = 100
    """Environment steps of uniformly random actions before the first update."""
    train_freq: int = 1
    """Environment steps between two rounds of updates."""
    gradient_steps: int = 1
    """Gradient steps per round of updates."""
    tau: float = 0.005
    """Polyak rate of the target networks (1: hard copy)."""
    eval_episodes: int = 10
    """Episodes of `evaluate()` when not given, and of a best response's value estimate."""
    num_envs: int = 16
    """Game instances stepped together by a best response on a game of several seats."""
    matmul_precision: str = "float32"
    """How updates multiply matrices; acting, optimiser state and parameters are float32 in every case.

    - ``"float32"``: exactly.
    - ``"bfloat16"``: the update's hidden-to-hidden products run in bfloat16 (torch's CPU autocast): their
      activations are bfloat16 tensors; inputs, the first and last layers, losses and targets stay float32.
      On CPUs without AVX512-BF16 it may run slower than float32.
    - ``"medium"``: torch's ``set_float32_matmul_precision("medium")`` on the CPU, for the update only
      (`pbmarl.policies.neural.bfloat16_products`): every float32 product reads its inputs rounded to
      bfloat16 and accumulates in float32, inside oneDNN's kernel, so no tensor is cast; the forwards of the
      first and last layers stay exact. On CPUs without bfloat16 instructions it computes in float32.

    On this project's Xeon (AMX), per update: Pendulum SAC (256 wide, 256 rows) 8.8 / 9.6 / 8.2 ms and TD3
    (400-300) 8.0 / 6.9 / 6.1 ms for float32 / bfloat16 / medium; CartPole DQN (64 rows) is fastest in
    float32. ``benchmarks/control.py --matmul-precision`` measures it against SB3."""

    checks: ClassVar[dict[str, Rule]] = {
        "buffer_size": (lambda v: POSITIVE_INT[0](v) and v <= MAX_BUFFER, f"a positive int up to {MAX_BUFFER:,}"),
        "batch_size": POSITIVE_INT, "learning_starts": NON_NEGATIVE_INT,
        "train_freq": POSITIVE_INT, "gradient_steps": POSITIVE_INT, "tau": TAU, "eval_episodes": POSITIVE_INT,
        "lr": POSITIVE, "matmul_precision": (lambda v: v in PRECISIONS, f"one of {PRECISIONS}"),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.buffer_size < self.batch_size:
            raise ValueError(f"buffer_size ({self.buffer_size}) must be at least batch_size ({self.batch_size}): "
                             "every minibatch is drawn from the replay")


@dataclass(frozen=True)
class PrioritizedOptions:
    """Replay options of the learners that run with or without prioritised replay (Machin's ``DQNPer``,
    ``DDPGPer``): DDPG and its relatives, Rainbow. `ControlLearner` builds the buffer from them."""

    prioritized: bool = False
    """Proportional prioritised replay instead of uniform."""
    priority_alpha: float = 0.6
    """How strongly priorities shape sampling (0: uniform)."""
    priority_beta: float = 0.4
    """Importance-weight correction of prioritised sampling (1: full)."""

    checks: ClassVar[dict[str, Rule]] = {"prioritized": FLAG, "priority_alpha": UNIT, "priority_beta": UNIT}


#: the record fields that make the shared columns (the rest are the algorithm's own)
_SHARED = ("iteration", "env_steps", "episodes", "wall_time", "mean_return", "loss", "seconds")


@dataclass(frozen=True)
class ControlRecord(Record):
    """One round of a control learner: one history row (`as_row`).

    Columns: ``iteration``, ``env_steps``, ``episodes`` (cumulative), ``wall_time`` (cumulative seconds),
    ``return/0`` (`mean_return`), ``loss/<loss_name>`` (`loss`) and the algorithm's other losses
    (`loss_fields`), ``time/round`` (`seconds`), ``updates``, then the algorithm's own fields.
    """

    iteration: int
    """The round, from 1."""
    env_steps: int
    """Environment steps taken so far."""
    episodes: int
    """Episodes finished so far."""
    wall_time: float
    """Seconds of stepping so far (kept across save and load)."""
    mean_return: float
    """Mean return of the episodes that finished this round (behaviour policy; NaN if none): ``return/0``."""
    loss: float
    """The main loss (`loss_name`), averaged over the round's updates (NaN if none)."""
    seconds: float
    """Wall time of the round: ``time/round``."""
    updates: int
    """Gradient steps taken so far."""

    #: the column of `loss`: ``loss/<loss_name>``
    loss_name: ClassVar[str] = "critic"
    #: the algorithm's other losses: field -> ``loss/<name>``
    loss_fields: ClassVar[dict[str, str]] = {}

    def as_row(self) -> dict[str, Any]:
        losses = {self.loss_name: self.loss, **{col: getattr(self, f) for f, col in self.loss_fields.items()}}
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in _SHARED and f.name not in self.loss_fields}
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, returns={0: self.mean_return}, losses=losses,
                          times={"round": self.seconds}, extra=own)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The history columns of this record class (an empty history shows them)."""
        own = [f.name for f in dataclasses.fields(cls) if f.name not in _SHARED and f.name not in cls.loss_fields]
        return ("iteration", "env_steps", "episodes", "wall_time", "return/0", f"loss/{cls.loss_name}",
                *(f"loss/{c}" for c in cls.loss_fields.values()), "time/round", *own)
