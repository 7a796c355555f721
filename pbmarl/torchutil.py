"""Torch helpers that every layer from the parameter server up may use: a bit-exact, faster
`clip_grad_norm`, `torch_threads` (a block with a set number of torch threads), `flush_denormals` (a block
with subnormal floats read and written as zero), `copy_state`
(a deep copy of a state dict, many times faster than `copy.deepcopy` on small tensors), `on_cpu` (a state
dict's tensors on the CPU, as run folders write them) and `device_of` (where a module's parameters live).

They import nothing from pbmarl, so `pbmarl.distributed` (the server clips the averaged gradient)
and the learners above it share one implementation.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch

__all__ = ["clip_grad_norm", "copy_state", "device_of", "flush_denormals", "on_cpu", "torch_threads"]

T = TypeVar("T")

#: how deep this thread is in `flush_denormals` blocks (the CPU flag it sets is per thread)
_flushing = threading.local()


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with `n` torch threads (None: unchanged), restoring the setting after."""
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def flush_denormals() -> Iterator[None]:
    """Run the block with subnormal floats (below 1.2e-38 in float32) flushed to zero on this thread's CPU
    (`torch.set_flush_denormal`), then back to torch's default (off). Blocks nest; the outermost restores.

    Adam's second moment decays by beta2 every update where a weight's gradient is zero (dead ReLU units,
    inputs that are never set), so it drifts into the subnormal range and stays there for some 16,000 updates.
    x86 CPUs take about 17 times longer on a square root of a subnormal (4.0 against 0.23 ms for 512 x 512
    values on this machine). After 7M env steps of NFSP with three hidden layers of 512 on liar's dice, 77% of
    its Adam second moments were subnormal and the square root in Adam's step took half the run. Flushing moves
    an update by less than 1e-30, far below float32's resolution of a weight; TensorFlow flushes by default.
    It holds for the calling thread only, so use it with `torch_threads(1)` (as `pb.NFSP` does).

    >>> with flush_denormals():
    ...     torch.tensor([1e-39]).item()
    0.0
    >>> torch.tensor([1e-39]).item() > 0
    True
    """
    depth = getattr(_flushing, "depth", 0)
    if depth == 0:
        torch.set_flush_denormal(True)
    _flushing.depth = depth + 1
    try:
        yield
    finally:
        _flushing.depth = depth
        if depth == 0:
            torch.set_flush_denormal(False)


def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """`torch.nn.utils.clip_grad_norm_` (2-norm) with the same kernels, in the same order, so the same bits.

    torch's regroups the gradients by device and dtype and checks foreach support on every call: about
    45 us of Python (90 against 47 us for a 4-256-256-2 MLP on this machine), in a CartPole DQN update of
    about 1.3 ms. Gradients on one CPU device and dtype are clipped here directly; anything else (mixed
    devices or dtypes, sparse gradients, accelerators) takes torch's own. Returns the total norm.
    """
    params = list(params)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    first = grads[0]
    if first.device.type != "cpu" or any(g.dtype != first.dtype or g.device != first.device or g.is_sparse
                                         for g in grads):
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    with torch.no_grad():
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
        torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


def copy_state(state: T) -> T:
    """A deep copy of a state dict (nested dicts, lists and tuples): tensors by ``detach().clone()``, other
    leaves by `copy.deepcopy`. The same values as ``copy.deepcopy(state)``; `copy.deepcopy` goes through each
    tensor's storage and took 5.8 ms on an IMPALA optimiser's 277 kB state against 0.3 ms here, which made an
    all-or-nothing step's snapshot a third of the step.

    >>> s = {"w": torch.ones(2), "step": 3, "groups": [{"lr": 0.1}]}
    >>> c = copy_state(s); c["w"] += 1; c["groups"][0]["lr"] = 1.0
    >>> s["w"].tolist(), s["groups"][0]["lr"]
    ([1.0, 1.0], 0.1)
    """
    return _map_tensors(state, lambda t: t.detach().clone(), copy.deepcopy)


def on_cpu(state: T) -> T:
    """`state` (nested dicts, lists and tuples) with every tensor on the CPU: those already there are the same
    objects (no copy), others are copied by ``.cpu()``. Run folders write state dicts through it, so a run trained
    on a GPU loads on a machine without one.

    >>> s = {"w": torch.ones(2), "groups": [{"lr": 0.1}]}
    >>> on_cpu(s)["w"] is s["w"]
    True
    """
    return _map_tensors(state, lambda t: t if t.device.type == "cpu" else t.cpu(), lambda leaf: leaf)


def _map_tensors(state: T, tensor: Callable[[torch.Tensor], torch.Tensor], leaf: Callable[[Any], Any]) -> T:
    """`state` rebuilt through nested dicts, lists and plain tuples, each tensor through `tensor` and every other
    leaf (named tuples included) through `leaf`."""
    if isinstance(state, torch.Tensor):
        return tensor(state)  # type: ignore[return-value]
    if isinstance(state, dict):
        return type(state)((k, _map_tensors(v, tensor, leaf)) for k, v in state.items())
    if isinstance(state, list):
        return [_map_tensors(v, tensor, leaf) for v in state]  # type: ignore[return-value]
    if isinstance(state, tuple) and not hasattr(state, "_fields"):
        return tuple(_map_tensors(v, tensor, leaf) for v in state)  # type: ignore[return-value]
    return leaf(state)


def device_of(module: torch.nn.Module) -> torch.device:
    """The device of `module`'s first parameter (the CPU for a module without parameters)."""
    for p in module.parameters():
        return p.device
    return torch.device("cpu")
