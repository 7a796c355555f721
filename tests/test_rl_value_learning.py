"""pbmarl.rl.value_learning: the C51 projection, the double-Q bootstrap and the hysteretic loss."""

from __future__ import annotations

import pytest
import torch

from pbmarl.rl.value_learning import c51_projection, hysteretic_td_loss, masked_max_q


def test_c51_projection_conserves_mass_and_matches_hand_values() -> None:
    support = torch.linspace(-2.0, 2.0, 5)  # atoms -2 -1 0 1 2, dz = 1
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(64, 5, generator=gen), -1)
    reward = torch.randn(64, generator=gen) * 3  # many fall outside the support and are clipped
    discount = torch.rand(64, generator=gen) * (torch.rand(64, generator=gen) > 0.3)
    out = c51_projection(support, probs, reward, discount)
    assert torch.allclose(out.sum(-1), torch.ones(64), atol=1e-6)
    assert (out >= 0).all()
    # terminal transition: all mass on the reward, split between neighbours
    one = c51_projection(support, torch.full((1, 5), 0.2), torch.tensor([0.25]), torch.tensor([0.0]))
    assert torch.allclose(one, torch.tensor([[0.0, 0.0, 0.75, 0.25, 0.0]]))
    # exact atom (l == u) keeps all its mass; shift by +1 with discount 1
    shifted = c51_projection(support, torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0]]), torch.tensor([1.0]),
                             torch.tensor([1.0]))
    assert torch.allclose(shifted, torch.tensor([[0.0, 0.1, 0.2, 0.3, 0.4]]))
    # the mean of the projection equals r + d * mean when nothing is clipped
    p = torch.tensor([[0.0, 0.3, 0.4, 0.3, 0.0]])
    proj = c51_projection(support, p, torch.tensor([0.3]), torch.tensor([0.5]))
    assert float((proj * support).sum()) == pytest.approx(0.3 + 0.5 * float((p * support).sum()))


def test_c51_projection_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="probs"):
        c51_projection(torch.zeros(5), torch.zeros(3, 4), torch.zeros(3), torch.zeros(3))


def test_hysteretic_loss_applies_the_smaller_rate_to_negative_td_errors() -> None:
    td = torch.tensor([2.0, -2.0, 1.0, -1.0], requires_grad=True)
    loss = hysteretic_td_loss(td, increase_rate=1.0, decrease_rate=0.1)
    assert float(loss.detach()) == pytest.approx((4 + 0.4 + 1 + 0.1) / 4)
    loss.backward()
    assert td.grad is not None
    # d/d td of rate * td^2 / 4: negative errors pull ten times less
    assert torch.allclose(td.grad, torch.tensor([1.0, -0.1, 0.5, -0.05]))


def test_bootstrap_ignores_illegal_and_terminal_next_actions():
    q = torch.tensor([[5.0, 1.0, 2.0], [5.0, 1.0, 2.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[False, True, True], [True, True, True], [False, False, False]])
    assert masked_max_q(q, q, mask).tolist() == [2.0, 5.0, 0.0]
    q_eval = torch.tensor([[9.0, 7.0, 3.0]] * 3)  # double DQN: selected by q, valued by q_eval
    assert masked_max_q(q, q_eval, mask).tolist() == [3.0, 9.0, 0.0]
