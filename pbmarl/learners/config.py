"""The options and the round record every RL learner shares, and the rules their fields are checked by.

`LearnerConfig` is the frozen config dataclass each algorithm extends; a class lists
its fields' rules in ``checks`` (`Rule`: a test and what it accepts), and every rule
along the class's bases is checked on construction, so a bad value fails at once
with its name and what is accepted. `StepRecord` is one round's statistics.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pbmarl.runs.config import (
    FLAG,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    UNIT,
    Config,
    Rule,
    is_int,
    is_real,
)

__all__ = ["FLAG", "NON_NEGATIVE", "NON_NEGATIVE_INT", "POSITIVE", "POSITIVE_INT", "UNIT", "LearnerConfig", "Rule",
           "StepRecord"]


_is_int, _is_real = is_int, is_real


def _check(ok: bool, name: str, value: Any, accepted: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {accepted}, got {value!r}")


@dataclass(frozen=True)
class LearnerConfig(Config):
    """Options every RL learner shares (algorithms extend it with their own fields).

    Each config class lists the rules its fields must satisfy in `checks`; a bad
    value raises ValueError naming the field, the value and what is accepted.
    """

    hidden: tuple[int, ...] = (128, 128)
    """Widths of the hidden layers of every network (the policy is an `MLPPolicy` of this shape)."""
    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 1.0
    """Discount factor; 1 suits the short episodic games PSRO plays."""
    budget: int = 20_000
    """Learner steps (decisions of the learning seat) per best response, unless a call overrides it."""
    steps_per_round: int = 512
    """Learner steps collected per `step()` (whole episodes, so a few more)."""
    num_envs: int = 256
    """Game instances the default local pool steps together (a round has at least one episode each)."""
    plateau_patience: int = 0
    """Stop once the smoothed mean return has not improved by `plateau_tol` for this many rounds (0: off)."""
    plateau_tol: float = 0.01
    """Improvement of the smoothed mean return that resets the plateau counter."""
    plateau_smoothing: float = 0.8
    """Exponential smoothing of the per-round mean return used for plateau detection."""
    plateau_start: float = 0.5
    """Fraction of the budget that must be spent before a plateau may stop training."""
    warm_start: bool = False
    """Start each best response from the previous one of the same player."""
    eval_episodes: int = 0
    """Episodes of a final evaluation with the pool for the value estimate (0: mean return of the last rounds)."""
    value_rounds: int = 4
    """Rounds whose mean returns estimate the value when `eval_episodes` is 0."""
    num_threads: int | None = 1
    """torch threads while training (set and restored around each round; None: leave torch's setting).
    One is fastest for these small networks: two were several times slower on a busy 2-core machine."""

    checks: ClassVar[dict[str, Rule]] = {
        "lr": POSITIVE, "gamma": UNIT, "budget": POSITIVE_INT, "steps_per_round": POSITIVE_INT,
        "num_envs": POSITIVE_INT, "plateau_patience": NON_NEGATIVE_INT, "plateau_tol": NON_NEGATIVE,
        "plateau_smoothing": (lambda v: _is_real(v) and 0 <= v < 1, "a number in [0, 1)"), "plateau_start": UNIT,
        "warm_start": FLAG, "eval_episodes": NON_NEGATIVE_INT, "value_rounds": POSITIVE_INT,
        "num_threads": (lambda v: v is None or (_is_int(v) and v >= 1), "None or a positive int"),
    }

    def __post_init__(self) -> None:
        hidden = self.hidden
        if isinstance(hidden, (int, np.integer, str)) or not all(_is_int(h) and h > 0 for h in hidden):
            raise ValueError(f"hidden must be a sequence of positive ints (layer widths), got {hidden!r}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))
        super().__post_init__()


@dataclass(frozen=True)
class StepRecord:
    """Statistics of one training round; algorithms add their own fields."""

    task: int
    """Which best response (0, 1, ...) of this learner the round belongs to."""
    player: int
    """The learning seat."""
    round: int
    """Round number within the task, from 1."""
    learner_steps: int
    """Learner decisions (transitions) collected in the task so far."""
    env_steps: int
    """Environment decision steps (all seats) taken in the task so far."""
    episodes: int
    """Episodes collected this round."""
    mean_return: float
    """The learner's mean return over this round's episodes (behaviour policy)."""
    loss: float
    """The algorithm's total loss, averaged over this round's updates (NaN if none)."""
    seconds: float
    """Wall time of the round."""

    def __str__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            parts.append(f"{f.name}={v:.4g}" if isinstance(v, float) else f"{f.name}={v}")
        return f"{type(self).__name__}({', '.join(parts)})"
