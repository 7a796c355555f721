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
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from pbmarl.protocols import Restorable

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=Restorable)


def all_or_nothing(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Decorate a method so that any exception (``KeyboardInterrupt`` included) restores `self`."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        torch_state = _torch_settings()
        state = self.snapshot()
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            _set_torch_settings(torch_state)
            self.restore(state)
            raise

    return wrapper


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
