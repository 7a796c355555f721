"""The outer loops: PSRO and its relatives, composed of solvers, learners and evaluators."""

from pbmarl.algorithms.psro import PSRO, FictitiousPlay, SelfPlay
from pbmarl.algorithms.records import IterationRecord, history_frame

__all__ = ["PSRO", "FictitiousPlay", "IterationRecord", "SelfPlay", "history_frame"]
