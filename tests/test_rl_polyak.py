"""pbmarl.rl.polyak: soft updates are Polyak averages; a Polyak keeps its tensor lists."""

from __future__ import annotations

import pytest
import torch

from pbmarl.rl.polyak import Polyak, soft_update


def test_soft_update_is_polyak_and_tau_one_copies() -> None:
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    wa, wb = a.weight.detach().clone(), b.weight.detach().clone()
    soft_update(a, b, 0.25)
    assert torch.allclose(a.weight, 0.75 * wa + 0.25 * wb)
    soft_update(a, b, 1.0)
    assert torch.equal(a.weight, b.weight)
    with pytest.raises(ValueError, match="tau"):
        soft_update(a, b, 0.0)


def test_polyak_keeps_its_lists_across_loads_and_refuses_mismatched_pairs() -> None:
    """A `Polyak` built once averages the weights a later ``load_state_dict`` put in place (the same tensors),
    BatchNorm-style buffers are copied, and a pair of different architectures is refused by its shapes."""
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    b = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    polyak = Polyak(a, b)
    fresh = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    fresh[1].running_mean.fill_(7.0)
    b.load_state_dict(fresh.state_dict())
    wa = a[0].weight.detach().clone()
    polyak(0.5)
    assert torch.allclose(a[0].weight, 0.5 * wa + 0.5 * fresh[0].weight)
    assert torch.equal(a[1].running_mean, torch.full((3,), 7.0))
    with pytest.raises(ValueError, match="tau"):
        polyak(1.5)
    with pytest.raises(ValueError, match=r"same architecture.*\(3, 2\).*\(4, 2\)"):
        Polyak(torch.nn.Linear(2, 3), torch.nn.Linear(2, 4))
