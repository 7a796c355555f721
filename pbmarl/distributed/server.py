"""The parameter server: applies (averaged) gradients with the learner's optimiser, publishes versioned weights.

Weights and gradients travel as flat float32 vectors in the order of `params`
(``torch.nn.utils.parameters_to_vector``). A gradient computed from version ``v``
and applied when the server is at version ``u`` has staleness ``u - v``; every
applied gradient's staleness is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["ParameterServer", "get_vector", "set_vector"]


def get_vector(params: Sequence[torch.nn.Parameter]) -> np.ndarray:
    """The parameters as one flat numpy vector (a copy)."""
    return torch.nn.utils.parameters_to_vector(list(params)).detach().numpy().copy()


def set_vector(params: Sequence[torch.nn.Parameter], vector: np.ndarray) -> None:
    """Overwrite the parameters from a flat vector; its length must match."""
    total = sum(p.numel() for p in params)
    if np.shape(vector) != (total,):
        raise ValueError(f"weight vector must have shape ({total},), got {np.shape(vector)}")
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.as_tensor(np.array(vector, dtype=np.float32)), list(params))


class ParameterServer:
    """Owns `params` and `optimizer`; `apply` one update from gradients, `weights` the current version.

    Args:
        params: the trained parameters (the learner's own, so `save` keeps working).
        optimizer: the optimiser stepping them.
        max_grad_norm: norm clip of the averaged gradient (None: no clip).
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], optimizer: torch.optim.Optimizer, *,
                 max_grad_norm: float | None = None) -> None:
        self.params = list(params)
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.version = 0
        #: staleness of every applied gradient, in order
        self.staleness: list[int] = []
        self._published: tuple[int, np.ndarray] | None = None

    def weights(self) -> tuple[int, np.ndarray]:
        """``(version, flat weights)``; the same array object while the version stays."""
        if self._published is None or self._published[0] != self.version:
            self._published = (self.version, get_vector(self.params))
        return self._published

    def apply(self, grads: Sequence[np.ndarray], counts: Sequence[int], versions: Sequence[int]) -> int:
        """One optimiser step on ``sum_i n_i g_i / sum_i n_i`` (the gradient of the mean loss over all samples).

        `counts` are the samples each gradient averaged over, `versions` the weights each was computed at.
        Returns the new version.
        """
        if not grads or len(grads) != len(counts) or len(grads) != len(versions):
            raise ValueError(f"need one count and version per gradient, got {len(grads)}, {len(counts)}, {len(versions)}")
        n = np.asarray(counts, dtype=float)
        if (n <= 0).any():
            raise ValueError(f"sample counts must be positive, got {list(counts)}")
        mean = np.tensordot(n / n.sum(), np.stack([np.asarray(g, dtype=np.float64) for g in grads]), axes=1)
        flat = torch.as_tensor(mean, dtype=torch.float32)
        offset = 0
        for p in self.params:
            k = p.numel()
            p.grad = flat[offset:offset + k].view_as(p).clone()
            offset += k
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()
        self.staleness.extend(self.version - int(v) for v in versions)
        self.version += 1
        return self.version
