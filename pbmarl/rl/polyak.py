"""Target-network updates: Polyak averaging of parameters (optax's ``incremental_update``).

``theta' <- tau * theta + (1 - tau) * theta'`` (Polyak & Juditsky 1992; Lillicrap et al. 2016 for
target networks). Tested in tests/test_rl_polyak.py.

Example:
    >>> import torch
    >>> target, source = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    >>> soft_update(target, source, 1.0)
    >>> bool(torch.equal(target.weight, source.weight))
    True
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Polyak", "soft_update"]


def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``theta' <- tau * theta + (1 - tau) * theta'`` (Lillicrap et al. 2016, DDPG).

    ``tau = 1`` copies the source (a hard update, as DQN's periodic sync). A learner that averages the
    same pair after every update builds a `Polyak` once instead: the same arithmetic without walking
    both module trees each time.
    """
    Polyak(target, source)(tau)


class Polyak:
    """`soft_update` for one fixed (target, source) pair, their parameter and buffer lists taken once.

    Loading weights (``load_state_dict``) copies into the same tensors, so the lists stay valid; a
    module whose layers are replaced needs a new `Polyak`.
    """

    def __init__(self, target: nn.Module, source: nn.Module) -> None:
        self.target_params: list[torch.Tensor] = list(target.parameters())
        self.source_params: list[torch.Tensor] = list(source.parameters())
        self.target_buffers: list[torch.Tensor] = list(target.buffers())
        self.source_buffers: list[torch.Tensor] = list(source.buffers())
        if [t.shape for t in self.target_params] != [s.shape for s in self.source_params]:
            raise ValueError("Polyak averaging needs a target and a source of the same architecture; their "
                             f"parameter shapes differ: {[tuple(t.shape) for t in self.target_params]} against "
                             f"{[tuple(s.shape) for s in self.source_params]}")

    def __call__(self, tau: float) -> None:
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau!r}")
        with torch.no_grad():
            if tau == 1.0:
                for t, s in zip(self.target_params, self.source_params):
                    t.copy_(s)
            else:
                torch._foreach_lerp_(self.target_params, self.source_params, tau)
            for tb, sb in zip(self.target_buffers, self.source_buffers):
                tb.copy_(sb)
