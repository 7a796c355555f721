"""The run types the contract test (test_run_contract.py) checks: every family's `CASES`, merged.

Each family keeps its cases in ``tests/run_cases_<family>.py``: a dict of run-type name -> `Case`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Case:
    """How to build one run type on a tiny budget.

    Attributes:
        game: the game name it runs on (the test builds it from the name and from ``pb.load_game(name)``).
        build: ``build(game, **options)`` -> a fresh run, always with ``seed=0``.
        typo: a misspelt option name, refused with a did-you-mean.
    """

    game: str
    build: Callable[..., Any]
    typo: str
    options: dict[str, Any] = field(default_factory=dict)


CASES: dict[str, Case] = {}
for _path in sorted(Path(__file__).parent.glob("run_cases_*.py")):
    CASES.update(importlib.import_module(_path.stem).CASES)
