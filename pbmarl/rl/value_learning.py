"""Value-learning targets and losses (rlax style: ``rlax/_src/value_learning.py``).

Pure functions over tensors, each with its equation, its source and shape checks on entry, tested on
their own (tests/test_rl_value_learning.py). `Rainbow` calls `c51_projection`, `HDDPG` calls
`hysteretic_td_loss`, `DQN` and `NFSP` call `masked_max_q`.

Example:
    >>> import torch
    >>> support = torch.linspace(-1.0, 1.0, 3)
    >>> c51_projection(support, torch.tensor([[0.0, 1.0, 0.0]]), torch.tensor([0.5]), torch.tensor([0.0]))
    tensor([[0.0000, 0.5000, 0.5000]])
"""

from __future__ import annotations

import torch

__all__ = ["c51_projection", "hysteretic_td_loss", "masked_max_q"]



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


def masked_max_q(q_select: torch.Tensor, q_eval: torch.Tensor, legal_mask: torch.Tensor) -> torch.Tensor:
    """Double-Q bootstrap over the legal actions: ``q_eval[s', argmax_{a' legal} q_select(s', a')]``, 0 on rows
    with no legal action (van Hasselt, Guez & Silver 2016, eq. 4: select with the online network, evaluate
    with the target network; ``q_select = q_eval`` gives the plain max of Mnih et al. 2015).

    Rows with no legal action are terminal transitions (`Trajectories.next_legal_mask` is all False
    there), so they never bootstrap.

    Args:
        q_select: ``[B, A]`` values that pick the action (the online network for double Q).
        q_eval: ``[B, A]`` values read at the picked action (the target network).
        legal_mask: ``[B, A]`` bool, the legal actions of the next state.

    Returns:
        ``[B]`` the bootstrap values.
    """
    if q_select.ndim != 2 or q_select.shape != q_eval.shape or q_select.shape != legal_mask.shape:
        raise ValueError(f"q_select, q_eval and legal_mask must be [B, A] alike, got {tuple(q_select.shape)}, "
                         f"{tuple(q_eval.shape)} and {tuple(legal_mask.shape)}")
    best = q_select.masked_fill(~legal_mask, torch.finfo(q_select.dtype).min).argmax(dim=-1)
    value = q_eval.gather(1, best[:, None]).squeeze(1)
    return torch.where(legal_mask.any(dim=1), value, torch.zeros_like(value))
