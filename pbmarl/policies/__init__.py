"""Policies: the batched protocol and its implementations.

`MLPPolicy` lives in `pbmarl.policies.neural` and is imported lazily, so torch is
only loaded when a neural policy is used.
"""

from typing import Any

from pbmarl.policies.base import (
    POLICY_KINDS,
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
    "POLICY_KINDS", "FixedPolicy", "MLPPolicy", "Mixture", "Policy", "RandomPolicy", "TabularPolicy",
    "check_distribution", "check_policy", "masked_normalize", "new_policy_from_state", "sample_actions",
]


def __getattr__(name: str) -> Any:
    if name == "MLPPolicy":
        from pbmarl.policies.neural import MLPPolicy

        return MLPPolicy
    raise AttributeError(f"module 'pbmarl.policies' has no attribute {name!r}")
