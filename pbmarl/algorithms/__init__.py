"""The outer loops (drivers): PSRO and its relatives, composed of solvers, learners and evaluators.

Families in folders: `psro/` (PSRO, P2SRO, ParallelOracle, targets), `league/` (League, PFSP,
win rates); single drivers `nfsp.py`, `xdo.py`, `jpsro.py`; multi-agent teams in `teams/`
(MARL, its records, team games, the group oracle and its parameter-server rounds).
"""

from pbmarl.algorithms.psro.psro import PSRO, FictitiousPlay, SelfPlay
from pbmarl.algorithms.psro.records import IterationRecord

__all__ = ["PSRO", "FictitiousPlay", "IterationRecord", "SelfPlay"]
