"""Learners by name, their specs (configs as JSON), and their folders on disk.

`make_learner(game, spec)` builds a learner from a JSON-able spec (what
`learner.spec()` returns, or a hand-written ``{"name": "dqn", "seed": 0, "budget": 20_000}``);
`load_learner(game, folder)` rebuilds a saved one. Saving and loading a learner's state
live in the learner (`Learner.save`, `Learner.load`); `save_learner` and
`load_learner_state` remain as thin aliases.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pbmarl.games.base import Game

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.learners.base import Learner, LearnerConfig

#: learner name -> (module, class)
LEARNERS: dict[str, tuple[str, str]] = {
    "dqn": ("pbmarl.learners.dqn", "DQN"),
    "ppo": ("pbmarl.learners.ppo", "PPO"),
    "a2c": ("pbmarl.learners.a2c", "A2C"),
    "exact": ("pbmarl.learners.exact", "ExactBestResponse"),
    "sac": ("pbmarl.learners.sac", "SAC"),
    "td3": ("pbmarl.learners.td3", "TD3"),
    "ddpg": ("pbmarl.learners.ddpg", "DDPG"),
    "hddpg": ("pbmarl.learners.hddpg", "HDDPG"),
    "rainbow": ("pbmarl.learners.rainbow", "Rainbow"),
    "a3c": ("pbmarl.distributed.a3c", "A3C"),
    "impala": ("pbmarl.distributed.impala", "IMPALA"),
    "apex": ("pbmarl.distributed.apex", "ApeX"),
    "apex_ddpg": ("pbmarl.distributed.apex_ddpg", "ApeXDDPG"),
}
FORMAT = 1


def learner_class(name: str) -> type:
    """The class registered under `name`; unknown names raise with a suggestion."""
    if name not in LEARNERS:
        close = difflib.get_close_matches(str(name), LEARNERS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown learner {name!r}{hint} Known learners: {', '.join(LEARNERS)}")
    import importlib

    module, cls = LEARNERS[name]
    return getattr(importlib.import_module(module), cls)


def make_learner(game: Game, spec: str | Mapping[str, Any]) -> Any:
    """A learner from a name or a spec dict.

    The spec holds ``name`` (``"dqn"``, ``"ppo"``, ``"a2c"``, ``"exact"``), optionally
    ``seed``, ``config`` (a dict of config fields, as `spec()` writes it) and any
    config field at the top level (overriding ``config``), e.g. a budget or a size.

    Example:
        >>> make_learner(game, {"name": "dqn", "seed": 0, "budget": 20_000, "hidden": [64, 64]})
        DQN('kuhn_poker', seed=0, 0 tasks done)
        >>> make_learner(game, learner.spec())       # an equal, untrained learner  # doctest: +SKIP
    """
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, Mapping):
        raise TypeError(f"a learner spec is a name or a dict with a 'name', got {type(spec).__name__}: {spec!r}")
    options = dict(spec)
    name = options.pop("name", None)
    cls = learner_class(name)
    if name == "exact":
        options.pop("seed", None)  # exact best responses are deterministic
        if options:
            raise TypeError(f"the exact learner takes no options, got {sorted(options)}")
        return cls(game)
    seed = options.pop("seed", 0)
    config = options.pop("config", None) or {}
    if not isinstance(config, Mapping):
        raise TypeError(f"spec['config'] must be a dict of config fields, got {type(config).__name__}: {config!r}")
    return cls(game, seed=seed, **{**config, **options})


def load_learner(game: Game, folder: str | os.PathLike[str]) -> Learner:
    """Rebuild a learner saved with `Learner.save`, state included."""
    data = _read(Path(folder))
    learner = make_learner(game, data["spec"])
    return learner.load(folder)


def make_config(cls: type[LearnerConfig], config: LearnerConfig | None, options: dict[str, Any], *,
                owner: str) -> LearnerConfig:
    """`config` (default ``cls()``) with keyword `options` replacing its fields (`pbmarl.runs.config.build_config`)."""
    from pbmarl.runs.config import build_config

    return build_config(cls, config, options, owner=owner)


def config_to_json(config: LearnerConfig) -> dict[str, Any]:
    """The config as a JSON-able dict (tuples become lists); `make_config` reads it back."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}


# -- the folder ------------------------------------------------------------------
def save_learner(learner: Learner, folder: Path) -> Path:
    """Write `learner` into `folder`: the same as ``learner.save(folder)`` (kept for old callers)."""
    return learner.save(folder)


def load_learner_state(learner: Learner, folder: Path) -> None:
    """Restore into `learner` what `save_learner` wrote: the same as ``learner.load(folder)``."""
    learner.load(folder)


def _read(folder: Path) -> dict[str, Any]:
    from pbmarl.learners.base import read_learner_json

    return read_learner_json(folder)
