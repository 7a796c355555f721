"""rliable, imported once, working with the arch that imports under pandas 3.

rliable 1.2 (its latest release) pins ``arch<8``, but arch 7 does not import under pandas 3
(``pandas.util._decorators.deprecate_kwarg`` changed). arch 8 imports, and renamed its bootstraps'
``random_state=`` to ``seed=``: rliable 1.2 still passes ``random_state``, which arch 8 then
refuses as data. `load` bridges that one keyword, in rliable's two bootstrap classes, and changes
nothing else: rliable draws its resamples from NumPy's global generator either way, so `seeded`
seeds that generator for the duration of a computation and puts it back after.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["load", "seeded"]

_LOADED: tuple[Any, Any] | None = None


def load() -> tuple[Any, Any]:
    """``(rliable.library, rliable.metrics)``; a missing or broken install says what to install."""
    global _LOADED
    if _LOADED is not None:
        return _LOADED
    try:
        from rliable import library, metrics  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError("pb.compare needs rliable: pip install 'pbmarl[experiments]' (or pip install rliable "
                          "'arch>=8')") from None
    except TypeError as exc:  # arch 7 under pandas 3
        raise ImportError(f"rliable's arch does not import with this pandas ({exc}); pip install 'arch>=8'") from None
    import arch.bootstrap as arch_bs

    if "seed" in inspect.signature(arch_bs.IIDBootstrap.__init__).parameters:
        _bridge(library, arch_bs)
    _LOADED = (library, metrics)
    return _LOADED


def _bridge(library: Any, arch_bs: Any) -> None:
    """rliable's ``random_state=`` as arch 8's ``seed=`` (rliable's own bodies, that keyword aside)."""

    def stratified_init(self: Any, *args: np.ndarray, random_state: Any = None, task_bootstrap: bool = False,
                        **kwargs: np.ndarray) -> None:
        arch_bs.IIDBootstrap.__init__(self, *args, seed=random_state, **kwargs)
        self._args_shape = args[0].shape
        self._num_tasks = self._args_shape[1]
        self._parameters = [self._num_tasks, task_bootstrap]
        self._task_bootstrap = task_bootstrap
        self._strata_indices = self._get_strata_indices()

    def independent_init(self: Any, *args: np.ndarray, random_state: Any = None, **kwargs: np.ndarray) -> None:
        arch_bs.IndependentSamplesBootstrap.__init__(self, *args, seed=random_state, **kwargs)
        self._args_shapes = [arg.shape for arg in args]
        self._kwargs_shapes = {key: val.shape for key, val in self._kwargs.items()}
        self._args_strata_indices = [self._get_strata_indices(shape) for shape in self._args_shapes]
        self._kwargs_strata_indices = {key: self._get_strata_indices(shape)
                                       for key, shape in self._kwargs_shapes.items()}

    library.StratifiedBootstrap.__init__ = stratified_init
    library.StratifiedIndependentBootstrap.__init__ = independent_init


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """NumPy's global generator seeded with `seed` inside, restored after (rliable resamples from it)."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
