"""`StatefulPolicy`: a discrete policy that carries a state per environment instance through an episode.

The rollout layer's parallel engine drives it (without importing torch): ``reset_state(None)``
at the start of each call, ``reset_state(ids)`` when instances `ids` start an episode, and
``step_probabilities(obs, mask, ids)`` once per step instead of ``action_probabilities``.
`pbmarl.policies.recurrent.RecurrentQPolicy` (a GRU agent network) is one.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from pbmarl.policies.base import Policy


class StatefulPolicy(Policy):
    """See the module doc."""

    @abc.abstractmethod
    def reset_state(self, ids: Sequence[int] | np.ndarray | None) -> None:
        """Forget the states of instances `ids` (None: of every instance)."""

    @abc.abstractmethod
    def step_probabilities(self, obs: np.ndarray, legal_mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Probabilities ``[B, A]`` for one step of the distinct instances `ids`, advancing their states."""
