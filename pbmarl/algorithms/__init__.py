"""The outer loops: PSRO and its relatives, composed of solvers, learners and evaluators."""

from pbmarl.algorithms.psro import PSRO, FictitiousPlay, SelfPlay
from pbmarl.algorithms.records import IterationRecord

__all__ = ["PSRO", "FictitiousPlay", "IterationRecord", "SelfPlay"]
