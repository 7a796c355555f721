"""Twin critics stacked into one module (`Critics`, `EnsembleMLP`): the same functions, gradients and
initialisation as separate networks, and learner saves from before the stacking still load."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
import torch
from test_control_learners import TINY, BoxDMDP

from pbmarl.learners.critics import Critic, Critics, EnsembleMLP
from pbmarl.learners.ddpg import DDPG
from pbmarl.learners.nets import build_mlp, seeded
from pbmarl.learners.sac import SAC
from pbmarl.learners.td3 import TD3


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

    monkeypatch.setattr("pbmarl.learners.sac.seeded" if cls is SAC else "pbmarl.learners.ddpg.seeded", recording)
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


def _unstack(module_state: dict[str, torch.Tensor], prefix: str, critic: bool) -> dict[str, torch.Tensor]:
    """A stacked critics' state dict written as format 1 kept it: one network per member."""
    out = {}
    for key, value in module_state.items():
        j, name = key[len(prefix):].split(".")
        for i in range(value.shape[0]):
            old = value[i]
            out[f"{i}.net.{j}.{name}" if critic else f"{i}.{j}.{name}"] = old.clone()
    return out


def _unstack_adam(state: dict[str, Any], k: int) -> dict[str, Any]:
    per = len(state["param_groups"][0]["params"])
    moments = {}
    for slot, entry in state["state"].items():
        for i in range(k):
            tensors = {m: entry[m][i] for m in ("exp_avg", "exp_avg_sq")}
            moments[i * per + slot] = {"step": entry["step"].clone(), **{m: t.clone() for m, t in tensors.items()}}
    return {"state": moments, "param_groups": [{**g, "params": list(range(k * per))} for g in state["param_groups"]]}


@pytest.mark.parametrize("cls,game", [(SAC, BoxDMDP), (TD3, BoxDMDP), (DDPG, BoxDMDP), (SAC, lambda: "mdp:two_round_dmdp")],
                         ids=["sac", "td3", "ddpg", "sac-discrete"])
def test_a_save_from_before_the_stacking_loads_and_resumes_the_same(tmp_path: Any, cls: Any, game: Any) -> None:
    opts = {**TINY, "steps_per_round": 60, "learning_starts": 20}
    first = cls(game(), seed=3, **opts)
    for _ in first.run(2, progress=False):
        pass
    first.save(tmp_path / "now")
    first.save(tmp_path / "old")
    # rewrite the second save in format 1: separate critics and their Adam moments member by member
    state = torch.load(tmp_path / "old" / "state.pt", weights_only=True)
    box = isinstance(first.critics, Critics)
    prefix = "mlp.layers." if box else "layers."
    for name in ("critics", "critics_target"):
        state[name] = _unstack(state[name], prefix, box)
    state["critic_opt"] = _unstack_adam(state["critic_opt"], len(first.critics))
    torch.save(state, tmp_path / "old" / "state.pt")
    meta = json.loads((tmp_path / "old" / "learner.json").read_text())
    (tmp_path / "old" / "learner.json").write_text(json.dumps({**meta, "format": 1}))

    now = cls(game(), seed=3, **opts).load(tmp_path / "now")
    old = cls(game(), seed=3, **opts).load(tmp_path / "old")
    for p, q in zip(now.critics.parameters(), old.critics.parameters()):
        assert torch.equal(p, q)
    for _ in now.run(2, progress=False):
        pass
    for _ in old.run(2, progress=False):
        pass
    np.testing.assert_array_equal(now.history["loss"], old.history["loss"])
    for p, q in zip(now.critics.parameters(), old.critics.parameters()):
        assert torch.equal(p, q)


def test_a_save_of_another_format_is_refused_by_name(tmp_path: Any) -> None:
    learner = SAC(BoxDMDP(), seed=0, **TINY)
    learner.save(tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "learner.json").read_text())
    (tmp_path / "run" / "learner.json").write_text(json.dumps({**meta, "format": 7}))
    with pytest.raises(ValueError, match="format 7"):
        SAC(BoxDMDP(), seed=0, **TINY).load(tmp_path / "run")
