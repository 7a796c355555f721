"""A game's keyword parameters, checked before anything is built.

``load_game("pettingzoo:simple_spread_v3", N=4000)`` would spend a minute and gigabytes
building the world before the environment said anything, and ``N=True``, ``max_cycles=0``,
``continuous_actions="yes"`` or ``g=nan`` were taken without a word. `check_params` reads the
environment's constructor and refuses such values first, one rule each:

- every number is finite (NaN and infinities never make a meaningful game);
- a parameter declared (or defaulting to) bool takes True or False; one declared int takes an
  int (never a bool, never 2.5); one declared float takes a finite number;
- agent counts (`COUNTS`) are ints in ``[low, MAX_AGENTS]``, episode lengths (`LENGTHS`) ints
  in ``[1, MAX_STEPS]``, and proportions (`PROPORTIONS`) numbers in ``[0, 1]``;
- ``render_mode`` is None or one of the environment's ``metadata["render_modes"]``;
- a keyword the constructor does not take is refused with a did-you-mean and the accepted ones.

Example:
    >>> check_params("pettingzoo:simple_spread_v3", {"N": 0}, {"N": (int, False)})
    Traceback (most recent call last):
    ...
    ValueError: N must be an int in [1, 256], got 0 (game 'pettingzoo:simple_spread_v3')
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pbmarl.config import check_int, check_real, did_you_mean, is_int, is_real

#: the most agents a count parameter may ask for (MPE's world is quadratic in them: N=4000 took 90 s and 2.6 GB)
MAX_AGENTS = 256
#: the longest episode a length parameter may ask for
MAX_STEPS = 10**9
#: agent-count parameters and their least value
COUNTS = {"N": 1, "num_agents": 1, "num_good": 1, "num_adversaries": 0, "num_obstacles": 0, "num_landmarks": 0}
#: episode-length parameters
LENGTHS = ("max_cycles", "max_episode_steps")
#: parameters that are proportions
PROPORTIONS = ("local_ratio",)

#: why NaN and infinities are refused, in every message that refuses one
FINITE = "game parameters must be finite numbers (a NaN or an infinity in the physics makes every state NaN)"

#: parameter name -> (declared type: bool, int, float or None for any, whether None is accepted)
Signature = Mapping[str, tuple[type | None, bool]]


def signature_of(init: Any) -> tuple[dict[str, tuple[type | None, bool]], bool]:
    """The keyword parameters of a constructor as a `Signature`, and whether it takes ``**kwargs`` too.

    A parameter's type comes from its annotation (``int``, ``"float"``, ``"bool | None"``, ...), else from
    its default; an unannotated int default is read as "a number" (such an environment may take 9.81).
    """
    try:
        params = inspect.signature(init).parameters.values()
    except (TypeError, ValueError):
        return {}, True
    out: dict[str, tuple[type | None, bool]] = {}
    open_ended = False
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            open_ended = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
            out[p.name] = _declared(p)
    return out, open_ended


def _declared(p: inspect.Parameter) -> tuple[type | None, bool]:
    ann = p.annotation
    text = "" if ann is p.empty else ann if isinstance(ann, str) else ann.__name__ if isinstance(ann, type) else str(ann)
    text = text.replace("typing.", "").replace(" ", "")
    optional = p.default is None or "None" in text
    core = text.removeprefix("Optional[").removesuffix("]").replace("|None", "").replace("None|", "")
    declared = {"bool": bool, "int": int, "float": float}.get(core)
    if declared is None and not text and p.default is not p.empty:
        declared = {bool: bool, int: float, float: float}.get(type(p.default))  # unannotated: by the default
    return declared, optional


def check_params(who: str, params: Mapping[str, Any], signature: Signature, *, open_ended: bool = True,
                 extra: Signature | None = None, render_modes: Any = None) -> None:
    """Refuse bad keyword `params` of game `who` (see the module doc); `extra` declares keywords taken on the
    way (Gymnasium's ``max_episode_steps``), `render_modes` the accepted render modes (None: not checked)."""
    known = {**signature, **(extra or {})}
    for name, value in params.items():
        try:
            _check_one(name, value, known.get(name), render_modes)
        except ValueError as exc:
            raise ValueError(f"{exc} (game {who!r})") from None
        if name not in known and not open_ended:
            raise ValueError(f"unknown parameter {name!r} for game {who!r}{did_you_mean(name, known)} "
                             f"(accepted: {', '.join(known) or 'none'})")


def _check_one(name: str, value: Any, declared: tuple[type | None, bool] | None, render_modes: Any) -> None:
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise ValueError(f"{name}={value!r} is not accepted: {FINITE}")
    if name in COUNTS:
        check_int(name, value, low=COUNTS[name], high=MAX_AGENTS)
    elif name in LENGTHS:
        check_int(name, value, low=1, high=MAX_STEPS)
    elif name in PROPORTIONS:
        check_real(name, value, low=0, high=1)
    elif name == "render_mode" and render_modes is not None:
        if value is not None and value not in render_modes:
            raise ValueError(f"render_mode must be None or one of {list(render_modes)}, got {value!r}"
                             f"{did_you_mean(value, render_modes)}")
    if declared is None or (value is None and declared[1]):
        return
    kind = declared[0]
    if kind is bool and not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    if kind is int and not is_int(value):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if kind is float and not is_real(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


def parse_name(text: str) -> tuple[str, dict[str, Any]]:
    """``"simple_push_v3(max_cycles=10)"`` -> ``("simple_push_v3", {"max_cycles": 10})``."""
    text = text.strip()
    if "(" not in text:
        return text, {}
    base, _, rest = text.partition("(")
    try:
        call = ast.parse(f"f({rest}", mode="eval").body
        assert isinstance(call, ast.Call) and not call.args
    except (SyntaxError, AssertionError):
        raise ValueError(f"cannot read parameters in {text!r}: write them as name(key=value, ...)") from None
    params = {}
    for kw in call.keywords:
        try:
            params[str(kw.arg)] = ast.literal_eval(kw.value)
        except ValueError:
            raise ValueError(f"cannot use {kw.arg}={ast.unparse(kw.value)} in {text!r}: "
                             f"{_why_not_literal(kw.value)}") from None
    return base.strip(), params


def _why_not_literal(node: ast.expr) -> str:
    """Why a parameter's value in a game name is refused: NaN and infinities, bare words, or expressions."""
    inner = node.operand if isinstance(node, ast.UnaryOp) else node
    word = inner.id if isinstance(inner, ast.Name) else None
    if word is not None and word.lower() in ("nan", "inf", "infinity"):
        return f"{ast.unparse(node)} is not accepted, as {FINITE}"
    if word in ("true", "false", "none"):
        return f"write {word.capitalize()} (Python's spelling)"
    if word is not None:
        return f"write a string in quotes ({word!r}) or a number"
    return "values must be literals: numbers, quoted strings, True, False, None, tuples or lists"
