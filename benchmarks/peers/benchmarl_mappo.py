"""BenchMARL 1.5's MAPPO on PettingZoo simple_spread_v3, run inside the peer venv (/work/venvs/benchmarl).

Prints one JSON line: frames (env steps), wall seconds, frames per second and BenchMARL's own
mean training return (``experiment.mean_return``, BenchMARL's episode reward averaged over agents)
at the end. benchmarks/marl.py --only peer calls it and records the row.

    /work/venvs/benchmarl/bin/python benchmarks/peers/benchmarl_mappo.py --frames 30000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from benchmarl.algorithms import MappoConfig
from benchmarl.environments import PettingZooTask
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.models.mlp import MlpConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=3_200)
    args = parser.parse_args()
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update({"N": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False})
    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = args.frames
    config.on_policy_collected_frames_per_batch = args.batch
    config.on_policy_n_envs_per_worker = 32
    config.loggers = []
    config.evaluation = False
    config.create_json = False
    config.checkpoint_interval = 0
    config.sampling_device = config.train_device = "cpu"
    config.save_folder = tempfile.mkdtemp(prefix="benchmarl-")  # not the working tree
    experiment = Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
                            critic_model_config=MlpConfig.get_from_yaml(), seed=args.seed, config=config)
    t0 = time.perf_counter()
    experiment.run()
    wall = time.perf_counter() - t0
    print(json.dumps({"frames": int(experiment.total_frames), "wall_s": wall, "frames_per_s": experiment.total_frames / wall,
                      "mean_return": float(getattr(experiment, "mean_return", float("nan")))}))


if __name__ == "__main__":
    main()
