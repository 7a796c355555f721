"""pbmarl.rl.policy_gradients: PPO's clipped surrogate against the paper's min form."""

from __future__ import annotations

import pytest
import torch

from pbmarl.rl.policy_gradients import clipped_surrogate_loss


def test_clipped_surrogate_is_minus_the_papers_pessimistic_min() -> None:
    gen = torch.Generator().manual_seed(0)
    adv, ratio = torch.randn(64, generator=gen), torch.rand(64, generator=gen) * 2
    eps = 0.2
    paper = torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()  # Schulman et al. 2017, eq. 7
    assert torch.allclose(clipped_surrogate_loss(adv, ratio, eps), -paper)


def test_clipped_ratios_carry_no_gradient() -> None:
    ratio = torch.tensor([1.5, 0.5, 1.1], requires_grad=True)
    clipped_surrogate_loss(torch.tensor([1.0, -1.0, 1.0]), ratio, 0.2).backward()
    assert ratio.grad is not None and ratio.grad.tolist() == pytest.approx([0.0, 0.0, -1 / 3])


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="same shape"):
        clipped_surrogate_loss(torch.ones(3), torch.ones(2), 0.2)
    with pytest.raises(ValueError, match="clip must be positive"):
        clipped_surrogate_loss(torch.ones(3), torch.ones(3), 0.0)
