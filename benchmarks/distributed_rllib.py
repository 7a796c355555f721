"""The RLlib 2.60 side of benchmarks/distributed.py; runs in RLlib's own venv, never in pbmarl's.

    /work/venvs/rllib/bin/python benchmarks/distributed_rllib.py --algo impala --env CartPole-v1 --runners 2 --seconds 25

Builds RLlib's IMPALA or APPO (new API stack, one remote learner actor: with a local one,
``num_learners=0``, IMPALA sampled nothing here) or DQN (local learner) with
`--runners` env runners of 8 environments each, calls ``algo.train()`` for `--seconds`
of wall time (timed from after the build, so actor start-up is not counted), and prints
one line ``RLLIB_RESULT {json}``: env steps sampled, the rate, the wall time at which the
mean episode return first reached 475 (NaN if not), the last mean return. On
simple_spread_v3 agent_0 learns while agent_1 and agent_2 play RLlib's RandomRLModule
(pbmarl's run: seat 0 learns beside two random agents). A failure prints
``RLLIB_RESULT {"error": reason}`` instead, so the caller can say why RLlib did not run.
This file imports nothing from pbmarl.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import traceback

import gymnasium as gym
import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# single-machine Ray: every Ray process listens on 127.0.0.1 only (read by Ray when it is imported)
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def build_config(algo: str, env: str, runners: int, seed: int):  # type: ignore[no-untyped-def]
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    if algo == "dqn":
        from ray.rllib.algorithms.dqn import DQNConfig

        # RLlib's own CartPole example (rllib/examples/algorithms/dqn/cartpole_dqn.py): dueling double DQN,
        # n-step 2-5, 256 tanh units, prioritised replay; an earlier plain 64x64 DQN here stayed at returns ~10
        config = DQNConfig().training(
            lr=5e-4, train_batch_size_per_learner=32, n_step=(2, 5), double_q=True, dueling=True, num_atoms=1,
            noisy=False, epsilon=[(0, 1.0), (10_000, 0.02)],
            replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50_000,
                                  "alpha": 0.6, "beta": 0.4})
        model = DefaultModelConfig(fcnet_hiddens=[256], fcnet_activation="tanh", fcnet_bias_initializer="zeros_",
                                   head_fcnet_hiddens=[256], head_fcnet_bias_initializer="zeros_")
    else:
        if algo == "appo":
            from ray.rllib.algorithms.appo import APPOConfig as Config
        else:
            from ray.rllib.algorithms.impala import IMPALAConfig as Config
        config = Config().training(lr=3e-3 if env == "CartPole-v1" else 1e-3, train_batch_size_per_learner=512,
                                   grad_clip=40.0, vf_loss_coeff=0.5, entropy_coeff=0.01, gamma=0.99)
        model = DefaultModelConfig(fcnet_hiddens=[64, 64], vf_share_layers=False)
    config = (config.environment(env_name(env)).framework("torch")
              # DQN: one env a runner, as RLlib's example; with 8 its native replay ratio fell to ~0.02 updates a step
              .env_runners(num_env_runners=runners, num_envs_per_env_runner=1 if algo == "dqn" else 8,
                           num_cpus_per_env_runner=1)
              .learners(num_learners=0 if algo == "dqn" else 1)  # IMPALA/APPO: RLlib's advice, one remote learner on CPU
              .debugging(seed=seed).reporting(min_time_s_per_iteration=1))
    if env == "simple_spread_v3" and algo == "dqn":
        config = config.environment("simple_spread_v3_seat0")  # RLlib's multi-agent DQN fails here: see env_name
        config = config.rl_module(model_config=model)
    elif env == "simple_spread_v3":
        from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec
        from ray.rllib.examples.rl_modules.classes.random_rlm import RandomRLModule

        config = config.multi_agent(
            policies={"learned", "random"},
            policy_mapping_fn=lambda aid, *a, **k: "learned" if aid == "agent_0" else "random",
            policies_to_train=["learned"],
        ).rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
            "learned": RLModuleSpec(model_config=model), "random": RLModuleSpec(module_class=RandomRLModule)}))
    else:
        config = config.rl_module(model_config=model)
    return config


def env_name(env: str) -> str:
    if env != "simple_spread_v3":
        return env
    from mpe2 import simple_spread_v3
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    register_env("simple_spread_v3", lambda _: ParallelPettingZooEnv(simple_spread_v3.parallel_env(N=3, max_cycles=25)))
    register_env("simple_spread_v3_seat0", lambda _: SeatZero(simple_spread_v3.parallel_env(N=3, max_cycles=25)))
    return "simple_spread_v3"


class SeatZero(gym.Env):  # type: ignore[misc]
    """simple_spread_v3 as agent_0 sees it, agent_1 and agent_2 acting uniformly at random inside the env: a
    single-agent Gymnasium env, for RLlib's DQN. Its multi-agent DQN (a RandomRLModule beside the learned one)
    stops in its first iteration here with ``TypeError: unhashable type: 'slice'``; this is the same game for
    the learning seat (pbmarl's run: seat 0 learns beside two random agents) with no multi-agent machinery."""

    def __init__(self, parallel_env) -> None:  # type: ignore[no-untyped-def]
        self.env = parallel_env
        self.observation_space = parallel_env.observation_space("agent_0")
        self.action_space = parallel_env.action_space("agent_0")
        self.rng = np.random.default_rng()

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs["agent_0"], infos.get("agent_0", {})

    def step(self, action):  # type: ignore[no-untyped-def]
        actions = {a: int(action) if a == "agent_0" else int(self.rng.integers(self.env.action_space(a).n))
                   for a in self.env.agents}
        obs, rew, term, trunc, infos = self.env.step(actions)
        return (obs["agent_0"], float(rew["agent_0"]), bool(term["agent_0"]), bool(trunc["agent_0"]),
                infos.get("agent_0", {}))


def lookup(result: dict, *keys: str) -> float:
    for key in keys:
        node = result
        for part in key.split("/"):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            if isinstance(node, (int, float)):
                return float(node)
    return math.nan


def flatten(node: object, prefix: str = "") -> dict[str, object]:
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, object] = {}
    for k, v in node.items():
        out.update(flatten(v, f"{prefix}/{k}" if prefix else str(k)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=["impala", "appo", "dqn"], default="impala")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--runners", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out: dict[str, object] = {"algo": args.algo, "env": args.env, "runners": args.runners}
    try:
        import ray
        import torch

        torch.set_num_threads(1)
        out["ray"] = ray.__version__
        ray.init(address="local", num_cpus=max(2, args.runners + (args.algo != "dqn")), include_dashboard=False,
                 log_to_driver=bool(os.environ.get("RLLIB_LOGS")))
        t_build = time.perf_counter()
        algo = build_config(args.algo, args.env, args.runners, args.seed).build_algo()
        out["build_s"] = time.perf_counter() - t_build
        t0 = time.perf_counter()
        t475, last, steps, iters = math.nan, math.nan, 0.0, 0
        while time.perf_counter() - t0 < args.seconds:
            result = algo.train()
            iters += 1
            steps = lookup(result, "env_runners/num_env_steps_sampled_lifetime", "num_env_steps_sampled_lifetime")
            ret = lookup(result, "env_runners/module_episode_returns_mean/learned",
                         "env_runners/episode_return_mean")
            if not math.isnan(ret):
                last = ret
                if math.isnan(t475) and ret >= 475:
                    t475 = time.perf_counter() - t0
        wall = time.perf_counter() - t0
        trained = lookup(result, "learners/__all_modules__/num_env_steps_trained_lifetime",
                         "num_env_steps_trained_lifetime")
        if not steps or math.isnan(steps):  # say where the counts are, if not under the expected keys
            out["keys"] = sorted(k for k in flatten(result) if "steps" in k or "return" in k)[:60]
        out.update(wall_s=wall, env_steps=steps, rate=steps / wall, trained_steps=trained, iterations=iters,
                   t475_s=t475, last_return=last)
        algo.stop()
        ray.shutdown()
    except Exception as exc:  # noqa: BLE001 - reported to the caller, which prints why RLlib did not run
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        out["trace"] = traceback.format_exc()[-1500:]
    print("RLLIB_RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
