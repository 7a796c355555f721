"""A PettingZoo game on the Ray backend (its own module: the pool in test_ray.py holds both CPUs)."""

import numpy as np
import pytest

import pbmarl as pb

pytestmark = pytest.mark.ray


def test_pettingzoo_game_on_ray(ray_session):
    game = pb.load_game("pettingzoo:tictactoe_v3")
    pis = [pb.policies.FixedPolicy(game, np.arange(1, 10) / 45), pb.RandomPolicy(game)]  # no torch in the workers
    with pb.RolloutPool(game, num_workers=2, backend="ray", envs_per_worker=32, unit_episodes=50) as ray_pool, \
            pb.RolloutPool(game, envs_per_worker=32, unit_episodes=50) as local:
        a = ray_pool.evaluate(pis, 200, seed=4)
        b = local.evaluate(pis, 200, seed=4)
    np.testing.assert_allclose(a.mean, b.mean, atol=1e-12)
