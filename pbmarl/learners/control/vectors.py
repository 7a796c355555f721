"""The flat state vectors and recorded gradients of the control learners on a parameter server.

`get_state` / `set_state`: every tensor of a learner's networks (targets included) as one float32
vector, what the server publishes and each job loads. `record_steps`: optimisers that keep their
gradients instead of stepping (a worker's job). `step_on_mean`: one step on the count-weighted mean of
such gradients (the server's update). Used by `pbmarl.learners.control.rounds` and the MARL teams.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["get_state", "named_optimizers", "record_steps", "set_state", "step_on_mean"]


def _stateful(learner: Any) -> list[tuple[str, Any]]:
    """The learner's saved entries that are not optimisers, in `_modules` order."""
    return [(k, m) for k, m in learner._modules().items() if not isinstance(m, torch.optim.Optimizer)]


def named_optimizers(learner: Any) -> list[tuple[str, torch.optim.Optimizer]]:
    """The learner's optimisers by their saved names, in `_modules` order."""
    return [(k, m) for k, m in learner._modules().items() if isinstance(m, torch.optim.Optimizer)]


def _tensors(learner: Any) -> list[tuple[Any, str, torch.Tensor]]:
    """``(entry, key, tensor)`` of every state tensor, the modules' own (written in place)."""
    out: list[tuple[Any, str, torch.Tensor]] = []
    for _, m in _stateful(learner):
        state = m.state_dict(keep_vars=True) if isinstance(m, torch.nn.Module) else m.state_dict()
        out.extend((m, k, t) for k, t in state.items())
    return out


def get_state(learner: Any) -> np.ndarray:
    """Every tensor of the learner's networks (targets included) as one flat float32 vector."""
    parts = [t.detach().reshape(-1).to(torch.float32) for _, _, t in _tensors(learner)]
    return torch.cat(parts).numpy().copy() if parts else np.zeros(0, np.float32)


def set_state(learner: Any, vector: np.ndarray) -> None:
    """Load what `get_state` returned into the learner's networks (in place); its length must match."""
    entries = _tensors(learner)
    total = sum(t.numel() for _, _, t in entries)
    if np.shape(vector) != (total,):
        raise ValueError(f"state vector must have shape ({total},), got {np.shape(vector)}")
    flat = torch.from_numpy(np.array(vector, dtype=np.float32))
    offset = 0
    with torch.no_grad():
        for entry, key, t in entries:
            k = t.numel()
            value = flat[offset:offset + k].view(t.shape).to(t.dtype)
            if isinstance(entry, torch.nn.Module):
                t.copy_(value)
            else:  # a lone parameter's box: its own load
                entry.load_state_dict({key: value})
            offset += k


def _flat_grad(opt: torch.optim.Optimizer) -> np.ndarray:
    params = [p for group in opt.param_groups for p in group["params"]]
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
                     ).detach().numpy().copy()


def record_steps(learner: Any, sink: dict[str, np.ndarray]) -> None:
    """Make every optimiser of `learner` record instead of step: ``opt.step()`` puts that optimiser's
    flat gradient into ``sink[name]`` and leaves the weights alone (the worker clears `sink` per job).

    A second step of one optimiser before the sink is cleared raises: a job is one gradient each.
    """
    for name, opt in named_optimizers(learner):
        opt.step = _recorder(name, opt, sink)  # type: ignore[method-assign]


def _recorder(name: str, opt: torch.optim.Optimizer, sink: dict[str, np.ndarray]) -> Any:
    def step(closure: Any = None) -> None:
        if name in sink:
            raise RuntimeError(f"optimiser {name!r} stepped twice in one parameter-server job; a job takes "
                               "one gradient of each optimiser (set the learner's one-gradient options)")
        sink[name] = _flat_grad(opt)

    return step


def step_on_mean(opt: torch.optim.Optimizer, rows: Sequence[tuple[np.ndarray, int]]) -> None:
    """Step `opt` once on the count-weighted mean of the flat gradients ``(gradient, count)`` of `rows`."""
    n = np.array([c for _, c in rows], dtype=float)
    mean = torch.as_tensor(np.tensordot(n / n.sum(), np.stack([g for g, _ in rows]), axes=1), dtype=torch.float32)
    offset = 0
    for p in (p for group in opt.param_groups for p in group["params"]):
        k = p.numel()
        p.grad = mean[offset:offset + k].view_as(p).clone()
        offset += k
    opt.step()
