"""`Recorded`: the JSON-able `spec` every learner describes itself by (PSRO's run folders and parallel oracles use it).

`Learner` (the PSRO best-response learners) and `ControlLearner` (the step-by-step control
learners) both keep a config dataclass in `config` and a `seed`; the spec that rebuilds an
equal, untrained learner (`make_learner(game, spec)`) is written once, here. (Their history,
records and files are the `pbmarl.runs.Run` base's.)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Recorded"]


class Recorded:
    """Mixin: `spec` (name, seed, config) from the host's fields."""

    #: registry name of the algorithm ("dqn", "sac", ...)
    name: ClassVar[str]
    seed: int
    config: Any

    def spec(self) -> dict[str, Any]:
        """JSON-able ``{"name", "seed", "config"}``; `make_learner(game, spec)` rebuilds the learner."""
        return {"name": self.name, "seed": self.seed, "config": self.config.to_dict()}
