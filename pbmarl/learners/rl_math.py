"""The maths of the value-based and actor-critic learners, as small pure functions (rlax style).

Each function states its equation and source, checks shapes on entry and is
tested on its own (tests/test_control_parts.py). The learners (`Rainbow`,
`DDPG`, `TD3`, `SAC`, `HDDPG`) call these instead of inlining the maths.

Example:
    >>> support = torch.linspace(-1.0, 1.0, 3)
    >>> c51_projection(support, torch.tensor([[0.0, 1.0, 0.0]]), torch.tensor([0.5]), torch.tensor([0.0]))
    tensor([[0.0000, 0.5000, 0.5000]])
    >>> nstep_targets(np.array([1.0, 1.0, 1.0]), np.array([False, False, True]), n=2, gamma=0.5)[0]
    array([1.5, 1.5, 1. ])
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["Polyak", "c51_projection", "hysteretic_td_loss", "nstep_targets", "soft_update", "linear_schedule"]


def c51_projection(support: torch.Tensor, probs: torch.Tensor, reward: torch.Tensor,
                   discount: torch.Tensor) -> torch.Tensor:
    """Project the distribution of ``reward + discount * Z`` back onto the fixed `support`.

    Categorical DQN (Bellemare, Dabney & Munos 2017, Algorithm 1): every atom
    ``z_j`` moves to ``Tz_j = clip(r + d z_j, v_min, v_max)`` and its mass ``p_j``
    is split between the two neighbouring atoms in proportion to closeness,
    ``b_j = (Tz_j - v_min) / dz``, ``l = floor(b_j)``, ``u = ceil(b_j)``:
    ``m_l += p_j (u - b_j)``, ``m_u += p_j (b_j - l)`` (all of ``p_j`` to ``l`` when
    ``l = u``). Probability mass is conserved row by row.

    Args:
        support: ``[N]`` increasing, evenly spaced atoms ``v_min .. v_max``.
        probs: ``[B, N]`` next-state distributions (rows sum to 1).
        reward: ``[B]`` (n-step) rewards.
        discount: ``[B]`` ``gamma^n * (1 - done)``: 0 where the episode ended.

    Returns:
        ``[B, N]`` the projected target distributions.
    """
    if support.ndim != 1 or probs.ndim != 2 or probs.shape[1] != support.shape[0]:
        raise ValueError(f"support must be [N] and probs [B, N], got {tuple(support.shape)} and {tuple(probs.shape)}")
    B, N = probs.shape
    if reward.shape != (B,) or discount.shape != (B,):
        raise ValueError(f"reward and discount must be [{B}], got {tuple(reward.shape)} and {tuple(discount.shape)}")
    v_min, v_max = float(support[0]), float(support[-1])
    dz = (v_max - v_min) / (N - 1)
    tz = (reward[:, None] + discount[:, None] * support[None, :]).clamp(v_min, v_max)
    b = ((tz - v_min) / dz).clamp(0, N - 1)
    lower, upper = b.floor().long(), b.ceil().long()
    same = lower == upper  # b landed exactly on an atom: all its mass goes there
    w_lower = torch.where(same, torch.ones_like(b), upper.to(b.dtype) - b)
    w_upper = torch.where(same, torch.zeros_like(b), b - lower.to(b.dtype))
    out = torch.zeros_like(probs)
    out.scatter_add_(1, lower, probs * w_lower)
    out.scatter_add_(1, upper, probs * w_upper)
    return out


def nstep_targets(reward: np.ndarray, done: np.ndarray, *, n: int, gamma: float,
                  end: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns over contiguous episodes: ``(returns, discounts, next_index)``.

    ``G_t = sum_{k<m} gamma^k r_{t+k}`` with ``m = min(n, steps until the episode
    stops)``; the bootstrap discount is ``gamma^m`` if the episode goes on after
    ``t+m-1`` and 0 if it terminated there; ``next_index = t+m-1`` names the
    transition whose next observation the target bootstraps from (Sutton & Barto
    2018, eq. 7.1; Hessel et al. 2018, Rainbow's multi-step loss).

    Args:
        reward: ``[T]`` rewards, episodes contiguous and in time order.
        done: ``[T]`` True where the episode terminated after this transition
            (no bootstrap).
        n: steps to look ahead (1: the one-step target).
        gamma: discount in [0, 1].
        end: ``[T]`` True where a window must stop without terminating (a time-limit
            truncation, or the last transition collected so far); `done` implies it.
    """
    reward = np.asarray(reward, dtype=float)
    done = np.asarray(done, dtype=bool)
    if reward.ndim != 1 or reward.shape != done.shape:
        raise ValueError(f"reward and done must be 1-D of equal length, got {reward.shape} and {done.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    stop = done.copy() if end is None else (np.asarray(end, dtype=bool) | done)
    T = len(reward)
    returns = np.zeros(T)
    discount = np.zeros(T)
    nxt = np.arange(T)
    alive = np.ones(T, bool)  # window of t still open
    scale = np.ones(T)
    for k in range(n):
        idx = np.arange(T) + k
        ok = alive & (idx < T)
        j = idx[ok]
        returns[ok] += scale[ok] * reward[j]
        nxt[ok] = j
        scale[ok] *= gamma
        closed = np.zeros(T, bool)
        closed[ok] = stop[j]
        alive = ok & ~closed
    discount = np.where(done[nxt], 0.0, scale)
    return returns, discount, nxt


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


def hysteretic_td_loss(td_error: torch.Tensor, *, increase_rate: float, decrease_rate: float,
                       weight: torch.Tensor | None = None) -> torch.Tensor:
    """Hysteretic squared TD loss ``mean(w * rate(delta) * delta^2)`` with ``delta = target - Q``.

    ``rate = increase_rate`` where ``delta >= 0`` (the estimate rises) and
    ``decrease_rate`` where ``delta < 0``. With ``decrease_rate < increase_rate``
    an agent is optimistic: it discounts the low returns its teammates' exploration
    causes (Matignon, Laurent & Le Fort-Piat 2007, hysteretic Q-learning; Omidshafiei
    et al. 2017 for the deep form; Machin's ``HDDPG`` ``q_increase_rate`` /
    ``q_decrease_rate``).
    """
    rate = torch.where(td_error >= 0, torch.full_like(td_error, increase_rate),
                       torch.full_like(td_error, decrease_rate))
    per = rate * td_error.pow(2)
    if weight is not None:
        per = weight * per
    return per.mean()


def linear_schedule(start: float, end: float, fraction: float, progress: float) -> float:
    """``start + min(progress / fraction, 1) * (end - start)``: a linear ramp over the first `fraction`."""
    frac = 1.0 if fraction <= 0 else min(max(progress, 0.0) / fraction, 1.0)
    return start + frac * (end - start)
