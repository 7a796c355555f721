"""Exploration noise for continuous actions (Machin's set), pure numpy.

Noise is drawn in *normalised* action units: a policy maps its actions to
``[-1, 1]`` per dimension, adds the noise, clips to ``[-1, 1]`` and only then
rescales to the Box bounds. So ``sigma=0.1`` means a tenth of half the action
range on every environment.

Every noise has ``sample(rng, shape, indices=None) -> ndarray`` (``shape = (B, d)``)
and ``reset(which=None)``. Stateful noises (`OrnsteinUhlenbeck`) keep one state per
environment instance: ``indices`` [B] says which instance each row belongs to
(rows ``0..B-1`` when omitted) and ``reset(which)`` restarts the instances given
as indices or as a boolean mask (all when omitted), at the start of their episodes.

`AdaptiveParameterNoise` perturbs the policy's weights instead of its actions
(Plappert et al. 2018, "Parameter Space Noise for Exploration"); a
`DeterministicPolicy` holding it keeps a perturbed copy of its network.

All of them save as ``(arrays, meta)`` and load with `noise_from_state`, without pickle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from pbmarl.config import check_int, check_real

#: the most environment instances a stateful noise keeps a state for (`instance_indices` refuses more)
MAX_INSTANCES = 1 << 20

#: kind name -> Noise subclass, for `noise_from_state`
NOISE_KINDS: dict[str, type[Noise]] = {}


def _non_negative(name: str, value: float) -> float:
    return check_real(name, value, low=0)


def instance_indices(indices: Sequence[int] | np.ndarray | None, rows: int, *, name: str = "indices") -> np.ndarray:
    """`indices` [rows] as distinct int64 instance numbers in ``[0, MAX_INSTANCES)`` (``0..rows-1`` when None).

    A bool or float entry, a repeat, a negative number or one past `MAX_INSTANCES` (a state is kept for every
    instance up to the largest, so ``[10**9]`` would allocate gigabytes) raises ValueError naming `name`.
    """
    rows = check_int("rows (the batch size)", rows, low=0)
    if indices is None:
        return np.arange(rows)
    idx = np.asarray(indices).reshape(-1)
    if idx.size and (idx.dtype.kind not in "iu" or idx.min() < 0 or idx.max() >= MAX_INSTANCES
                     or len(np.unique(idx)) != len(idx)):
        raise ValueError(f"{name} must be distinct ints in [0, {MAX_INSTANCES:,}) (one environment instance per row), "
                         f"got {np.asarray(indices).tolist()!r}")
    if len(idx) != rows:
        raise ValueError(f"{name} names {len(idx)} instances for {rows} rows; give one per row")
    return idx.astype(np.int64)


class Noise:
    """Base of the action noises; see the module doc. Stateless unless a subclass says so."""

    kind: ClassVar[str] = "noise"
    #: the constructor's arguments, saved in `meta()`
    params: dict[str, float]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        NOISE_KINDS[cls.kind] = cls

    def sample(self, rng: np.random.Generator, shape: tuple[int, int], indices: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Noise of `shape` ``(B, d)`` as float32, for rows of instances `indices`."""
        raise NotImplementedError

    def reset(self, which: Sequence[int] | np.ndarray | None = None) -> None:
        """Restart the state of the instances `which` (indices or a bool mask; all if None)."""

    def arrays(self) -> dict[str, np.ndarray]:
        return {}

    def meta(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore the state saved by `arrays()`."""

    def __repr__(self) -> str:
        inside = ", ".join(f"{k}={v:g}" for k, v in self.params.items())
        return f"{type(self).__name__}({inside})"


class Normal(Noise):
    """Independent ``N(0, sigma^2)`` on every dimension and step."""

    kind = "normal"

    def __init__(self, sigma: float = 0.1) -> None:
        self.sigma = _non_negative("sigma", sigma)
        self.params = {"sigma": self.sigma}

    def sample(self, rng: np.random.Generator, shape: tuple[int, int], indices: Any = None) -> np.ndarray:
        return (self.sigma * rng.standard_normal(shape)).astype(np.float32)


class ClippedNormal(Noise):
    """``clip(N(0, sigma^2), -clip, clip)``: TD3's target-policy smoothing noise."""

    kind = "clipped_normal"

    def __init__(self, sigma: float = 0.2, clip: float = 0.5) -> None:
        self.sigma = _non_negative("sigma", sigma)
        self.clip = _non_negative("clip", clip)
        self.params = {"sigma": self.sigma, "clip": self.clip}

    def sample(self, rng: np.random.Generator, shape: tuple[int, int], indices: Any = None) -> np.ndarray:
        return np.clip(self.sigma * rng.standard_normal(shape), -self.clip, self.clip).astype(np.float32)


class Uniform(Noise):
    """``U(low, high)`` on every dimension and step."""

    kind = "uniform"

    def __init__(self, low: float = -0.1, high: float = 0.1) -> None:
        self.low, self.high = check_real("low", low), check_real("high", high)
        if self.low > self.high:
            raise ValueError(f"Uniform needs low <= high, got low={low!r}, high={high!r}")
        self.params = {"low": self.low, "high": self.high}

    def sample(self, rng: np.random.Generator, shape: tuple[int, int], indices: Any = None) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=shape).astype(np.float32)


