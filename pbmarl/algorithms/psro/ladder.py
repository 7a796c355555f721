"""P2SRO's manager: the one authority on the ladder (McAleer et al. 2020, Sec. 3 and Alg. 1).

The ladder's rungs ``0, 1, 2, ...`` are population members. Rungs ``0..k`` are *fixed*;
the rungs above them are *active*, each claimed by one level. Two operations change it:

- ``claim()``: a new level takes the rung just above every rung in use;
- ``freeze(rung)``: the lowest active rung becomes fixed rung ``k + 1``. Any other rung is
  refused, so the fixed set is always ``{0..k}`` and no two levels ever share a rung.

Every change happens inside one method call of one object: with ``backend="ray"`` the
manager is one Ray actor (``ManagerActor``: it runs one call at a time, so claiming and
freezing are atomic whatever the number of callers); locally it is the same `LadderManager`
in-process, behind a lock, so threads get the same guarantee. The manager needs no CPU of
its own (``num_cpus=0``): the level actors keep the cluster's CPUs.

Example:
    >>> ladder = LadderManager(fixed=1)
    >>> ladder.claim(), ladder.claim()
    (1, 2)
    >>> ladder.try_freeze(2), ladder.freeze(1), ladder.fixed_rungs()
    (False, 1, [0, 1])
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

from pbmarl.hosting.hosted import Hosted


@runtime_checkable
class Ladder(Protocol):
    """What `P2SRO` asks of its manager, in-process (`LadderManager`) or a Ray actor (`RemoteLadder`)."""

    def claim(self) -> int: ...

    def freeze(self, rung: int) -> int: ...

    def try_freeze(self, rung: int) -> bool: ...

    def fixed_rungs(self) -> list[int]: ...

    def active_rungs(self) -> list[int]: ...

    def state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class LadderManager:
    """The ladder's bookkeeping; see the module doc.

    Args:
        fixed: how many rungs are fixed already (``k + 1``: the population's size per player).
        active: rungs already claimed (a resumed run's levels), lowest first; they must be
            ``fixed, fixed + 1, ...``.
    """

    def __init__(self, fixed: int = 0, active: list[int] | None = None) -> None:
        self._lock = threading.Lock()
        self.set_state({"fixed": fixed, "active": list(active or []), "events": []})

    def claim(self) -> int:
        """Take the next free rung for a new active level; returns it."""
        with self._lock:
            rung = self._fixed + len(self._active)
            self._active.append(rung)
            self._events.append(("claim", rung, self._fixed))
            return rung

    def freeze(self, rung: int) -> int:
        """Make `rung` (the lowest active one) fixed; returns it, now member ``k + 1``.

        Raises:
            ValueError: `rung` is not the lowest active rung (nothing changes).
        """
        with self._lock:
            if not self._active or rung != self._active[0]:
                raise ValueError(f"only the lowest active level may freeze: rung {rung!r} asked, "
                                 f"the lowest active rung is {self._active[0] if self._active else None} "
                                 f"(fixed rungs 0..{self._fixed - 1}, active {self._active})")
            return self._freeze()

    def try_freeze(self, rung: int) -> bool:
        """Freeze `rung` if it is the lowest active rung now; False (and nothing changes) otherwise."""
        with self._lock:
            if not self._active or rung != self._active[0]:
                return False
            self._freeze()
            return True

    def _freeze(self) -> int:
        rung = self._active.pop(0)
        self._fixed += 1
        self._events.append(("freeze", rung, self._fixed))
        return rung

    def fixed_rungs(self) -> list[int]:
        """The fixed rungs: always ``[0, 1, ..., k]``."""
        with self._lock:
            return list(range(self._fixed))

    def active_rungs(self) -> list[int]:
        """The claimed rungs above the fixed ones, lowest first."""
        with self._lock:
            return list(self._active)

    def events(self) -> list[tuple[str, int, int]]:
        """Every change so far, in order: ``(op, rung, fixed rungs after it)``."""
        with self._lock:
            return list(self._events)

    def state(self) -> dict[str, Any]:
        """The whole ladder as plain data (saved with a run, restored by `set_state`)."""
        with self._lock:
            return {"fixed": self._fixed, "active": list(self._active), "events": list(self._events)}

    def set_state(self, state: dict[str, Any]) -> None:
        fixed, active = int(state["fixed"]), [int(r) for r in state["active"]]
        if fixed < 0 or active != list(range(fixed, fixed + len(active))):
            raise ValueError(f"a ladder's active rungs must be {fixed}, {fixed + 1}, ... above its {fixed} fixed "
                             f"rungs, got fixed={state['fixed']!r}, active={state['active']!r}")
        with self._lock:
            self._fixed, self._active = fixed, active
            self._events = [(str(e[0]), int(e[1]), int(e[2])) for e in state.get("events", [])]

    def close(self) -> None:
        """Nothing to end: the manager lives in this process."""


class RemoteLadder:
    """A `LadderManager` in one Ray actor (one call at a time: atomic), with the same methods."""

    def __init__(self, fixed: int = 0, active: list[int] | None = None) -> None:
        # bookkeeping only: no CPU, so it never competes with the level actors for one
        self.host = Hosted(LadderManager, (fixed, active), backend="ray", num_cpus=0, max_concurrency=1,
                           name="P2SRO ladder manager", quiet=True)

    def _call(self, name: str, *args: Any) -> Any:
        return self.host.call(name, *args)

    def claim(self) -> int:
        return int(self._call("claim"))

    def freeze(self, rung: int) -> int:
        return int(self._call("freeze", rung))

    def try_freeze(self, rung: int) -> bool:
        return bool(self._call("try_freeze", rung))

    def fixed_rungs(self) -> list[int]:
        return list(self._call("fixed_rungs"))

    def active_rungs(self) -> list[int]:
        return list(self._call("active_rungs"))

    def events(self) -> list[tuple[str, int, int]]:
        return list(self._call("events"))

    def state(self) -> dict[str, Any]:
        return dict(self._call("state"))

    def set_state(self, state: dict[str, Any]) -> None:
        self._call("set_state", state)

    def close(self) -> None:
        """End the actor."""
        self.host.close()


def make_ladder(backend: str, fixed: int, active: list[int] | None = None) -> LadderManager | RemoteLadder:
    """The manager for `backend`: a Ray actor for ``"ray"``, the same manager in-process for ``"local"``."""
    if backend == "ray":
        return RemoteLadder(fixed, active)
    if backend == "local":
        return LadderManager(fixed, active)
    raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
