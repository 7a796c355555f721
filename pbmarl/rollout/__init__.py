"""Rollouts: batched sampling of games, in-process or on Ray.

`RolloutPool` evaluates profiles, fills payoff tables and collects learner
trajectories; `init_ray` starts or joins Ray. Importing this package does not
import Ray (only `pbmarl.rollout.ray_backend` does, inside its functions).
"""

from pbmarl.rollout.pool import RolloutPool
from pbmarl.rollout.ray_backend import init_ray
from pbmarl.rollout.records import RunOutput, Seat
from pbmarl.rollout.results import EvalResult, FillResult
from pbmarl.rollout.runner import run_episodes
from pbmarl.rollout.trajectories import Trajectories

__all__ = ["EvalResult", "FillResult", "RolloutPool", "RunOutput", "Seat", "Trajectories", "init_ray", "run_episodes"]
