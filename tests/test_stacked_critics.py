"""Twin critics stacked into one module (`Critics`, `EnsembleMLP`): the same functions, gradients and
initialisation as separate networks. (Saves from before the stacking are folders of format 1, which
`pbmarl.runs.folder` refuses by name.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from test_control_learners import TINY, BoxDMDP

from pbmarl.learners.common.nets import build_mlp, seeded
from pbmarl.learners.control.critics import Critic, Critics, EnsembleMLP
from pbmarl.learners.control.ddpg import DDPG
from pbmarl.learners.control.sac import SAC
from pbmarl.learners.control.td3 import TD3


def _members(k: int, hidden: tuple[int, ...] = (16, 8)) -> list[Critic]:
    return [seeded(s, lambda: Critic(3, 2, hidden)) for s in range(k)]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "member-by-member"])
def test_stacked_critics_compute_each_member_and_its_gradients(batched: bool) -> None:
    members = _members(2)
    critics = Critics(members)
    critics.mlp.batched = batched
    obs, action = torch.randn(64, 3), torch.randn(64, 2)
    q = critics(obs, action)
    assert q.shape == (2, 64)
    for i, member in enumerate(members):
        torch.testing.assert_close(q[i], member(obs, action), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(critics.member(i, obs, action), member(obs, action), rtol=1e-5, atol=1e-6)
    # the gradient of a loss on member 1's row reaches exactly member 1's slice, as it reaches member 1
    action.requires_grad_(True)
    critics(obs, action)[1].pow(2).mean().backward()
    ref_action = action.detach().clone().requires_grad_(True)
    members[1](obs, ref_action).pow(2).mean().backward()
    torch.testing.assert_close(action.grad, ref_action.grad, rtol=1e-5, atol=1e-6)
    first = critics.mlp.layers[0]
    torch.testing.assert_close(first.weight.grad[1], members[1].net[0].weight.grad, rtol=1e-5, atol=1e-6)
    assert torch.count_nonzero(first.weight.grad[0]) == 0


def test_only_narrow_members_are_batched_by_default() -> None:
    assert Critics(_members(2, (64, 64))).mlp.batched
    assert not Critics(_members(2, (400, 300))).mlp.batched
    assert EnsembleMLP([build_mlp(3, (400, 300), 1)] * 2, batched=True).batched


def test_an_ensemble_refuses_members_of_different_architectures() -> None:
    with pytest.raises(ValueError, match="share one architecture"):
        EnsembleMLP([build_mlp(3, (16,), 1), build_mlp(3, (8,), 1)])
    with pytest.raises(ValueError, match="Linear, ReLU and Tanh"):
        EnsembleMLP([build_mlp(3, (16,), 1, layer_norm=True)])


@pytest.mark.parametrize("cls", [SAC, TD3, DDPG])
def test_stacking_holds_exactly_the_members_the_learner_seeded(cls: Any, monkeypatch: Any) -> None:
    built: list[Critic] = []

    def recording(seed: int, make: Any) -> Any:
        module = seeded(seed, make)
        if isinstance(module, Critic):
            built.append(copy.deepcopy(module))
        return module

    monkeypatch.setattr("pbmarl.learners.control.sac.seeded" if cls is SAC else "pbmarl.learners.control.ddpg.seeded", recording)
    learner = cls(BoxDMDP(), seed=5, **TINY)
    assert len(built) == len(learner.critics) == (1 if cls is DDPG else 2)
    linears = [m for m in built[0].net if isinstance(m, torch.nn.Linear)]
    stacked = [m for m in learner.critics.mlp.layers if hasattr(m, "member")]
    for i, member in enumerate(built):
        for layer, lin in zip(stacked, [m for m in member.net if isinstance(m, torch.nn.Linear)]):
            assert torch.equal(layer.weight[i], lin.weight) and torch.equal(layer.bias[i], lin.bias)
    assert len(stacked) == len(linears) == len(TINY["hidden"]) + 1
    if len(built) == 2:  # twins start apart
        assert not torch.equal(stacked[0].weight[0], stacked[0].weight[1])
