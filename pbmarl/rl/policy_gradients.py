"""Policy-gradient losses (rlax style: ``rlax/_src/policy_gradients.py``).

Example:
    >>> import torch
    >>> clipped_surrogate_loss(torch.tensor([1.0, -1.0]), torch.tensor([1.5, 0.5]), 0.2)
    tensor(-0.2000)
"""

from __future__ import annotations

import torch

__all__ = ["clipped_surrogate_loss"]


def clipped_surrogate_loss(advantage: torch.Tensor, ratio: torch.Tensor, clip: float) -> torch.Tensor:
    """PPO's clipped surrogate, as a loss to minimise (Schulman et al. 2017, eq. 7):

    ``L = mean_t max(-A_t r_t, -A_t clip(r_t, 1 - eps, 1 + eps))`` with ``r_t = pi(a_t|s_t) / pi_old(a_t|s_t)``,
    the negative of the paper's ``L^CLIP`` (its pessimistic bound on the improvement).

    Args:
        advantage: ``[B]`` advantage estimates ``A_t`` (held fixed: no gradient flows through them).
        ratio: ``[B]`` probability ratios ``r_t`` (the gradient flows through these).
        clip: ``eps > 0``, the clipping range.

    Returns:
        A scalar tensor.
    """
    if advantage.shape != ratio.shape:
        raise ValueError(f"advantage and ratio must have the same shape, got {tuple(advantage.shape)} and "
                         f"{tuple(ratio.shape)}")
    if not clip > 0:
        raise ValueError(f"clip must be positive, got {clip!r}")
    return torch.max(-advantage * ratio, -advantage * ratio.clamp(1 - clip, 1 + clip)).mean()
