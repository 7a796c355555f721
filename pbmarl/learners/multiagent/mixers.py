"""Value-decomposition mixers: Q_tot from the agents' Q-values and the global state.

``VDN`` (Sunehag et al. 2018): ``Q_tot = sum_a Q_a``.

``CentralQ`` and `wqmix_weights`: Weighted QMIX (Rashid et al. 2020, "Weighted QMIX:
Expanding Monotonic Value Function Factorisation", NeurIPS), which weights the TD errors
of joint actions it deems suboptimal down by ``alpha`` and bootstraps from an unrestricted
critic ``Q*``.

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


class CentralQ(nn.Module):
    """Weighted QMIX's unrestricted critic ``Q*(s, u)``: an MLP of the state and the one-hot joint action.

    Rashid et al. 2020 build ``Q*`` from agent networks and a mixer without the
    non-negativity constraint; an MLP over the joint action is the same unrestricted
    function class, and small joint-action spaces (matrix games, MPE) make it cheap.
    """

    def __init__(self, n_agents: int, num_actions: int, state_dim: int, hidden: tuple[int, ...] = (256, 256)) -> None:
        super().__init__()
        self.n_agents, self.num_actions = int(n_agents), int(num_actions)
        layers: list[nn.Module] = []
        last = int(state_dim) + self.n_agents * self.num_actions
        for width in hidden:
            layers += [nn.Linear(last, int(width)), nn.ReLU()]
            last = int(width)
        layers.append(nn.Linear(last, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, actions: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``Q*(s, u) [B]`` from the joint actions ``[B, n]`` (ints) and the states ``[B, S]``."""
        onehot = nn.functional.one_hot(actions.long(), self.num_actions).float().view(len(actions), -1)
        return self.net(torch.cat([state.float(), onehot], dim=1)).view(-1)


def wqmix_weights(q_tot: torch.Tensor, target: torch.Tensor, *, kind: str, alpha: float,
                  q_star_greedy: torch.Tensor | None = None, greedy: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted QMIX's weights ``w(s, u)`` of the squared TD errors (Rashid et al. 2020, Sec. 5).

    ``"ow"`` (optimistic): ``w = 1`` where ``Q_tot(s, u) < y`` (the mixer underestimates), else `alpha`.
    ``"cw"`` (centralised): ``w = 1`` where ``y > Q*(s, u_greedy)`` or ``u`` is the greedy joint
    action (`greedy`, a bool per row), else `alpha`. With ``alpha < 1`` the monotonic ``Q_tot``
    is pulled towards the best joint actions and may misjudge the others, so its greedy joint
    action can be the true optimum where plain QMIX's cannot (the climbing game).
    """
    one = torch.ones_like(target)
    if kind == "ow":
        return torch.where(q_tot < target, one, one * alpha)
    if kind == "cw":
        if q_star_greedy is None or greedy is None:
            raise ValueError("the 'cw' weighting needs q_star_greedy and greedy")
        return torch.where((target > q_star_greedy) | greedy, one, one * alpha)
    raise ValueError(f"unknown weighting {kind!r}; accepted are 'ow' and 'cw'")


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
