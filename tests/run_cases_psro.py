"""Contract cases of the PSRO family (see run_cases.py): PSRO, SelfPlay, FictitiousPlay, XDO, JPSRO, P2SRO,
and PSRO and XDO with a DQN oracle (a Ctrl-C inside the oracle's task must be undone too: the oracle's rounds
take no snapshot of their own there, the run's holds theirs)."""

from __future__ import annotations

from typing import Any

from run_cases import Case

import pbmarl as pb

#: a DQN oracle small enough for a contract check in a few seconds
TINY_DQN = dict(budget=64, steps_per_round=32, num_envs=8, hidden=(16,), batch_size=16, updates_per_round=2,
                learning_starts=32)


def _seeded(cls: Any, **fixed: Any) -> Any:
    return lambda game, **kw: cls(game, seed=0, **{**fixed, **kw})


def _with_dqn(cls: Any, **fixed: Any) -> Any:
    def build(game: Any, **kw: Any) -> Any:
        game = pb.load_game(game) if isinstance(game, str) else game
        return cls(game, learner=pb.DQN(game, seed=0, **TINY_DQN), seed=0, **{**fixed, **kw})

    return build


CASES = {
    "PSRO": Case("kuhn_poker", _seeded(pb.PSRO), "solvr"),
    "SelfPlay": Case("kuhn_poker", _seeded(pb.SelfPlay), "max_iteration"),
    "FictitiousPlay": Case("kuhn_poker", _seeded(pb.FictitiousPlay), "eval_episode"),
    "XDO": Case("kuhn_poker", _seeded(pb.XDO), "check_evry"),
    "JPSRO": Case("kuhn_poker", _seeded(pb.JPSRO), "stop_gapp"),
    "P2SRO": Case("kuhn_poker", _with_dqn(pb.P2SRO, active=2, refresh_every=1, backend="local"), "refresh_evry"),
    "PSRO-DQN": Case("kuhn_poker", _with_dqn(pb.PSRO), "eval_episods"),
    "XDO-DQN": Case("kuhn_poker", _with_dqn(pb.XDO), "check_evry"),
}
