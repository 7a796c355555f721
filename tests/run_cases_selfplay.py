"""Contract cases of the self-play baselines (see run_cases.py): tabular MMD on the exact engine, PPO self-play
and deep MMD (one shared actor-critic, and one per seat with a moving magnet)."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb

#: a round small enough for a contract check in seconds
TINY = dict(steps_per_round=64, hidden=(16,), epochs=2, minibatches=2, num_envs=4)


def _seeded(cls: Any, **fixed: Any) -> Any:
    return lambda game, **kw: cls(game, seed=0, **{**fixed, **kw})


CASES = {
    "MMD": Case("kuhn_poker", _seeded(pb.MMD, alpha=0.1), "alpah"),
    "PPOSelfPlay": Case("kuhn_poker", _seeded(pb.PPOSelfPlay, **TINY), "clip_coeff"),
    "DeepMMD": Case("kuhn_poker", _seeded(pb.DeepMMD, shared=False, magnet_every=2, **TINY), "magnet_evry"),
}
