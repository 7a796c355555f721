"""The outer loops (drivers): PSRO and its relatives, composed of solvers, learners and evaluators.

Families in folders: `psro/` (PSRO, P2SRO, ParallelOracle, targets), `league/` (League, PFSP,
win rates); single drivers `nfsp.py` (its options and record in `nfsp_config.py`), `xdo.py`,
`jpsro.py`, `mmd.py`; self-play baselines in `selfplay/`; multi-agent teams in `teams/` (MARL, its records, team games, the group oracle and its
parameter-server rounds). Names beyond the drivers (configs, records, helpers) load on first
access, so ``pb.algorithms.LeagueConfig`` does not import torch until it is used.
"""

from __future__ import annotations

from pbmarl.algorithms.psro.psro import PSRO as PSRO
from pbmarl.algorithms.psro.psro import FictitiousPlay as FictitiousPlay
from pbmarl.algorithms.psro.psro import SelfPlay as SelfPlay
from pbmarl.algorithms.psro.records import IterationRecord as IterationRecord
from pbmarl.lazy import lazy_exports

#: public name -> module that defines it (loaded lazily)
_LAZY: dict[str, str] = {
    "P2SRO": "pbmarl.algorithms.psro.p2sro",
    "ParallelOracle": "pbmarl.algorithms.psro.parallel_oracle",
    "Target": "pbmarl.algorithms.psro.targets",
    "TargetSelector": "pbmarl.algorithms.psro.targets",
    "XDO": "pbmarl.algorithms.xdo",
    "JPSRO": "pbmarl.algorithms.jpsro",
    "MMD": "pbmarl.algorithms.mmd",
    "PPOSelfPlay": "pbmarl.algorithms.selfplay.ppo",
    "DeepMMD": "pbmarl.algorithms.selfplay.deep_mmd",
    "League": "pbmarl.algorithms.league.league",
    "LeagueConfig": "pbmarl.algorithms.league.rules",
    "WinRateTable": "pbmarl.algorithms.league.win_rates",
    "pfsp": "pbmarl.algorithms.league.pfsp",
    "NFSP": "pbmarl.algorithms.nfsp",
    "NFSPConfig": "pbmarl.algorithms.nfsp_config",
    "MARL": "pbmarl.algorithms.teams.marl",
    "MARLRecord": "pbmarl.algorithms.teams.marl",
    "GroupOracle": "pbmarl.algorithms.teams.oracle",
    "TeamGame": "pbmarl.algorithms.teams.team_game",
    "TeamEvaluator": "pbmarl.algorithms.teams.team_game",
    "team_psro": "pbmarl.algorithms.teams.oracle",
}

__all__ = sorted(["PSRO", "FictitiousPlay", "IterationRecord", "SelfPlay", *_LAZY])


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
