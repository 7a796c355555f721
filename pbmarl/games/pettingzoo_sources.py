"""Where PettingZoo environments come from: PettingZoo's own registry and the MPE modules of `mpe2`.

`available_environments` lists what is installed, named like the environment modules
(``"connect_four_v3"``, ``"simple_push_v3"``); an `EnvSource` builds one with either API and finds
its constructor, whose signature `pbmarl.games.params.check_params` reads before anything is built.

Example:
    >>> canonical("classic/connect_four-v3")
    'connect_four_v3'
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MPE_PACKAGE", "EnvSource", "available_environments", "canonical", "family"]

MPE_PACKAGE = "mpe2"


@dataclass(frozen=True)
class EnvSource:
    """Where an environment comes from: PettingZoo's registry (`id`) or an mpe2 module (`module`)."""

    name: str
    apis: tuple[str, ...]
    id: str | None = None
    module: str | None = None

    def factory(self, api: str) -> Callable[..., Any]:
        if self.id is not None:
            from pettingzoo import make

            env_id = self.id
            return lambda **kwargs: make(api, env_id, **kwargs)
        module = importlib.import_module(str(self.module))
        return getattr(module, "parallel_env" if api == "parallel" else "env")

    def constructor(self) -> Any:
        """The environment's class (its module's ``raw_env``), whose signature and ``metadata`` say what it
        accepts; None where it cannot be found (creating the environment then reports why)."""
        try:
            if self.module is not None:
                module = importlib.import_module(self.module)
            else:
                from pettingzoo import aec_registry, parallel_registry

                spec = aec_registry.get(self.id) or parallel_registry.get(self.id)
                entry = getattr(spec, "entry_point", None)
                if not isinstance(entry, str):
                    return None
                module = importlib.import_module(entry.split(":", 1)[0])
        except Exception:  # a family's missing extra: PettingZooGame names the pip install
            return None
        return getattr(module, "raw_env", None)


def available_environments() -> dict[str, EnvSource]:
    """``{name: source}`` of the installed environments, named like ``"connect_four_v3"``.

    PettingZoo's own environments come from its registry (``pettingzoo.make``); the
    MPE environments from the `mpe2` package, found without importing them.
    """
    found: dict[str, EnvSource] = {}
    try:
        from pettingzoo import aec_registry, parallel_registry
    except ImportError:
        aec_registry, parallel_registry = {}, {}
    for env_id in sorted(set(aec_registry) | set(parallel_registry)):
        spec = aec_registry.get(env_id) or parallel_registry[env_id]
        name = f"{spec.name}_v{spec.version}"
        apis = tuple(api for api, reg in (("aec", aec_registry), ("parallel", parallel_registry)) if env_id in reg)
        found[name] = EnvSource(name, apis, id=env_id)
    try:
        mpe = importlib.import_module(MPE_PACKAGE)
    except ImportError:
        return found
    for info in pkgutil.iter_modules(mpe.__path__):
        head, _, version = info.name.rpartition("_v")
        if head and version.isdigit():
            found[info.name] = EnvSource(info.name, ("aec", "parallel"), module=f"{MPE_PACKAGE}.{info.name}")
    return found


def family(env_name: str) -> str:
    """The PettingZoo extra (``butterfly``, ``classic``, ...) an environment belongs to."""
    try:
        from pettingzoo import aec_registry, parallel_registry

        for env_id in list(parallel_registry) + list(aec_registry):
            if canonical(env_id) == env_name and "/" in env_id:
                return env_id.split("/", 1)[0]
    except ImportError:
        pass
    return "all"


def canonical(name: str) -> str:
    """``"classic/connect_four-v3"`` or ``"mpe/simple_push_v3"`` -> ``"connect_four_v3"``."""
    short = name.rsplit("/", 1)[-1]
    head, sep, version = short.rpartition("-v")
    return f"{head}_v{version}" if sep and version.isdigit() else short
