"""`OnServer`: what every learner or driver with a parameter-server mode shows the same way.

Imports nothing from pbmarl, so the learners' base classes can take it without a cycle.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OnServer"]


class OnServer:
    """Mixin of a learner or driver that runs on a parameter server through ``self._rounds``
    (a `pbmarl.distributed.modes.Rounds`, built by its first step with ``workers > 1``)."""

    @property
    def staleness(self) -> list[int]:
        """With ``workers > 1``: staleness of every gradient the parameter server applied, in order.

        (Server version at apply minus the version the gradient was computed at; empty for one
        worker and before the first step.)
        """
        rounds: Any = self.__dict__.get("_rounds")
        return list(rounds.staleness) if rounds is not None else []

    def close(self) -> None:
        """Stop the parameter server's workers and server (``workers > 1``); the next step starts fresh ones."""
        rounds: Any = self.__dict__.get("_rounds")
        if rounds is not None:
            rounds.close()
            self.__dict__["_rounds"] = None
