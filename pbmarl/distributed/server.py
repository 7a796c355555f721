"""The parameter server: applies (averaged) gradients with the learner's optimiser, publishes versioned weights.

Weights and gradients travel as flat float32 vectors in the order of `params`
(``torch.nn.utils.parameters_to_vector``). A gradient computed from version ``v``
and applied when the server is at version ``u`` has staleness ``u - v``; every
applied gradient's staleness is recorded.

`ParameterServer` is the update rule. `ServerProcess` hosts one on its own copies of
the learner's networks and optimiser: a Ray actor on the Ray backend, an in-process
object on the local one (`pbmarl.hosting.hosted`). `RemoteServer` is the learner's
handle on it: it numbers the versions, hands workers the published weights (on Ray an
object reference the workers resolve themselves) and `pull`s the server's state back
into the learner's own networks, so `save`, `policy()` and evaluation see the trained weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pbmarl.hosting.hosted import Hosted
from pbmarl.torchutil import clip_grad_norm, copy_state

__all__ = ["ParameterServer", "RemoteServer", "ServerProcess", "get_vector", "set_vector"]


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
            clip_grad_norm(self.params, self.max_grad_norm)
        self.optimizer.step()
        self.staleness.extend(self.version - int(v) for v in versions)
        self.version += 1
        return self.version


class ServerProcess:
    """A `ParameterServer` on its own copies of `modules` and of the optimiser (the server actor's body).

    Args:
        modules: the networks whose parameters are trained, in the order of the flat vectors.
        optimizer_class, defaults, state: rebuild the learner's optimiser (``type(opt)``,
            ``opt.defaults``, ``opt.state_dict()``) over the copies.
        version: the version the copies are at.
        max_grad_norm: as `ParameterServer`'s.
    """

    def __init__(self, modules: Sequence[torch.nn.Module], optimizer_class: type[torch.optim.Optimizer],
                 defaults: dict[str, Any], state: dict[str, Any], version: int, max_grad_norm: float | None) -> None:
        torch.set_num_threads(1)
        self.modules = list(modules)
        params = [p for m in self.modules for p in m.parameters()]
        optimizer = optimizer_class(params, **defaults)
        optimizer.load_state_dict(state)
        self.server = ParameterServer(params, optimizer, max_grad_norm=max_grad_norm)
        self.server.version = int(version)

    def apply(self, grads: Sequence[np.ndarray], counts: Sequence[int], versions: Sequence[int],
              lr: float) -> np.ndarray:
        """One update at learning rate `lr`; the published weights of the new version."""
        for group in self.server.optimizer.param_groups:
            group["lr"] = lr
        self.server.apply(grads, counts, versions)
        return self.server.weights()[1]

    def state(self) -> tuple[int, np.ndarray, dict[str, Any]]:
        """``(version, flat weights, optimiser state_dict)``, copies."""
        version, weights = self.server.weights()
        return version, weights.copy(), copy_state(self.server.optimizer.state_dict())

    def ping(self) -> bool:
        return True


class RemoteServer:
    """The learner's handle on a `ServerProcess` (a Ray actor when ``backend="ray"``).

    Args:
        modules: the learner's own networks (copied into the server; `pull` writes back into them).
        optimizer: the learner's optimiser (copied likewise).
        backend: "local" or "ray".
        max_grad_norm: norm clip of each applied (averaged) gradient.
    """

    def __init__(self, modules: Sequence[torch.nn.Module], optimizer: torch.optim.Optimizer, *, backend: str,
                 max_grad_norm: float | None = None, version: int = 0) -> None:
        self.modules = list(modules)
        self.optimizer = optimizer
        self.params = [p for m in self.modules for p in m.parameters()]
        self.version = int(version)  # a resumed task's server starts where the saved one was
        #: staleness of every applied gradient, in order (server version at apply - gradient's version)
        self.staleness: list[int] = []
        self.host = Hosted(ServerProcess, (self.modules, type(optimizer), dict(optimizer.defaults),
                                           optimizer.state_dict(), self.version, max_grad_norm),
                           backend=backend, name="parameter server")
        self._published: tuple[int, Any] = (self.version, self.host.put(get_vector(self.params)))

    def weights(self) -> tuple[int, Any]:
        """``(version, published weights)``: a flat vector locally, an object reference on Ray."""
        return self._published

    def apply(self, grads: Sequence[np.ndarray], counts: Sequence[int], versions: Sequence[int]) -> int:
        """Send one update (at the learner optimiser's current learning rate); returns the new version.

        On Ray this does not wait: the new weights are published as a reference that the
        next worker resolves once the server has applied the update.
        """
        if not grads or len(grads) != len(counts) or len(grads) != len(versions):
            raise ValueError(f"need one count and version per gradient, got {len(grads)}, {len(counts)}, {len(versions)}")
        if any(int(c) <= 0 for c in counts):
            raise ValueError(f"sample counts must be positive, got {list(counts)}")
        future = self.host.send("apply", list(grads), list(counts), [int(v) for v in versions], self._lr())
        self.staleness.extend(self.version - int(v) for v in versions)
        self.version += 1
        self._published = (self.version, future)
        return self.version

    def _lr(self) -> float | None:
        """The learning rate each update is applied at (the learner's, which may be annealed)."""
        return float(self.optimizer.param_groups[0]["lr"])

    def pull(self) -> int:
        """Copy the server's weights and optimiser state into the learner's own; returns the version."""
        version, weights, state = self.host.call("state")
        if version == self.version + 1:  # an `apply` interrupted after the server took the update: count it
            self.version = version
        if version != self.version:
            raise RuntimeError(f"parameter server is at version {version}, expected {self.version}")
        set_vector(self.params, weights)
        self.optimizer.load_state_dict(state)
        return int(version)

    def close(self) -> None:
        self.host.close()
