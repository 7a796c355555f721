"""Several critics of one architecture as one module: twin critics in one chain of batched products.

`Critic` is one ``Q(s, a)`` network; `Critics` stacks ``k`` of them (`EnsembleMLP`, one `EnsembleLinear` per
layer) so SAC's and TD3's twins, and DDPG's one, are evaluated together.
`stack_adam_state` rewrote the Adam moments of learner saves of format 1, which kept one network per
critic; the run folder now refuses such saves, and the function goes once `control_files` stops calling it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from pbmarl.policies.neural import FullPrecisionLinear, build_mlp, outside_autocast

__all__ = ["Critic", "Critics", "EnsembleLinear", "EnsembleMLP", "stack_adam_state"]


class Critic(nn.Module):
    """``Q(s, a)``: an MLP over the concatenated observation and action, one output."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = build_mlp(obs_dim + act_dim, hidden, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)


class EnsembleLinear(nn.Module):
    """``k`` Linear layers of one shape as one batched product: ``(k, B, in) -> (k, B, out)``.

    ``weight[i]`` and ``bias[i]`` are member i's ``nn.Linear`` weight (``out x in``) and bias, so one
    ``baddbmm`` does what ``k`` Linear calls did, with the same values. A
    ``full_precision`` layer (the first and the last of an MLP, as `FullPrecisionLinear`) stays
    float32 under autocast.
    """

    def __init__(self, linears: Sequence[nn.Linear], *, full_precision: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.stack([lin.weight.detach() for lin in linears]))
        self.bias = nn.Parameter(torch.stack([lin.bias.detach() for lin in linears]))
        self.full_precision = full_precision

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.full_precision:
            return outside_autocast(_batched_linear, x, self.weight, self.bias)
        return _batched_linear(x, self.weight, self.bias)

    def member(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Member `i` alone on ``(B, in)`` inputs: ``(B, out)``."""
        return self.apply_to(x, self.weight[i], self.bias[i])

    def apply_to(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias`` for one member's weight and bias (``torch.nn.functional.linear``, the kernel
        a Linear layer calls), at this layer's precision."""
        if self.full_precision:
            return outside_autocast(torch.nn.functional.linear, x, weight, bias)
        return torch.nn.functional.linear(x, weight, bias)


class EnsembleMLP(nn.Module):
    """``k`` MLPs of one architecture (`build_mlp`'s Linear-activation stacks) evaluated together.

    Built from the members themselves, so their initialisation is whatever built them (a learner seeds
    each as before); each Linear position becomes one `EnsembleLinear`. ``forward((B, in))`` gives
    ``(k, B, out)``: twin critics cost one chain of batched products instead of two chains of small ones
    (SAC on MountainCarContinuous, 64-wide with 512-row batches: 6-11% less time per env step in all).

    Wide members gain nothing from the batched product (Pendulum's 400-300 TD3 ran 6-13% slower with it), so
    by default only members whose hidden layers are at most `BATCHED_MAX_WIDTH` wide are batched; wider
    ones run member by member on the same stacked parameters (``batched`` forces either way). The
    values, the parameters and their saved layout are the same either way.
    """

    #: the widest hidden layer for which `forward` batches the members by default
    BATCHED_MAX_WIDTH: ClassVar[int] = 128

    def __init__(self, members: Sequence[nn.Sequential], *, batched: bool | None = None) -> None:
        super().__init__()
        if not members:
            raise ValueError("EnsembleMLP needs at least one member network")
        first = list(members[0])
        for net in members[1:]:
            if [(type(m), getattr(m, "weight", torch.empty(0)).shape) for m in net] != \
                    [(type(m), getattr(m, "weight", torch.empty(0)).shape) for m in first]:
                raise ValueError(f"EnsembleMLP members must share one architecture; got {members[0]} and {net}")
        layers: list[nn.Module] = []
        for j, layer in enumerate(first):
            if isinstance(layer, nn.Linear):
                layers.append(EnsembleLinear([net[j] for net in members],  # type: ignore[misc]
                                             full_precision=isinstance(layer, FullPrecisionLinear)))
            elif isinstance(layer, (nn.ReLU, nn.Tanh)):
                layers.append(copy.deepcopy(layer))
            else:
                raise ValueError(f"EnsembleMLP takes Linear, ReLU and Tanh layers, got {layer!r}")
        self.layers = nn.Sequential(*layers)
        self.k = len(members)
        widths = [m.weight.shape[2] for m in self.layers if isinstance(m, EnsembleLinear)][1:]
        self.batched = max(widths, default=0) <= self.BATCHED_MAX_WIDTH if batched is None else bool(batched)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.batched:
            return self.layers(x.expand(self.k, *x.shape))
        parts = [(layer, layer.weight.unbind(0), layer.bias.unbind(0)) if isinstance(layer, EnsembleLinear)
                 else (layer, (), ()) for layer in self.layers]
        outs = []
        for i in range(self.k):
            h = x
            for layer, weights, biases in parts:
                h = layer.apply_to(h, weights[i], biases[i]) if isinstance(layer, EnsembleLinear) else layer(h)
            outs.append(h)
        return torch.stack(outs)

    def member(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Member `i` alone: ``(B, in) -> (B, out)``, the same values as its row of `forward`."""
        for layer in self.layers:
            x = layer.member(i, x) if isinstance(layer, EnsembleLinear) else layer(x)
        return x

    def __len__(self) -> int:
        return self.k


def _batched_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``(k, B, in) -> (k, B, out)``: every member's Linear in one ``baddbmm``."""
    return torch.baddbmm(bias[:, None, :], x, weight.transpose(1, 2))


class Critics(nn.Module):
    """``k`` critics ``Q_i(s, a)`` (TD3's and SAC's twins, DDPG's one) as one `EnsembleMLP`.

    Built from `Critic` members (each seeded as before); ``critics(obs, action)`` is ``(k, B)``,
    ``critics.member(0, obs, action)`` critic 0's ``(B,)`` alone (the actor's loss in DDPG and TD3).
    """

    def __init__(self, members: Sequence[Critic]) -> None:
        super().__init__()
        self.mlp = EnsembleMLP([c.net for c in members])

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([obs, action], dim=-1)).squeeze(-1)

    def member(self, i: int, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp.member(i, torch.cat([obs, action], dim=-1)).squeeze(-1)

    def __len__(self) -> int:
        return len(self.mlp)


def stack_adam_state(state: dict[str, Any], members: int) -> dict[str, Any]:
    """An Adam ``state_dict`` over ``members`` separate MLPs of one architecture (parameters member by
    member: each Linear's weight, then its bias) rewritten for the `EnsembleMLP` of them (each stacked
    layer's weight, then bias): the moments stacked as the parameters are."""
    per = len(state["param_groups"][0]["params"]) // members
    old, new_state = state["state"], {}
    for slot in range(per):
        entries = [old.get(i * per + slot) for i in range(members)]
        if any(e is None for e in entries):
            continue
        merged = {"step": entries[0]["step"]}
        for moment in ("exp_avg", "exp_avg_sq"):
            merged[moment] = torch.stack([e[moment] for e in entries])
        new_state[slot] = merged
    groups = [{**g, "params": list(range(per))} for g in state["param_groups"]]
    return {"state": new_state, "param_groups": groups}
