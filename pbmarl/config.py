"""Options of every run, checked one way: frozen config dataclasses with declared rules.

A run is configured by ``Type(game, [parts], *, seed=0, config=None, **options)``. The
options are the fields of the run's config dataclass (a subclass of `Config`); `build_config`
turns ``config`` and ``options`` into one frozen config, refusing an unknown option with a
did-you-mean and the list of accepted ones, and a bad value with the field's name, the
value and what is accepted. `check_seed` does the same for every seed.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class DemoConfig(Config):
    ...     lr: float = 1e-3
    ...     checks = {"lr": POSITIVE}
    >>> build_config(DemoConfig, None, {"lr": 0.1}, owner="Demo").to_dict()
    {'lr': 0.1}
    >>> build_config(DemoConfig, None, {"lrr": 0.1}, owner="Demo")
    Traceback (most recent call last):
    ...
    TypeError: unknown option 'lrr' for Demo; did you mean 'lr'? Accepted options: lr
    >>> build_config(DemoConfig, None, {"lr": -1}, owner="Demo")
    Traceback (most recent call last):
    ...
    ValueError: lr must be a positive number, got -1
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

__all__ = ["DEVICE_TYPES", "FLAG", "NON_NEGATIVE", "NON_NEGATIVE_INT", "POSITIVE", "POSITIVE_INT", "UNIT", "Config",
           "Rule", "build_config", "check_device", "check_int", "check_real", "check_seed", "check_widths",
           "did_you_mean", "is_int", "is_real"]


def is_int(value: Any) -> bool:
    """An int (numpy's too), never a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    """A finite real number, never a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)) \
        and math.isfinite(float(value))


#: (test, what is accepted): the rules config fields declare in their class's `checks`
Rule = tuple[Callable[[Any], bool], str]
POSITIVE_INT: Rule = (lambda v: is_int(v) and v >= 1, "a positive int")
NON_NEGATIVE_INT: Rule = (lambda v: is_int(v) and v >= 0, "a non-negative int")
POSITIVE: Rule = (lambda v: is_real(v) and v > 0, "a positive number")
NON_NEGATIVE: Rule = (lambda v: is_real(v) and v >= 0, "a non-negative number")
UNIT: Rule = (lambda v: is_real(v) and 0 <= v <= 1, "a number in [0, 1]")
FLAG: Rule = (lambda v: isinstance(v, (bool, np.bool_)), "True or False")


def did_you_mean(name: Any, accepted: Any) -> str:
    """``"; did you mean 'x'?"`` for the closest of `accepted`, or ``""``."""
    close = difflib.get_close_matches(str(name), [str(a) for a in accepted], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class Config:
    """Base of every run's config: rules checked on construction, and a JSON-ready `to_dict`.

    A subclass lists its fields' rules in ``checks`` (field name -> `Rule`); every rule
    along the class's bases is checked, so a bad value fails at once with its name.
    """

    checks: ClassVar[dict[str, Rule]] = {}

    def __post_init__(self) -> None:
        for cls in reversed(type(self).__mro__):
            for name, (ok, accepted) in vars(cls).get("checks", {}).items():
                value = getattr(self, name)
                if not ok(value):
                    raise ValueError(f"{name} must be {accepted}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (tuples become lists)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


C = TypeVar("C")


def build_config(cls: type[C], config: Any, options: Mapping[str, Any], *, owner: str) -> C:
    """`config` (default ``cls()``) with keyword `options` replacing its fields.

    An unknown option raises TypeError with a did-you-mean and the accepted options; a
    `config` of another class raises TypeError naming both; bad values raise ValueError
    from the config's own rules.
    """
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"config for {owner} must be a {cls.__name__}, got {type(config).__name__}: {config!r}")
    valid = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = [name for name in options if name not in valid]
    if unknown:
        name = unknown[0]
        raise TypeError(f"unknown option {name!r} for {owner}{did_you_mean(name, valid)} "
                        f"Accepted options: {', '.join(valid)}")
    if config is None:
        return cls(**options)
    return dataclasses.replace(config, **options) if options else config  # type: ignore[type-var]


def check_seed(seed: Any, *, name: str = "seed") -> int:
    """`seed` as an int in [0, 2**63); anything else raises ValueError naming `name` and the value.

    >>> check_seed(3)
    3
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an int in [0, 2**63), got -1
    """
    if not is_int(seed) or not 0 <= seed < 2**63:
        raise ValueError(f"{name} must be an int in [0, 2**63), got {seed!r}")
    return int(seed)


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """`value` as an int in ``[low, high]`` (either end open when None); anything else -- a bool, a float
    (even 3.0), a string, an int out of range -- raises ValueError naming `name`, the value and the range.

    >>> check_int("max_cycles", 0, low=1)
    Traceback (most recent call last):
    ...
    ValueError: max_cycles must be a positive int, got 0
    """
    if not is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            accepted = f"an int in [{low:,}, {high:,}]"
        elif low in (0, 1):
            accepted = "a positive int" if low == 1 else "a non-negative int"
        else:
            accepted = "an int" + (f" >= {low:,}" if low is not None else "") + (f" <= {high:,}" if high is not None else "")
        raise ValueError(f"{name} must be {accepted}, got {value!r}")
    return int(value)


def check_real(name: str, value: Any, *, low: float | None = None, above: float | None = None,
               high: float | None = None) -> float:
    """`value` as a finite float with ``value >= low``, ``value > above`` and ``value <= high`` (each bound
    skipped when None); a bool, a string, None, NaN or an infinity raises ValueError naming `name`.

    >>> check_real("theta", 0, above=0)
    Traceback (most recent call last):
    ...
    ValueError: theta must be a finite number > 0, got 0
    """
    ok = is_real(value) and (low is None or value >= low) and (above is None or value > above) \
        and (high is None or value <= high)
    if not ok:
        bounds = [f"{sign} {bound:g}" for sign, bound in ((">=", low), (">", above), ("<=", high)) if bound is not None]
        raise ValueError(f"{name} must be a finite number{' ' + ' and '.join(bounds) if bounds else ''}, got {value!r}")
    return float(value)


#: the widest hidden layer and the most layers `check_widths` accepts (a 16,384-square layer is 1 GiB of float32)
MAX_WIDTH, MAX_LAYERS = 16_384, 64


def check_widths(name: str, value: Any) -> tuple[int, ...]:
    """Hidden-layer widths as a tuple of ints in ``[1, MAX_WIDTH]`` (at most `MAX_LAYERS`; ``()`` is no hidden
    layer). A string (``"64"`` would iterate as 6 and 4), floats (2.5 would truncate), zero or negative widths
    and sizes past the bounds raise ValueError naming `name`.

    >>> check_widths("hidden", [64, 64])
    (64, 64)
    >>> check_widths("hidden", "64")
    Traceback (most recent call last):
    ...
    ValueError: hidden must be layer widths, a tuple of at most 64 ints in [1, 16,384] such as (64, 64), got '64'
    """
    ok = isinstance(value, (tuple, list, np.ndarray)) and len(value) <= MAX_LAYERS \
        and all(is_int(w) and 1 <= w <= MAX_WIDTH for w in value)
    if not ok:
        raise ValueError(f"{name} must be layer widths, a tuple of at most {MAX_LAYERS} ints in [1, {MAX_WIDTH:,}] "
                         f"such as (64, 64), got {value!r}")
    return tuple(int(w) for w in value)


#: the device types `check_device` accepts ("cuda" may carry an index: "cuda:1")
DEVICE_TYPES = ("cpu", "cuda", "mps")
_DEVICE = re.compile(r"(cpu|mps|cuda)(?::(\d+))?")


def check_device(value: Any, *, name: str = "device") -> str:
    """The torch device `value` (a str or a ``torch.device``: "cpu", "cuda", "cuda:N", "mps") as a string, if
    this machine has it ("cpu:0", what ``torch.device("cpu", 0)`` prints, is "cpu"). Another type, an unknown
    device type or another index on "cpu" / "mps" raises ValueError
    naming `name`, the value and what is accepted; a device this machine lacks raises ValueError saying what
    torch reports and that "cpu" is the default. torch is imported only to ask about "cuda" and "mps".

    >>> check_device("cpu")
    'cpu'
    >>> check_device("tpu")
    Traceback (most recent call last):
    ...
    ValueError: device must be 'cpu', 'cuda', 'cuda:N' or 'mps' (a str or a torch.device), got 'tpu'
    """
    loaded = sys.modules.get("torch")  # a torch.device exists only once torch is imported
    text = str(value) if loaded is not None and isinstance(value, loaded.device) else value
    match = _DEVICE.fullmatch(text) if isinstance(text, str) else None
    if match is None or (match.group(2) is not None and match.group(1) != "cuda" and text != "cpu:0"):
        raise ValueError(f"{name} must be 'cpu', 'cuda', 'cuda:N' or 'mps' (a str or a torch.device), got {value!r}")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        return "cpu"
    import torch

    load = f"a run saved with {name}={text!r} loads here with load(path, {name}='cpu')"
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"{name}={value!r} is not available on this machine: torch.backends.mps.is_available() "
                             f"is False; 'cpu' is the default ({load})")
        return "mps"
    if not torch.cuda.is_available():
        raise ValueError(f"{name}={value!r} is not available on this machine: torch.cuda.is_available() is False "
                         f"(torch {torch.__version__}); 'cpu' is the default ({load})")
    count = torch.cuda.device_count()
    if index is not None and int(index) >= count:
        raise ValueError(f"{name}={value!r} is not available on this machine: torch.cuda.is_available() is True "
                         f"with {count} device(s), cuda:0 to cuda:{count - 1}; 'cpu' is the default")
    return "cuda" if index is None else f"cuda:{int(index)}"
