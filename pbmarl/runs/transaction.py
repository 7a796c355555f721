"""All-or-nothing steps: an exception anywhere in a step puts the object back as it was.

Every run decorates its ``step`` with `all_or_nothing`. The object provides ``snapshot()`` (a cheap record of everything a
step may change) and ``restore(state)``. A ``KeyboardInterrupt`` in any phase, an
error in the oracle, evaluator, solver or measurement, or a failed save then leaves
the population, payoff table, history, random state and learner exactly as before
the call, so the next ``step()`` or ``save()`` works on a consistent object.

torch's process-wide settings are part of that: an interrupt inside ``torch.no_grad()``'s
``__enter__`` or inside a thread-count guard can leave grad mode off or the thread count
changed, so the guard also puts back torch's grad mode and thread count (when torch is loaded;
it is never imported here).

A run whose own snapshot already holds a part's (PSRO, XDO, P2SRO and League hold their learners')
runs the part's steps inside ``covered(part)``: they then take no snapshot of their own, since the
run's puts the part back on any exception. A DQN best response steps its learner a few hundred
times per PSRO iteration, and each of those snapshots would copy the networks, the optimiser and
the replay buffer.

Example:
    >>> class Counter:
    ...     def __init__(self): self.n = 0
    ...     def snapshot(self): return self.n
    ...     def restore(self, state): self.n = state
    ...     @all_or_nothing
    ...     def step(self, fail=False):
    ...         self.n += 1
    ...         if fail: raise RuntimeError("boom")
    ...         return self.n
    >>> c = Counter(); c.step()
    1
    >>> try:
    ...     c.step(fail=True)
    ... except RuntimeError:
    ...     pass
    >>> c.n
    1
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Concatenate, ParamSpec, TypeVar

from pbmarl.protocols import Restorable

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=Restorable)

_COVERED: ContextVar[tuple[object, ...]] = ContextVar("pbmarl_covered", default=())


def all_or_nothing(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Decorate a method so that any exception (``KeyboardInterrupt`` included) restores `self`."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if is_covered(self):
            return method(self, *args, **kwargs)
        torch_state = _torch_settings()
        state = self.snapshot()
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            _set_torch_settings(torch_state)
            self.restore(state)
            raise

    return wrapper


@contextmanager
def covered(*parts: object) -> Iterator[None]:
    """Run a block in which the all-or-nothing steps of `parts` take no snapshot of their own.

    Only for a caller that took the parts' snapshots before the block and restores them (and
    torch's settings) on any exception out of it, as an `all_or_nothing` step whose own snapshot
    holds theirs does. The cover ends with the block, also on an error, and is per thread (a
    ``None`` among `parts` covers nothing).

    Example:
        >>> class Part:
        ...     def __init__(self): self.n, self.snapshots = 0, 0
        ...     def snapshot(self): self.snapshots += 1; return self.n
        ...     def restore(self, state): self.n = state
        ...     @all_or_nothing
        ...     def step(self, fail=False):
        ...         self.n += 1
        ...         if fail: raise RuntimeError("boom")
        >>> class Run:
        ...     def __init__(self): self.part = Part()
        ...     def snapshot(self): return self.part.snapshot()
        ...     def restore(self, state): self.part.restore(state)
        ...     @all_or_nothing
        ...     def step(self, fail=False):
        ...         with covered(self.part):
        ...             self.part.step(); self.part.step(fail=fail)
        >>> run = Run(); run.step(); (run.part.n, run.part.snapshots)   # one snapshot, the run's
        (2, 1)
        >>> try:
        ...     run.step(fail=True)
        ... except RuntimeError:
        ...     pass
        >>> run.part.n    # both of the part's steps are undone by the run's snapshot
        2
    """
    token = _COVERED.set(_COVERED.get() + parts)
    try:
        yield
    finally:
        _COVERED.reset(token)


def is_covered(part: object) -> bool:
    """Whether this thread is inside a `covered` block over `part`: a part that holds others (an oracle that
    holds one learner copy per player) covers them in turn while it is covered itself."""
    return any(p is part for p in _COVERED.get())


def _torch_settings() -> tuple[bool, int] | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return bool(torch.is_grad_enabled()), int(torch.get_num_threads())


def _set_torch_settings(settings: tuple[bool, int] | None) -> None:
    torch = sys.modules.get("torch")
    if torch is None or settings is None:
        return
    grad, threads = settings
    torch.set_grad_enabled(grad)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
