"""Config fields that put a gradient learner on a parameter server (no torch, no Ray: imported by configs).

`PPOConfig` and `A2CConfig` inherit `ParallelOptions`; ``workers=1`` (the default) is the
ordinary single-process learner, ``workers > 1`` runs `pbmarl.distributed.modes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pbmarl.config import Rule

#: the synchronisation modes, as MALib names them
SYNC_MODES = ("bsp", "asp", "bap")
BACKENDS = ("local", "ray")


def _int_at_least(low: int) -> Rule:
    return (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low,
            "a positive int" if low == 1 else "a non-negative int")


#: the most gradient workers one parameter server takes (each is a process or an actor with its own networks)
MAX_WORKERS = 256


@dataclass(frozen=True)
class ParallelOptions:
    """Where gradients are computed and how the server applies them."""

    workers: int = 1
    """Gradient workers; 1 is the ordinary learner, more puts it on a parameter server."""
    sync: str = "bsp"
    """"bsp" (average all workers' gradients per update), "asp" (apply each on arrival) or
    "bap" (apply on arrival while no worker in flight would fall more than `staleness` versions behind)."""
    staleness: int = 1
    """The BAP bound on ``server version at apply - version the gradient was computed at``."""
    backend: str = "local"
    """"local" runs the workers in-process (simulated arrival order), "ray" as Ray actors."""

    checks: ClassVar[dict[str, Rule]] = {
        "workers": (lambda v: _int_at_least(1)[0](v) and v <= MAX_WORKERS, f"an int in [1, {MAX_WORKERS}]"),
        "staleness": _int_at_least(0),
        "sync": (lambda v: v in SYNC_MODES, f"one of {SYNC_MODES}"),
        "backend": (lambda v: v in BACKENDS, f"one of {BACKENDS}"),
    }

#: the `workers` rule of the actor-learner set-ups (Ape-X, IMPALA), which scale with their own `actors`
ACTORS_NOT_WORKERS: Rule = (lambda v: v == 1 and isinstance(v, int) and not isinstance(v, bool),
                            "1: this learner scales with actors=N, not with parameter-server workers")


def check_parallel(config: ParallelOptions, who: str) -> None:
    """Apply `ParallelOptions.checks` to a config that is not a `LearnerConfig` (the multi-agent learners').

    Raises:
        ValueError: naming ``who.field``, the value and what is accepted.
    """
    for name, (ok, accepted) in ParallelOptions.checks.items():
        value = getattr(config, name)
        if not ok(value):
            raise ValueError(f"{who}.{name} must be {accepted}, got {value!r}")

