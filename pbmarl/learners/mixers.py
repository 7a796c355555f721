"""Value-decomposition mixers: Q_tot from the agents' Q-values and the global state.

``VDN`` (Sunehag et al. 2018): ``Q_tot = sum_a Q_a``.

``QMixer`` (Rashid et al. 2018, QMIX, eq. 4-5): a two-layer network over the agents'
chosen Q-values whose weights come from hypernetworks of the state ``s``:

    h     = elu(Q^T |W1(s)| + b1(s))          W1: [n, e], b1: [e]
    Q_tot = h^T |w2(s)| + V(s)                w2: [e],   V: a 2-layer MLP of s

The absolute value keeps every mixing weight non-negative, so the mixer is monotonic:
``dQ_tot / dQ_a >= 0`` for every agent ``a`` (the property that lets each agent act
greedily on its own Q and still maximise Q_tot). Biases may be any sign.

Example:
    >>> mixer = QMixer(n_agents=2, state_dim=4, embed=32)
    >>> q_tot = mixer(q_chosen, state)         # [B, n] and [B, S] -> [B]  # doctest: +SKIP
    >>> mixing_gradient(mixer, q_chosen, state).min() >= 0  # doctest: +SKIP
"""

from __future__ import annotations

import torch
from torch import nn


class VDN(nn.Module):
    """``Q_tot = sum_a Q_a`` (no parameters; the state is ignored)."""

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return q.sum(dim=-1)


class QMixer(nn.Module):
    """QMIX's monotonic hypernetwork mixer; see the module doc.

    Args:
        n_agents: number of agents mixed.
        state_dim: width of the state the hypernetworks read.
        embed: width of the mixing layer (the paper's 32).
        hyper_hidden: hidden width of the hypernetworks of W1 and w2 (0: one linear layer, as in the paper's SMAC runs).
    """

    def __init__(self, n_agents: int, state_dim: int, *, embed: int = 32, hyper_hidden: int = 64) -> None:
        super().__init__()
        if n_agents < 1 or state_dim < 1 or embed < 1:
            raise ValueError(f"QMixer needs n_agents, state_dim and embed >= 1, got {n_agents}, {state_dim}, {embed}")
        self.n_agents, self.state_dim, self.embed = int(n_agents), int(state_dim), int(embed)

        def hyper(out: int) -> nn.Module:
            if hyper_hidden <= 0:
                return nn.Linear(state_dim, out)
            return nn.Sequential(nn.Linear(state_dim, hyper_hidden), nn.ReLU(), nn.Linear(hyper_hidden, out))

        self.hyper_w1 = hyper(self.n_agents * self.embed)
        self.hyper_b1 = nn.Linear(state_dim, self.embed)
        self.hyper_w2 = hyper(self.embed)
        self.hyper_v = nn.Sequential(nn.Linear(state_dim, self.embed), nn.ReLU(), nn.Linear(self.embed, 1))

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``Q_tot [B]`` from the chosen Q-values ``q [B, n]`` and the states ``state [B, S]``."""
        if q.ndim != 2 or q.shape[1] != self.n_agents:
            raise ValueError(f"q must have shape [batch, {self.n_agents}], got {tuple(q.shape)}")
        if state.ndim != 2 or state.shape != (q.shape[0], self.state_dim):
            raise ValueError(f"state must have shape [{q.shape[0]}, {self.state_dim}], got {tuple(state.shape)}")
        B = q.shape[0]
        w1 = self.hyper_w1(state).abs().view(B, self.n_agents, self.embed)
        b1 = self.hyper_b1(state).view(B, 1, self.embed)
        hidden = nn.functional.elu(torch.bmm(q.view(B, 1, self.n_agents), w1) + b1)  # [B, 1, e]
        w2 = self.hyper_w2(state).abs().view(B, self.embed, 1)
        return (torch.bmm(hidden, w2).view(B) + self.hyper_v(state).view(B))


def mixing_gradient(mixer: nn.Module, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """``dQ_tot / dQ_a`` at each row, ``[B, n]`` (non-negative for a monotonic mixer)."""
    q = q.detach().clone().requires_grad_(True)
    total = mixer(q, state.detach()).sum()  # rows are independent, so one backward gives every row's gradient
    (grad,) = torch.autograd.grad(total, q)
    return grad


def make_mixer(kind: str, n_agents: int, state_dim: int, *, embed: int = 32) -> nn.Module | None:
    """``"qmix"`` -> `QMixer`, ``"vdn"`` -> `VDN`, ``"none"`` -> None (independent Q-learners)."""
    if kind == "qmix":
        return QMixer(n_agents, state_dim, embed=embed)
    if kind == "vdn":
        return VDN()
    if kind == "none":
        return None
    raise ValueError(f"unknown mixer {kind!r}; accepted are 'qmix', 'vdn' and 'none' (independent Q-learning)")
