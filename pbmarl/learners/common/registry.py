"""Learners by name and their specs (configs as JSON).

`make_learner(game, spec)` builds a learner from a JSON-able spec (what `learner.spec()`
returns, or a hand-written ``{"name": "dqn", "seed": 0, "budget": 20_000}``). A learner
saves and loads like every run: ``learner.save(path)``, ``pb.load_run(path)``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pbmarl.games.base import Game

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.learners.oracles.base import LearnerConfig

#: learner name -> (module, class)
LEARNERS: dict[str, tuple[str, str]] = {
    "dqn": ("pbmarl.learners.oracles.dqn", "DQN"),
    "ppo": ("pbmarl.learners.oracles.ppo", "PPO"),
    "a2c": ("pbmarl.learners.oracles.a2c", "A2C"),
    "exact": ("pbmarl.learners.oracles.exact", "ExactBestResponse"),
    "sac": ("pbmarl.learners.control.sac", "SAC"),
    "td3": ("pbmarl.learners.control.td3", "TD3"),
    "ddpg": ("pbmarl.learners.control.ddpg", "DDPG"),
    "hddpg": ("pbmarl.learners.control.hddpg", "HDDPG"),
    "rainbow": ("pbmarl.learners.control.rainbow", "Rainbow"),
    "a3c": ("pbmarl.learners.oracles.a3c", "A3C"),
    "impala": ("pbmarl.learners.oracles.impala", "IMPALA"),
    "apex": ("pbmarl.learners.oracles.apex", "ApeX"),
    "apex_ddpg": ("pbmarl.learners.control.apex_ddpg", "ApeXDDPG"),
}


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


def make_config(cls: type[LearnerConfig], config: LearnerConfig | None, options: dict[str, Any], *,
                owner: str) -> LearnerConfig:
    """`config` (default ``cls()``) with keyword `options` replacing its fields (`pbmarl.config.build_config`)."""
    from pbmarl.config import build_config

    return build_config(cls, config, options, owner=owner)
