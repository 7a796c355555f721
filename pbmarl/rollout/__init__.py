"""Rollouts: batched sampling of games, in-process or on Ray.

`RolloutPool` evaluates profiles, fills payoff tables and collects learner
trajectories, in this process or on Ray actors (`pbmarl.rollout.ray_backend`, which reaches Ray
through `pbmarl.hosting`). Importing this package does not import Ray.
"""

from pbmarl.rollout.pool import RolloutPool
from pbmarl.rollout.records import RunOutput, Seat
from pbmarl.rollout.results import EvalResult, FillResult
from pbmarl.rollout.runner import run_episodes
from pbmarl.rollout.trajectories import Trajectories

__all__ = ["EvalResult", "FillResult", "RolloutPool", "RunOutput", "Seat", "Trajectories", "run_episodes"]
