"""What a `pb.MARL` run is configured by (`MARLConfig`) and what each of its steps records (`MARLRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pbmarl.config import POSITIVE_INT, Config, Rule, is_int
from pbmarl.runs import Record, shared_row

__all__ = ["MARLConfig", "MARLRecord"]


@dataclass(frozen=True)
class MARLConfig(Config):
    """`MARL` options (its parts, the learners, mapping, fixed policies and pool, are arguments)."""

    num_envs: int = 32
    """Environment instances stepped together."""
    num_threads: int | None = 1
    """torch threads while collecting and training (None: leave torch's setting)."""

    checks: ClassVar[dict[str, Rule]] = {
        "num_envs": POSITIVE_INT,
        "num_threads": (lambda v: v is None or (is_int(v) and v >= 1), "a positive int or None (torch's setting)"),
    }


@dataclass(frozen=True)
class MARLRecord(Record):
    """One `MARL.step()`.

    Attributes:
        iteration: 1, 2, ... (steps taken so far).
        env_steps, episodes, wall_time: cumulative env steps, ended episodes and seconds of the run.
        returns: mean episode return per group (summed over the group's agents) over this step's episodes.
        losses: per learning group, the learner's training statistics (``loss/<group>/<name>``).
        times: seconds of each phase of the step (``time/<phase>``).
        extra: on a parameter server, ``max_staleness`` and ``fresh_workers`` (see the module doc).
    """

    iteration: int
    env_steps: int
    episodes: int
    wall_time: float
    returns: dict[str, float]
    losses: dict[str, dict[str, float]] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, returns=self.returns, times=self.times, extra=self.extra,
                          losses={f"{g}/{k}": v for g, d in self.losses.items() for k, v in d.items()})

    def to_json(self) -> dict[str, Any]:
        """JSON-ready, every dict as ``[key, value]`` pairs so that its order (the history's columns) survives."""
        return {"iteration": self.iteration, "env_steps": self.env_steps, "episodes": self.episodes,
                "wall_time": self.wall_time, "returns": list(self.returns.items()),
                "losses": [[g, list(d.items())] for g, d in self.losses.items()],
                "times": list(self.times.items()), "extra": list(self.extra.items())}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MARLRecord:
        return cls(int(data["iteration"]), int(data["env_steps"]), int(data["episodes"]), float(data["wall_time"]),
                   dict(data["returns"]), {g: dict(d) for g, d in data["losses"]}, dict(data["times"]),
                   dict(data["extra"]))

    def __str__(self) -> str:
        from pbmarl.fmt import fmt

        rets = ", ".join(f"{g} {fmt(v)}" for g, v in self.returns.items())
        return (f"MARL step {self.iteration}: {self.env_steps} env steps, {self.episodes} episodes, return {rets}, "
                f"{sum(self.times.values()):.2f}s")
