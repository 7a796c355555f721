"""Lazy exports: a package's public names loaded from their modules on first access (PEP 562).

`lazy_exports` builds the module-level ``__getattr__`` and ``__dir__`` of a package whose names
would otherwise import torch or Ray at ``import pbmarl``; a name, once loaded, is cached in the
package's namespace so later lookups skip ``__getattr__``.

Example:
    >>> ns = {"__name__": "pkg"}
    >>> getattr_, dir_ = lazy_exports(ns, {"sqrt": "math"}, ["sqrt"])
    >>> getattr_("sqrt")(4.0), "sqrt" in ns, dir_()
    (2.0, True, ['sqrt'])
    >>> getattr_("cbrt")
    Traceback (most recent call last):
    AttributeError: module 'pkg' has no attribute 'cbrt'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, str], names: list[str], *,
                 subpackages: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package whose ``globals()`` is `namespace`.

    `exports` maps a public name to the module that defines it; `subpackages` are names of the
    package's subpackages, imported on access; ``__dir__`` returns `names` (the package's ``__all__``).
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            if name in subpackages:
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__
