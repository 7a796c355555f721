"""Write the API reference's pages from the package's public names, never from module paths.

Every name in ``pbmarl.__all__`` gets an entry at ``pbmarl.NAME``, grouped by the sub-package that
defines it; each sub-package with an ``__all__`` gets a page for the names it adds. A module that
moves changes nothing here: the names are looked up where they are defined at build time.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pbmarl

#: family title per first-level sub-package (where a name is defined); an unknown one gets its own title
FAMILIES = {
    "games": "Games and environments",
    "policies": "Policies",
    "population": "Population and payoff tables",
    "payoffs": "Population and payoff tables",
    "solvers": "Meta-solvers",
    "evaluation": "Exact evaluation and game theory",
    "rollout": "Rollouts, agent mappings and Ray",
    "runs": "Every run",
    "protocols": "Seams (protocols)",
    "algorithms": "Drivers: PSRO and its relatives, leagues, MARL",
    "learners": "Learners",
    "distributed": "Distributed learners",
    "widgets": "Notebook faces",
    "plots": "Plots",
}
ORDER = list(dict.fromkeys(FAMILIES.values()))


def family(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or getattr(obj, "__name__", "pbmarl")
    part = module.split(".")[1] if module.count(".") else "pbmarl"
    return FAMILIES.get(part, part.replace("_", " ").capitalize())


def subpackages() -> list[ModuleType]:
    """First-level sub-packages and modules of pbmarl that declare ``__all__``."""
    found = []
    for info in sorted(pkgutil.iter_modules(pbmarl.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in {"conftest"}:
            continue
        try:
            module = importlib.import_module(f"pbmarl.{info.name}")
        except ImportError:  # an optional extra that is not installed: its page says nothing rather than fail
            continue
        if hasattr(module, "__all__"):
            found.append(module)
    return found


def canonical_names() -> dict[int, str]:
    """id(object) -> the one documented name for it: ``pbmarl.NAME`` first, then ``pbmarl.SUB.NAME``."""
    names: dict[int, str] = {}
    for name in pbmarl.__all__:
        names.setdefault(id(getattr(pbmarl, name)), f"pbmarl.{name}")
    for module in subpackages():
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
                names.setdefault(id(obj), f"{module.__name__}.{name}")
    return names


def _title(text: str, mark: str) -> list[str]:
    return [text, mark * len(text), ""]


def _table(names: list[str]) -> str:
    return ".. autosummary::\n   :toctree: generated\n   :nosignatures:\n\n" + "".join(f"   {n}\n" for n in names)


def write(out: Path) -> list[str]:
    """Write api/index.md and one page per sub-package; return every documented name."""
    out.mkdir(parents=True, exist_ok=True)
    documented = []
    groups: dict[str, list[str]] = {}
    for name in pbmarl.__all__:
        if name == "__version__":
            continue
        groups.setdefault(family(getattr(pbmarl, name)), []).append(name)
    lines = [*_title("API reference", "="), ".. currentmodule:: pbmarl", "",
             "Every public name of `pbmarl`, as `import pbmarl as pb` reaches it, grouped by family; then the "
             "sub-packages, for what they add. Generated from the docstrings at each build.", ""]
    for title in sorted(groups, key=lambda t: (ORDER.index(t) if t in ORDER else len(ORDER), t)):
        lines += [*_title(title, "-"), _table(groups[title])]
        documented += [f"pbmarl.{n}" for n in groups[title]]
    top = {id(getattr(pbmarl, n)) for n in pbmarl.__all__}
    pages = []
    for module in subpackages():
        extra = [n for n in module.__all__ if id(getattr(module, n)) not in top
                 and (inspect.isclass(getattr(module, n)) or inspect.isfunction(getattr(module, n))
                      or inspect.ismodule(getattr(module, n)))]
        if not extra:
            continue
        short = module.__name__.split(".", 1)[1]
        pages.append(short)
        names = list(extra)
        documented += [f"{module.__name__}.{n}" for n in extra]
        head = "\n".join(_title(module.__name__, "="))
        (out / f"{short}.rst").write_text(f"{head}\n.. automodule:: {module.__name__}\n   :no-members:\n\n.. currentmodule:: {module.__name__}\n\n" + _table(names))
    lines += [*_title("Sub-packages", "-"), ".. toctree::", "   :maxdepth: 1", "", *[f"   {p}" for p in pages], ""]
    (out / "index.rst").write_text("\n".join(lines))
    return documented
