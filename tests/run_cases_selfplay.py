"""Contract cases of the self-play baselines (see run_cases.py): tabular MMD on the exact engine."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb


def _seeded(cls: Any, **fixed: Any) -> Any:
    return lambda game, **kw: cls(game, seed=0, **{**fixed, **kw})


CASES = {
    "MMD": Case("kuhn_poker", _seeded(pb.MMD, alpha=0.1), "alpah"),
}
