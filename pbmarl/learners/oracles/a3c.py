"""A3C: A2C whose gradient workers push asynchronously (ASP) to a parameter server (Mnih et al. 2016).

Example:
    >>> learner = pb.A3C(game, workers=4)  # same as pb.A2C(game, workers=4, sync="asp")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

from pbmarl.learners.oracles.a2c import A2C, A2CConfig

__all__ = ["A3C", "A3CConfig"]


@dataclass(frozen=True)
class A3CConfig(A2CConfig):
    """A2C's options with four asynchronous workers by default."""

    workers: int = 4
    """Gradient workers pushing to the server without a barrier."""
    sync: str = "asp"
    """Asynchronous: every gradient is applied on arrival (set "bap" to bound the staleness)."""


class A3C(A2C):
    """A2C under ASP with `workers` gradient workers (local or Ray, `backend=`); see `pbmarl.distributed.modes`."""

    name = "a3c"
    config_class = A3CConfig
