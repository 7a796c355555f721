"""Contract cases of the PSRO family (see run_cases.py)."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb


def _seeded(cls: Any, **fixed: Any) -> Any:
    return lambda game, **kw: cls(game, seed=0, **{**fixed, **kw})


CASES = {
    "PSRO": Case("kuhn_poker", _seeded(pb.PSRO), "solvr"),
    "SelfPlay": Case("kuhn_poker", _seeded(pb.SelfPlay), "max_iteration"),
    "FictitiousPlay": Case("kuhn_poker", _seeded(pb.FictitiousPlay), "eval_episode"),
}
