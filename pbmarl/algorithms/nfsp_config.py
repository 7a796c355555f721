"""`NFSPConfig` and `NFSPRecord`: NFSP's options and the record of one step, and how a record is saved.

`pbmarl.algorithms.nfsp` holds the run itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pbmarl.config import FLAG, POSITIVE, POSITIVE_INT, UNIT, Rule, check_widths
from pbmarl.games.base import Game
from pbmarl.learners.common.config import DeviceOption
from pbmarl.runs import MeasuredRecord

#: the most items a buffer (or one step's episodes) may hold
MAX_SIZE = 10**8
_SIZE: Rule = (lambda v: POSITIVE_INT[0](v) and v <= MAX_SIZE, f"an int in [1, {MAX_SIZE:,}]")
#: NFSP's optimisers by name (the ``optimizer`` option)
OPTIMIZERS = ("sgd", "adam")
#: the most memory both buffers of all players may take when full
MAX_BUFFER_BYTES = 16 * 2**30


@dataclass(frozen=True)
class NFSPConfig(DeviceOption):
    """NFSP options. Defaults are the Leduc settings of Heinrich & Silver 2016 (§5.2) where they give one."""

    hidden: tuple[int, ...] = (64,)
    """Hidden layers of both networks: one layer of 64 rectified units (Leduc)."""
    rl_lr: float = 0.1
    """Learning rate of the best-response network (Leduc: 0.1, with SGD)."""
    sl_lr: float = 0.005
    """Learning rate of the average-policy network (Leduc: 0.005, with SGD)."""
    optimizer: str = "sgd"
    """Optimiser of both networks: ``"sgd"`` (the paper's) or ``"adam"`` (OpenSpiel's PyTorch NFSP
    ``optimizer_str="adam"``, which the IIG benchmark's tuned settings use)."""
    anticipatory: float = 0.1
    """eta: probability of following the best response for a whole episode (Leduc: 0.1)."""
    epsilon_start: float = 0.06
    """Exploration of the best response at the start (Leduc: 0.06, decaying towards 0)."""
    epsilon_decay_episodes: int = 1_000
    """Exploration is ``epsilon_start / sqrt(1 + episodes / epsilon_decay_episodes)``: it decays as the
    inverse square root of the episodes played, as in the paper."""
    replay_capacity: int = 200_000
    """Circular buffer M_RL, transitions (Leduc: 200k)."""
    reservoir_capacity: int = 2_000_000
    """Reservoir M_SL, (state, action) pairs (Leduc: 2M)."""
    batch_size: int = 128
    """Minibatch of every update (Leduc: 128)."""
    learn_every: int = 128
    """A player updates after every this many of its own decisions (Leduc: every 128 steps)..."""
    updates_per_learn: int = 2
    """...taking this many SGD steps per network (Leduc: 2)."""
    target_update_every: int = 300
    """Best-response updates between refits of the target network (Leduc: 300)."""
    min_buffer: int = 1_000
    """Items a buffer must hold before it is learned from (OpenSpiel's ``min_buffer_size_to_learn``)."""
    gamma: float = 1.0
    """Discount; 1 for these episodic games."""
    episodes_per_step: int = 1_000
    """Episodes played by one `step()` before the exploitability is measured."""
    measure: bool | None = None
    """Measure the average policies' exploitability exactly after every step (None: where the game's tree fits)."""

    checks: ClassVar[dict[str, Rule]] = {
        "rl_lr": POSITIVE, "sl_lr": POSITIVE, "optimizer": (lambda v: v in OPTIMIZERS, f"one of {OPTIMIZERS}"),
        "anticipatory": UNIT, "epsilon_start": UNIT,
        "epsilon_decay_episodes": POSITIVE_INT, "replay_capacity": _SIZE, "reservoir_capacity": _SIZE,
        "batch_size": _SIZE, "learn_every": POSITIVE_INT, "updates_per_learn": _SIZE,
        "target_update_every": POSITIVE_INT, "min_buffer": POSITIVE_INT, "gamma": UNIT,
        "episodes_per_step": _SIZE, "measure": (lambda v: v is None or FLAG[0](v), "True, False or None"),
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", check_widths("hidden", self.hidden))  # the rule every learner's widths keep
        super().__post_init__()
        small = min(self.replay_capacity, self.reservoir_capacity)
        if self.min_buffer > small:
            which = "replay_capacity" if self.replay_capacity <= self.reservoir_capacity else "reservoir_capacity"
            raise ValueError(f"min_buffer must be at most {which} ({small:,}): a buffer can never hold more, so "
                             f"nothing would be learned; got min_buffer={self.min_buffer!r}")


@dataclass(frozen=True)
class NFSPRecord(MeasuredRecord):
    """One NFSP step: ``episodes_per_step`` episodes, then an exact measurement.

    Its shared fields (`MeasuredRecord`): ``env_steps`` counts the decisions (all players) taken in total,
    ``episodes`` the episodes played in total, ``wall_time`` the seconds of stepping over the whole run;
    ``exploitability`` is of the average policies, where measured.
    """

    losses: dict[str, float] = field(default_factory=dict)
    """Mean losses of this step's updates: ``rl`` (the best responses' TD loss), ``sl`` (the average
    policies' cross-entropy); NaN where none was made."""
    times: dict[str, float] = field(default_factory=dict)
    """Seconds of this step by phase: ``play``, ``measure``."""
    epsilon: float = 0.0
    """The best responses' exploration rate after the step."""

    def as_row(self) -> dict[str, Any]:
        return self.measured_row(losses=self.losses, times=self.times, extra={"epsilon": self.epsilon})

    def __str__(self) -> str:
        from pbmarl.fmt import fmt

        return (f"iter {self.iteration:>3} | episodes {self.episodes} | exploitability {fmt(self.exploitability, '.4g')} | "
                f"rl {fmt(self.losses.get('rl'), '.3g')} | sl {fmt(self.losses.get('sl'), '.3g')} | "
                f"{sum(self.times.values()):.2f}s")


def record_json(record: NFSPRecord) -> dict[str, Any]:
    """A record as the JSON a run folder keeps."""
    return dict(record.__dict__)


def record_from_json(data: dict[str, Any]) -> NFSPRecord:
    """The record `record_json` wrote."""
    def opt(v: Any) -> float | None:
        return None if v is None else float(v)

    return NFSPRecord(iteration=int(data["iteration"]), env_steps=int(data["env_steps"]),
                      episodes=int(data["episodes"]), wall_time=float(data["wall_time"]),
                      exploitability=opt(data["exploitability"]), nash_conv=opt(data["nash_conv"]),
                      losses={str(k): float(v) for k, v in data["losses"].items()},
                      times={str(k): float(v) for k, v in data["times"].items()}, epsilon=float(data["epsilon"]))


def check_memory(game: Game, cfg: NFSPConfig) -> None:
    """Refuse buffers that could not be allocated, naming the option (both buffers, every player, when full)."""
    obs = int(np.prod(game.observation_shape)) * 4
    A = game.num_actions
    replay = cfg.replay_capacity * (2 * obs + 2 * A + 8 + 8 + 1)
    reservoir = cfg.reservoir_capacity * (obs + A + 8)
    total = game.num_players * (replay + reservoir)
    if total > MAX_BUFFER_BYTES:
        name = "replay_capacity" if replay >= reservoir else "reservoir_capacity"
        raise ValueError(f"{name}={getattr(cfg, name):,} would need {total / 2**30:,.1f} GiB of buffers for "
                         f"{game.name!r} ({game.num_players} players); at most {MAX_BUFFER_BYTES // 2**30} GiB "
                         f"are allowed: lower {name}")
