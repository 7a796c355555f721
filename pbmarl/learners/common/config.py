"""The options and the round record every RL oracle learner shares.

`LearnerConfig` is the frozen config dataclass each algorithm extends (a `pbmarl.config.Config`:
a class lists its fields' rules in ``checks``, see `pbmarl.config`). `LearnerRecord` is
one round's record: the shared history columns (`pbmarl.runs.records`) and then the learner's own.

Example:
    >>> r = LearnerRecord(iteration=1, env_steps=300, episodes=14, wall_time=0.5, episode_return=21.4,
    ...                   loss=0.3, time_round=0.5, task=0, player=0, round=1, learner_steps=300)
    >>> list(r.as_row())[:8]
    ['iteration', 'env_steps', 'episodes', 'wall_time', 'return/0', 'loss/total', 'time/round', 'task']
    >>> r["return/0"]
    21.4
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pbmarl.config import (
    FLAG,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    UNIT,
    Config,
    Rule,
    check_device,
    is_int,
    is_real,
)
from pbmarl.runs.records import Record, shared_row

__all__ = ["DEVICE_RUNS", "DeviceOption", "LearnerConfig", "LearnerRecord", "StepRecord", "refuse_device"]


@dataclass(frozen=True)
class DeviceOption(Config):
    """The ``device=`` option of every run with torch networks (`LearnerConfig`, the multi-agent group learners',
    NFSP's and the self-play runs' configs inherit it), checked and normalised by `pbmarl.config.check_device`."""

    device: str = "cpu"
    """Where the networks live and the updates run: "cpu" (the default), "cuda", "cuda:N" or "mps" (a str or a
    ``torch.device``; one this machine lacks is refused). The run types of `DEVICE_RUNS` build their networks
    on the CPU from the seed and move them there, move each update's batch there once, act there (each
    observation batch goes there, the actions come back with ``.cpu()``) and export CPU policies; the others
    refuse a device other than "cpu", saying why (`refuse_device`). Saved state dicts are written from CPU
    tensors, so a folder saved on a GPU loads on a CPU-only machine with ``load(path, device="cpu")``. For these
    small networks the CPU is the faster choice up to a few thousand rows per update
    (``benchmarks/gpu_scaling.py``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", check_device(self.device))
        super().__post_init__()


#: the run types whose networks may live on a device other than the CPU (the others refuse one, `refuse_device`)
DEVICE_RUNS = ("PPO", "A2C", "DQN", "MAPPO", "IPPO", "NFSP", "PPOSelfPlay", "DeepMMD")


def refuse_device(device: str, who: str, why: str | None) -> None:
    """Raise ValueError when `device` is not the CPU and `why` (the reason `who` runs on the CPU only) is given;
    names the device, the reason, and the run types that take one."""
    if device != "cpu" and why:
        raise ValueError(f"{who} runs on the CPU only, got device={device!r}: {why}. Leave device='cpu' (the "
                         f"default); device= other than 'cpu' is taken by {', '.join(DEVICE_RUNS)}")


@dataclass(frozen=True)
class LearnerConfig(DeviceOption):
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
        "plateau_smoothing": (lambda v: is_real(v) and 0 <= v < 1, "a number in [0, 1)"), "plateau_start": UNIT,
        "warm_start": FLAG, "eval_episodes": NON_NEGATIVE_INT, "value_rounds": POSITIVE_INT,
        "num_threads": (lambda v: v is None or (is_int(v) and v >= 1), "None or a positive int"),
    }

    def __post_init__(self) -> None:
        hidden = self.hidden
        if isinstance(hidden, (int, np.integer, str)) or not all(is_int(h) and h > 0 for h in hidden):
            raise ValueError(f"hidden must be a sequence of positive ints (layer widths), got {hidden!r}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))
        super().__post_init__()


@dataclass(frozen=True)
class LearnerRecord(Record):
    """One training round of an RL oracle learner; algorithms add their own fields.

    Its row (`as_row`): the shared columns, ``return/<player>``, ``loss/total`` (and the
    algorithm's `LOSSES`), ``time/round``, then ``task``, ``player``, ``round``, ``learner_steps``
    and the algorithm's other fields.
    """

    iteration: int
    """Rounds over the learner's life, across tasks: 1, 2, ..."""
    env_steps: int
    """Environment decision steps (all seats) over the learner's life (training only)."""
    episodes: int
    """Episodes collected over the learner's life."""
    wall_time: float
    """Seconds spent stepping over the learner's life (kept across save and load)."""
    episode_return: float
    """The learner's mean return over this round's episodes (behaviour policy): ``return/<player>``."""
    loss: float
    """The algorithm's total loss, averaged over this round's updates (NaN if none): ``loss/total``."""
    time_round: float
    """Wall time of this round: ``time/round``."""
    task: int
    """Which task (best response) of this learner the round belongs to: 0, 1, ..."""
    player: int
    """The learning seat."""
    round: int
    """Round number within the task, from 1."""
    learner_steps: int
    """Learner decisions (transitions) collected in the task so far."""

    #: fields shown as ``loss/<name>`` after ``loss/total``
    LOSSES: ClassVar[dict[str, str]] = {}

    def as_row(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        losses = {"total": own.pop("loss"), **{name: own.pop(field) for field, name in self.LOSSES.items()}}
        for name in ("iteration", "env_steps", "episodes", "wall_time", "episode_return", "time_round"):
            own.pop(name)
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, returns={self.player: self.episode_return}, losses=losses,
                          times={"round": self.time_round}, extra=own)

    def __str__(self) -> str:
        cells = (f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.as_row().items())
        return f"{type(self).__name__}({', '.join(cells)})"


@dataclass(frozen=True)
class StepRecord:
    """The old round record, kept while the control learners (`pbmarl.learners.control.config`) still extend it."""

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
