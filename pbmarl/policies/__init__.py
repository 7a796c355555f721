"""Policies: the batched protocol and its implementations.

`MLPPolicy` lives in `pbmarl.policies.neural`, `GaussianPolicy` and
`DeterministicPolicy` in `pbmarl.policies.continuous`; they are imported lazily, so
torch is only loaded when a neural policy is used. `noise` is pure numpy.
"""

from typing import Any

from pbmarl.policies import noise
from pbmarl.policies.base import (
    POLICY_KINDS,
    ActionOutput,
    Policy,
    check_policy,
    masked_normalize,
    new_policy_from_state,
    sample_actions,
)
from pbmarl.policies.mixture import Mixture, check_distribution
from pbmarl.policies.simple import FixedPolicy, RandomPolicy
from pbmarl.policies.tabular import TabularPolicy

__all__ = [
    "POLICY_KINDS", "ActionOutput", "DeterministicPolicy", "GaussianPolicy", "noise", "FixedPolicy", "MLPPolicy", "Mixture", "Policy", "RandomPolicy", "TabularPolicy",
    "check_distribution", "check_policy", "masked_normalize", "new_policy_from_state", "sample_actions",
]


def __getattr__(name: str) -> Any:
    if name == "MLPPolicy":
        from pbmarl.policies.neural import MLPPolicy

        return MLPPolicy
    if name in ("GaussianPolicy", "DeterministicPolicy"):
        from pbmarl.policies import continuous

        return getattr(continuous, name)
    raise AttributeError(f"module 'pbmarl.policies' has no attribute {name!r}")
