"""Small helpers over `gymnasium.spaces`: checking actions, flattening observations.

Every game describes its agents with `gymnasium.spaces` objects (see `Game`); these
functions are the one place that turns raw values into what pbmarl stores
(float32 observation vectors) and refuses actions that do not fit a space.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def flat_observation_space(space: Any) -> Any:
    """The float32 `Box` pbmarl observes through: a `Box` keeps its shape and bounds,
    any other space is flattened (`Discrete` becomes one-hot)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
    flat: Any = spaces.flatten_space(space)
    return spaces.Box(flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32)


def flatten_observation(space: Any, raw: Any) -> np.ndarray:
    """`raw` (an element of `space`) as the float32 array of `flat_observation_space(space)`."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return np.asarray(raw, dtype=np.float32).reshape(space.shape)
    return np.asarray(spaces.flatten(space, raw), dtype=np.float32).ravel()


def check_action(space: Any, action: Any, *, who: str = "the game") -> Any:
    """`action` converted to what `space` takes, or a ValueError naming the value and the space.

    `Discrete(n)`: an int in ``start..start+n-1``. `Box`: a float array of the
    space's shape (a scalar fits a one-element Box), finite and within
    ``[low, high]``. `MultiDiscrete`: ints within ``nvec``.

    Example:
        >>> from gymnasium.spaces import Box
        >>> check_action(Box(-2.0, 2.0, (1,)), [3.0])
        Traceback (most recent call last):
        ...
        ValueError: action [3.0] is outside Box(-2.0, 2.0, (1,), float32) of the game: accepted are low [-2.0] to high [2.0]
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            value = int(action)  # what the samplers hand over, once per env step: no array round trip
        else:
            a = np.asarray(action)
            if a.size != 1 or not np.issubdtype(a.dtype, np.integer) and not (
                np.issubdtype(a.dtype, np.floating) and float(a.reshape(-1)[0]).is_integer()
            ):
                raise ValueError(f"action {action!r} for {who} must be one int for {space}")
            value = int(a.reshape(-1)[0])
        if not int(space.start) <= value < int(space.start) + int(space.n):
            raise ValueError(
                f"action {value} is outside {space} of {who}: accepted are "
                f"{int(space.start)}..{int(space.start) + int(space.n) - 1}"
            )
        return value
    if isinstance(space, spaces.Box):
        try:
            a = np.asarray(action, dtype=space.dtype)
        except (TypeError, ValueError):
            raise ValueError(f"action {action!r} for {who} is not numeric; expected an array in {space}") from None
        if a.shape != space.shape:
            if a.size != int(np.prod(space.shape)):
                raise ValueError(f"action {action!r} for {who} has shape {a.shape}; {space} needs shape {space.shape}")
            a = a.reshape(space.shape)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action {np.asarray(action).tolist()} for {who} is not finite")
        tol = 1e-6 * (1.0 + np.abs(space.high - space.low))
        if np.any(a < space.low - tol) or np.any(a > space.high + tol):
            raise ValueError(
                f"action {np.asarray(action).tolist()} is outside {space} of {who}: accepted are "
                f"low {space.low.tolist()} to high {space.high.tolist()}"
            )
        return np.clip(a, space.low, space.high)
    if isinstance(space, spaces.MultiDiscrete):
        a = np.asarray(action)
        if a.shape != space.nvec.shape or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"action {action!r} for {who} must be ints of shape {space.nvec.shape} for {space}")
        if np.any(a < space.start) or np.any(a >= space.start + space.nvec):
            raise ValueError(f"action {a.tolist()} is outside {space} of {who}: each entry k in 0..nvec[k]-1")
        return a.astype(space.dtype)
    raise ValueError(f"{who} has action space {space}; supported are Discrete, Box and MultiDiscrete")


def action_dim(space: Any) -> int:
    """Width of one action row as policies emit it: 1 for `Discrete`, the flat size of a `Box`."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.size)
    return 1
