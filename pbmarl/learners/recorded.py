"""`Recorded`: what every steppable learner shows the same way, its `history` and its `spec`.

`Learner` (the PSRO best-response learners) and `ControlLearner` (the step-by-step
off-policy learners) both keep one frozen record per round in `records` and a config
dataclass in `config`; the table of the records and the JSON-able spec that rebuilds
the learner (`make_learner(game, spec)`) are written once, here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import pandas as pd

__all__ = ["Recorded"]


class Recorded:
    """Mixin: `history` (one row per record) and `spec` (name, seed, config) from the host's fields."""

    #: registry name of the algorithm ("dqn", "sac", ...)
    name: ClassVar[str]
    #: the record dataclass one round returns (its fields are the history's columns)
    record_class: ClassVar[type[Any]]
    records: Sequence[Any]
    seed: int
    config: Any

    @property
    def history(self) -> pd.DataFrame:
        """Every round's record, one row each (for several best responses, filter on ``task``)."""
        if not self.records:
            return pd.DataFrame(columns=[f.name for f in dataclasses.fields(self.record_class)])
        return pd.DataFrame([dataclasses.asdict(r) for r in self.records])

    def spec(self) -> dict[str, Any]:
        """JSON-able ``{"name", "seed", "config"}``; `make_learner(game, spec)` rebuilds the learner."""
        from pbmarl.learners.registry import config_to_json

        return {"name": self.name, "seed": self.seed, "config": config_to_json(self.config)}
