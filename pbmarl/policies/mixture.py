"""A weighted mixture of policies that commits to ONE member per episode."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pbmarl.games.state import as_rng
from pbmarl.policies.base import Policy


def check_distribution(weights: Sequence[float] | np.ndarray, size: int, *, what: str = "weights", atol: float = 1e-6) -> np.ndarray:
    """Return `weights` as a float array on the simplex, or raise naming the bad values."""
    w = np.asarray(weights, dtype=float)
    if w.shape != (size,):
        raise ValueError(f"{what} must have {size} entries, got shape {w.shape}: {np.asarray(weights).tolist()}")
    if not np.all(np.isfinite(w)) or np.any(w < -atol) or not np.isclose(w.sum(), 1.0, atol=atol):
        raise ValueError(f"{what} must lie on the simplex (non-negative, summing to 1), got {w.tolist()} (sum {w.sum():.6g})")
    w = np.clip(w, 0.0, None)
    return w / w.sum()


class Mixture:
    """Policies with weights; `sample(rng)` draws one member for a whole episode.

    A mixture is deliberately not a `Policy`: mixing per step would be a different
    (behavioural) strategy. Evaluators treat it as the mixed strategy it is.
    """

    def __init__(self, policies: Sequence[Policy], weights: Sequence[float] | np.ndarray | None = None) -> None:
        if len(policies) == 0:
            raise ValueError("a mixture needs at least one policy")
        for p in policies:
            if not isinstance(p, Policy):
                raise TypeError(f"mixture members must be Policy objects, got {type(p).__name__}")
        if weights is None:
            weights = np.full(len(policies), 1.0 / len(policies))
        self.policies = list(policies)
        self.weights = check_distribution(weights, len(policies))
        self.game_name = self.policies[0].game_name

    def sample_index(self, rng: int | np.random.Generator | None = None, size: int | None = None) -> np.ndarray | int:
        """Index (or `size` indices) of members drawn by weight."""
        draws = as_rng(rng).choice(len(self.policies), size=size, p=self.weights)
        return draws if size is not None else int(draws)

    def sample(self, rng: int | np.random.Generator | None = None) -> Policy:
        """One member, drawn by weight: use it for the whole episode."""
        return self.policies[int(self.sample_index(rng))]

    def support(self, tol: float = 0.0) -> list[tuple[Policy, float]]:
        return [(p, float(w)) for p, w in zip(self.policies, self.weights) if w > tol]

    def __len__(self) -> int:
        return len(self.policies)

    def __repr__(self) -> str:
        return f"Mixture({len(self.policies)} policies, weights={np.round(self.weights, 3).tolist()})"