class OrnsteinUhlenbeck(Noise):
    """Temporally correlated noise, one state per environment instance.

    Euler-Maruyama steps of ``dx = theta (mu - x) dt + sigma dW`` (as in DDPG's
    reference code, Machin and Stable-Baselines3)::

        x <- x + theta * (mu - x) * dt + sigma * sqrt(dt) * N(0, 1)

    This AR(1) recursion has the exact stationary variance
    ``sigma^2 dt / (1 - (1 - theta dt)^2) = sigma^2 / (theta (2 - theta dt))``,
    which tends to the continuous process's ``sigma^2 / (2 theta)`` as ``dt -> 0``
    (relative difference ``theta dt / 2``). States start at ``mu`` and return there
    on `reset`. It needs ``theta > 0`` and ``0 < theta dt < 2``: at ``theta = 0`` the
    process is a random walk, with no stationary variance.

    Example:
        >>> ou = OrnsteinUhlenbeck(sigma=0.2, theta=0.15)
        >>> eps = ou.sample(rng, (4, 1), indices=[0, 1, 2, 3])
        >>> ou.reset([2])                       # instance 2 starts a new episode
    """

    kind = "ornstein_uhlenbeck"

    def __init__(self, sigma: float = 0.2, theta: float = 0.15, *, mu: float = 0.0, dt: float = 1e-2) -> None:
        self.sigma = _non_negative("sigma", sigma)
        # theta = 0 is a random walk: no stationary variance, and the noise drifts without bound
        self.theta = check_real("theta", theta, above=0)
        self.dt = check_real("dt", dt, above=0)
        self.mu = check_real("mu", mu)
        if self.theta * self.dt >= 2:
            raise ValueError(f"OrnsteinUhlenbeck needs 0 < theta*dt < 2 to be stable, got theta={theta!r}, dt={dt!r}")
        self.params = {"sigma": self.sigma, "theta": self.theta, "mu": self.mu, "dt": self.dt}
        self.state: np.ndarray = np.zeros((0, 0), dtype=np.float64)

    @property
    def stationary_variance(self) -> float:
        """The exact stationary variance of the discretised process (see the class doc)."""
        return self.sigma**2 / (self.theta * (2.0 - self.theta * self.dt))

    def _grow(self, size: int, dim: int) -> None:
        if self.state.shape[1] not in (0, dim):
            raise ValueError(f"this OrnsteinUhlenbeck noise holds {self.state.shape[1]}-dim states, asked for {dim}")
        if size > self.state.shape[0] or self.state.shape[1] == 0:
            grown = np.full((max(size, self.state.shape[0]), dim), self.mu)
            if self.state.shape[1] == dim:
                grown[: self.state.shape[0]] = self.state
            self.state = grown

    def sample(self, rng: np.random.Generator, shape: tuple[int, int], indices: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        if not (isinstance(shape, (tuple, list)) and len(shape) == 2):
            raise ValueError(f"shape must be (rows, action dims), got {shape!r}")
        B, d = check_int("shape[0] (rows)", shape[0], low=0), check_int("shape[1] (action dims)", shape[1], low=1)
        idx = instance_indices(indices, B)
        self._grow(int(idx.max()) + 1 if len(idx) else 0, d)
        x = self.state[idx]
        x = x + self.theta * (self.mu - x) * self.dt + self.sigma * np.sqrt(self.dt) * rng.standard_normal((B, d))
        self.state[idx] = x
        return x.astype(np.float32)

    def reset(self, which: Sequence[int] | np.ndarray | None = None) -> None:
        if which is None:
            self.state[:] = self.mu
            return
        w = np.asarray(which)
        idx = np.flatnonzero(w) if w.dtype == bool else w.astype(np.int64).reshape(-1)
        idx = idx[idx < self.state.shape[0]]  # instances never sampled are already at mu
        self.state[idx] = self.mu

    def arrays(self) -> dict[str, np.ndarray]:
        return {"state": self.state.copy()}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        if "state" in arrays:
            self.state = np.array(arrays["state"], dtype=np.float64).reshape(np.shape(arrays["state"]))


class AdaptiveParameterNoise(Noise):
    """Gaussian noise on the policy's weights, its scale adapted to a target action distance.

    Plappert et al. 2018: perturb every weight with ``N(0, stddev^2)``; measure the
    distance ``d = sqrt(mean((mu(s) - mu_perturbed(s))^2))`` between the actions of
    the clean and the perturbed policy on recent observations; then
    ``stddev <- stddev / alpha`` if ``d > desired_action_stddev`` else
    ``stddev * alpha`` (``alpha`` = `adoption_coefficient`). Action noise is zero:
    `sample` returns zeros, the perturbation lives in the policy (`perturb`).
    """

    kind = "adaptive_parameter"

    def __init__(self, initial_stddev: float = 0.1, desired_action_stddev: float = 0.2, adoption_coefficient: float = 1.01) -> None:
        self.stddev = _non_negative("initial_stddev", initial_stddev)
        self.desired_action_stddev = _non_negative("desired_action_stddev", desired_action_stddev)
        self.adoption_coefficient = check_real("adoption_coefficient", adoption_coefficient, above=1)
        self.params = {"initial_stddev": self.stddev, "desired_action_stddev": self.desired_action_stddev,
                       "adoption_coefficient": self.adoption_coefficient}

    def sample(self, rng: np.random.Generator, shape: tuple[int, int], indices: Any = None) -> np.ndarray:
        return np.zeros(shape, dtype=np.float32)

    def perturb(self, weights: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`weights` plus ``N(0, stddev^2)`` on every entry (a new dict; the input is not touched)."""
        return {k: (v + self.stddev * rng.standard_normal(v.shape)).astype(v.dtype) for k, v in weights.items()}

    def adapt(self, distance: float) -> float:
        """Update `stddev` from the measured action distance; returns the new stddev."""
        if not np.isfinite(distance) or distance < 0:
            raise ValueError(f"distance must be a finite number >= 0, got {distance!r}")
        if distance > self.desired_action_stddev:
            self.stddev /= self.adoption_coefficient
        else:
            self.stddev *= self.adoption_coefficient
        return self.stddev

    def arrays(self) -> dict[str, np.ndarray]:
        return {"stddev": np.asarray(self.stddev)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        if "stddev" in arrays:
            self.stddev = float(arrays["stddev"])


def action_distance(clean: np.ndarray, perturbed: np.ndarray) -> float:
    """``sqrt(mean((clean - perturbed)^2))``: Plappert et al.'s distance for DDPG."""
    a, b = np.asarray(clean, dtype=float), np.asarray(perturbed, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"action batches differ in shape: {a.shape} and {b.shape}")
    return float(np.sqrt(np.mean((a - b) ** 2))) if a.size else 0.0


def noise_from_state(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Noise:
    """Rebuild a noise from `arrays()` and `meta()`."""
    params = dict(meta)
    kind = params.pop("kind", None)
    cls = NOISE_KINDS.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown noise kind {kind!r}; known kinds: {sorted(NOISE_KINDS)}")
    noise = cls(**params)
    noise.load_arrays(arrays)
    return noise


__all__ = [
    "AdaptiveParameterNoise", "ClippedNormal", "Noise", "Normal", "OrnsteinUhlenbeck", "Uniform",
    "action_distance", "instance_indices", "noise_from_state",
]
