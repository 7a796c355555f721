"""The in-process backend: one `RolloutWorker` runs every unit, one after another."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.rollout.units import UnitResult, WorkUnit
from pbmarl.rollout.worker import RolloutWorker


class LocalBackend:
    """Runs units in this process with the caller's own policy objects (nothing is serialised)."""

    name = "local"

    def __init__(self, game: Game, *, num_workers: int, envs_per_worker: int, engine: str) -> None:
        self.num_workers = num_workers
        self.worker = RolloutWorker(game, envs=envs_per_worker, engine=engine)

    def run(self, units: Sequence[WorkUnit], policies: dict[str, Policy], on_result: Callable[[UnitResult], None]) -> None:
        """Play every unit and hand each result to `on_result`, in order."""
        for unit in units:
            for token in unit.tokens:
                self.worker.bind(token, policies[token])
            on_result(self.worker.run(unit))

    def prune(self, live: set[str]) -> None:
        """Drop policies whose tokens are no longer alive."""
        self.worker.forget([t for t in self.worker.policies if t not in live])

    def close(self) -> None:
        self.worker.policies.clear()
