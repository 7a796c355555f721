"""Tianshou 2.0's own tic-tac-toe recipe (test/pettingzoo/tic_tac_toe.py): a DQN learner against a random
opponent through ``MultiAgentOffPolicyAlgorithm`` (Tianshou's MultiAgentPolicyManager), in the peer venv
(/work/venvs/tianshou). Run inside that venv only.

The recipe's settings: the learner is the second player (agent_id 2), Net 4 x 128, lr 1e-4, gamma 0.9,
3-step returns, target update every 320 updates, eps 0.1 in training, buffer 20,000, 10 training envs,
10 env steps per collection step, 0.1 gradient steps per sample, batch 64, a first collection of
batch x envs steps. Training stops at `--steps` env steps (every move of either player counts, as
Tianshou's collector counts them) instead of the recipe's 50 epochs and its 0.6 stop.

The trained Q-network is then played greedily (over legal moves) as the second player against a
uniformly random legal opponent for `--episodes` episodes in a plain PettingZoo loop. Prints one JSON
line: env steps, wall seconds, win / draw / loss rates and the mean reward of the learner.

    /work/venvs/tianshou/bin/python benchmarks/peers/tianshou_tictactoe.py --steps 20000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import numpy as np
import torch
from pettingzoo.classic import tictactoe_v3
from tianshou.algorithm import DQN, MARLRandomDiscreteMaskedOffPolicyAlgorithm, MultiAgentOffPolicyAlgorithm
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.env.pettingzoo_env import PettingZooEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net


def make_env() -> PettingZooEnv:
    return PettingZooEnv(tictactoe_v3.env())


def evaluate(net: torch.nn.Module, episodes: int, seed: int) -> dict[str, float]:
    """Greedy learner as the second player against a uniformly random legal opponent."""
    rng = np.random.default_rng(seed)
    env = tictactoe_v3.env()
    outcome = []
    for e in range(episodes):
        env.reset(seed=int(seed * 100_000 + e))
        final = 0.0
        for agent in env.agent_iter():
            obs, reward, term, trunc, _ = env.last()
            if agent == "player_2":
                final = float(reward)
            if term or trunc:
                env.step(None)
                continue
            mask = obs["action_mask"].astype(bool)
            if agent == "player_2":
                with torch.no_grad():
                    q = net(torch.as_tensor(obs["observation"], dtype=torch.float32).reshape(1, -1))[0]
                q = q[0] if isinstance(q, tuple) else q
                q = q.reshape(-1).numpy().copy()
                q[~mask] = -np.inf
                action = int(np.argmax(q))
            else:
                action = int(rng.choice(np.flatnonzero(mask)))
            env.step(action)
        outcome.append(final)
    r = np.asarray(outcome)
    return {"win": float((r > 0).mean()), "draw": float((r == 0).mean()), "loss": float((r < 0).mean()),
            "mean_reward": float(r.mean())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)  # Tianshou logs a stats warning at every collection
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    env = make_env()
    space = env.observation_space["observation"]
    net = Net(state_shape=space.shape, action_shape=int(env.action_space.n), hidden_sizes=[128, 128, 128, 128])
    learner = DQN(policy=DiscreteQLearningPolicy(model=net, action_space=env.action_space, eps_training=0.1,
                                                 eps_inference=0.05),
                  optim=AdamOptimizerFactory(lr=1e-4), n_step_return_horizon=3, gamma=0.9, target_update_freq=320)
    opponent = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=env.action_space)
    algorithm = MultiAgentOffPolicyAlgorithm(algorithms=[opponent, learner], env=env)
    train_envs = DummyVectorEnv([make_env for _ in range(10)])
    test_envs = DummyVectorEnv([make_env for _ in range(10)])
    train_envs.seed(args.seed)
    test_envs.seed(args.seed)
    train = Collector[CollectStats](algorithm, train_envs, VectorReplayBuffer(20_000, len(train_envs)),
                                    exploration_noise=True)
    test = Collector[CollectStats](algorithm, test_envs, exploration_noise=True)
    t0 = time.perf_counter()
    train.reset()
    first = 64 * 10
    train.collect(n_step=first)
    stats = algorithm.run_training(OffPolicyTrainerParams(
        training_collector=train, test_collector=test, max_epochs=1, epoch_num_steps=max(args.steps - first, 10),
        collection_step_num_env_steps=10, test_step_num_episodes=10, batch_size=64,
        update_step_num_gradient_steps_per_sample=0.1, test_in_training=False, verbose=False, show_progress=False,
        multi_agent_return_reduction=lambda rews: rews[:, 1]))
    wall = time.perf_counter() - t0
    net.eval()
    result = {"peer": f"tianshou {__import__('tianshou').__version__}", "env_steps": first + int(stats.train_step),
              "wall_s": wall, **evaluate(net, args.episodes, args.seed)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
