"""Single-agent control: pbmarl's learners against Stable-Baselines3 on the same environments, budgets and seeds.

    python benchmarks/control.py --only Pendulum-v1/sac --seeds 0
    python benchmarks/control.py                           # the whole table, 3 seeds: hours on 2 cores

For every (environment, algorithm, seed): train with pbmarl in this process and with
SB3 in its own virtual environment (a subprocess of ``--sb3-python``, default
/work/venvs/sb3/bin/python; SB3 is never a pbmarl dependency), with the same
hyperparameters, then report

- the final deterministic return, mean over 10 episodes of Gymnasium's own environment started with
  ``reset(seed=s)`` for the same 10 seeds on both sides (rows before 2026-11-25 17:30 evaluated pbmarl with
  ``learner.evaluate(1, seed=s)``, which draws its episode seed from ``s``: other start states than SB3's);
- wall time per 1,000 env steps of training (evaluation not timed), and CPU time of the
  training process per 1,000 steps: on a machine shared with other jobs the CPU time is the
  fairer comparison, since the two runs happen one after the other under different loads.

``--steps N`` replaces every case's budget by N (a shorter, partial measurement: the return is
then not comparable with the bar, only with SB3 at the same budget); the CSV records the budget.

Both run torch with one thread: on the shared 2-core machine two threads made one SAC update 18x
slower in CPU time (282 ms against 15.4 ms at load average ~9).

``--matmul-precision bfloat16`` gives pbmarl's off-policy learners ``matmul_precision="bfloat16"``: the
hidden-to-hidden matrix products of each update run in bfloat16 (torch's CPU autocast), while inputs, the
first and last layers, losses, targets, optimiser state and acting stay float32; SB3 stays float32. The
Pendulum updates are matrix-product bound (a 400x300 TD3 update is ~700 MFLOP), and this machine's AMD
EPYC cores have AVX512-BF16: one 256x400 @ 400x300 product takes 0.33 ms in bfloat16 against 0.79 ms in
float32 on one thread (188 against 78 GFLOPS). ``--matmul-precision medium`` instead sets oneDNN's
bfloat16 math mode for each update (torch's ``set_float32_matmul_precision("medium")`` on the CPU): every
product reads bfloat16-rounded inputs inside the kernel and no tensor is cast, which on this project's later
Xeon (AMX) ran Pendulum's SAC and TD3 updates 7% and 24% faster than float32 where autocast ran SAC 8%
slower. The command column of each row records the flag.
Both sides use rl-zoo's hyperparameters for each row, equal where the algorithms match
(`SB3_OVERRIDES` lists the values that differ only in name or unit). Rows before 2026-11-25 20:00 ran
MountainCarContinuous with gSDE on SB3's side only; pbmarl's SAC has had ``sde=True`` since.
SB3 has no Rainbow, so the Rainbow row is compared with SB3's DQN; pbmarl's DQN row is
`Rainbow` with every part switched off (no double Q, dueling, n-step, PER, noise, C51).
The table of the issue, with its bars and SB3 zoo references:

    Pendulum-v1             20k   SAC, TD3, DDPG   mean >= -200   SAC -157, TD3 -152, DDPG -152
    CartPole-v1             50k   DQN, Rainbow     500            DQN 500
    CartPole-v1            100k   PPO              500            PPO 500   (pbmarl's PPO plays whole episodes)
    MountainCarContinuous   50k   SAC              >= 90          94.7 (gSDE on both sides, as the zoo)

Every seed's row is printed, with the ratios pbmarl / SB3 (return difference, time ratio;
the time target is <= 0.7), and appended to benchmarks/results/control.csv with the date,
the git commit and the command. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pbmarl.learners.control.config import PRECISIONS  # noqa: E402  (the checkout on the path first)

HEADER = ["date", "commit", "command", "env", "algo", "seed", "budget", "pbmarl_return", "sb3_return",
          "pbmarl_seconds_per_1000", "sb3_seconds_per_1000", "time_ratio", "pbmarl_cpu_per_1000", "sb3_cpu_per_1000",
          "cpu_ratio", "load_before", "load_after"]
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "control.csv")
EVAL_SEEDS = [10_000 + i for i in range(10)]

#: rl-zoo's Pendulum-v1 settings of TD3 and DDPG (the same for both). noise_sigma is the zoo's noise_std 0.1, in
#: both libraries' normalised action units: SB3 adds its action noise to the action scaled to [-1, 1], pbmarl's
#: `pb.policies.noise` works in half action ranges, the same thing. SB3 trains once *more than* learning_starts steps
#: are in, pbmarl from learning_starts on: 10_001 here and the zoo's 10_000 there both give 50 bursts of 200 updates
PENDULUM_TD3: dict[str, Any] = {"hidden": (400, 300), "lr": 1e-3, "batch_size": 256, "learning_starts": 10_001,
                                "buffer_size": 200_000, "train_freq": 200, "gradient_steps": 200, "gamma": 0.98,
                                "tau": 0.005, "noise_sigma": 0.1}
#: (env, algo) -> (budget, shared hyperparameters in pbmarl's names, SB3 class)
CASES: dict[tuple[str, str], tuple[int, dict[str, Any], str]] = {
    ("Pendulum-v1", "sac"): (20_000, {"hidden": (256, 256), "lr": 1e-3, "batch_size": 256, "learning_starts": 100,
                                      "gamma": 0.99, "tau": 0.005}, "SAC"),
    ("Pendulum-v1", "td3"): (20_000, {**PENDULUM_TD3}, "TD3"),
    ("Pendulum-v1", "ddpg"): (20_000, {**PENDULUM_TD3}, "DDPG"),
    ("CartPole-v1", "dqn"): (50_000, {"hidden": (256, 256), "lr": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
                                      "learning_starts": 1_000, "gamma": 0.99, "target_update_interval": 128,
                                      "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
                                      "epsilon_end": 0.04}, "DQN"),
    ("CartPole-v1", "rainbow"): (50_000, {"hidden": (256, 256), "lr": 2.3e-3, "batch_size": 64,
                                          "buffer_size": 100_000, "learning_starts": 1_000, "gamma": 0.99,
                                          "target_update_interval": 128, "train_freq": 256, "gradient_steps": 128,
                                          "v_min": 0.0, "v_max": 100.0}, "DQN"),
    # rl-zoo's CartPole PPO: 8 envs x 32 steps, one minibatch of 256, 20 epochs, lr 1e-3 and clip 0.2 decayed
    # linearly. pbmarl's PPO collects whole episodes (at least steps_per_round steps over num_envs games, so its
    # rounds grow as episodes get longer: up to 8 x 500) and decays lr to 5% with a fixed clip: the closest
    # settings it has. minibatch_size 256 keeps SB3's updates per sample as the rounds grow (rows before
    # 2026-11-25 20:00 took one minibatch per round: 20 updates per round of up to 4,000 steps)
    ("CartPole-v1", "ppo"): (100_000, {"hidden": (64, 64), "lr": 1e-3, "anneal_lr": True, "num_envs": 8,
                                       "steps_per_round": 256, "minibatch_size": 256, "epochs": 20, "gae_lambda": 0.8,
                                       "gamma": 0.98, "ent_coef": 0.0, "clip_coef": 0.2}, "PPO"),
    ("MountainCarContinuous-v0", "sac"): (50_000, {"hidden": (64, 64), "lr": 3e-4, "batch_size": 512,
                                                   "buffer_size": 50_000, "learning_starts": 0, "gamma": 0.9999,
                                                   "tau": 0.01, "train_freq": 32, "gradient_steps": 32,
                                                   "alpha": 0.1, "autotune": False, "sde": True,
                                                   "log_std_init": -3.67}, "SAC"),
}
#: SB3-side values that differ in name or unit only. rl-zoo's CartPole DQN syncs its target every 10 env
#: steps; SB3 checks that between env steps, so during each burst of 128 gradient steps the target is the
#: network as it was at the burst's start: pbmarl's interval counts updates, and 128 is the same schedule.
SB3_OVERRIDES: dict[tuple[str, str], dict[str, Any]] = {
    ("CartPole-v1", "dqn"): {"target_update_interval": 10},
    # rl-zoo trains TD3 and DDPG once per episode with as many steps as the episode had: Pendulum's episodes
    # are always 200 steps, so pbmarl's train_freq=200, gradient_steps=200 is the same schedule
    ("Pendulum-v1", "td3"): {"train_freq": [1, "episode"], "gradient_steps": -1, "learning_starts": 10_000},
    ("Pendulum-v1", "ddpg"): {"train_freq": [1, "episode"], "gradient_steps": -1, "learning_starts": 10_000},
}
DQN_OFF = {"double": False, "dueling": False, "n_step": 1, "prioritized": False, "noisy": False,
           "distributional": False}


# -- pbmarl ----------------------------------------------------------------------------------
def run_pbmarl(env: str, algo: str, seed: int, budget: int, precision: str = "float32") -> dict[str, float]:
    if algo == "ppo":
        return _run_pbmarl_ppo(env, seed, budget, CASES[(env, algo)][1])
    learner = make_pbmarl_learner(env, algo, seed, budget, precision)
    t0, c0 = time.perf_counter(), time.process_time()
    learner.run(progress=False)  # to the budget
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    returns = gymnasium_returns(env, lambda obs: learner.act(obs, deterministic=True), EVAL_SEEDS)
    return {"return": float(np.mean(returns)), "return_std": float(np.std(returns)),
            "seconds_per_1000": 1000 * seconds / learner.env_steps, "cpu_per_1000": 1000 * cpu / learner.env_steps,
            "env_steps": learner.env_steps}


def make_pbmarl_learner(env: str, algo: str, seed: int, budget: int, precision: str = "float32") -> Any:
    """The untrained off-policy learner of a case (``algo`` "dqn": a `Rainbow` with every part off), as every
    benchmark that trains a case builds it."""
    import pbmarl as pb

    name, options = algo, dict(CASES[(env, algo)][1])
    if algo == "dqn":
        name, options = "rainbow", {**options, **DQN_OFF}
    if algo == "ddpg" or algo == "td3":
        options["noise"] = "normal"
    cls = {"sac": pb.SAC, "td3": pb.TD3, "ddpg": pb.DDPG, "rainbow": pb.Rainbow}[name]
    return cls(pb.load_game(f"gym:{env}"), seed=seed, budget=budget, steps_per_round=budget // 10,
               num_threads=1, matmul_precision=precision, **options)


#: the evaluation, run as this text by both sides (SB3's side is a script in its own venv): `act` (raw
#: observation -> action) on Gymnasium's own environment, one episode per seed, each started with
#: ``reset(seed=s)``. (`learner.evaluate(seed=s)` draws its episodes' seeds from `s`: other start states.)
EVAL_LOOP = """
def gymnasium_returns(env_id, act, seeds):
    import gymnasium
    returns = []
    for s in seeds:
        e = gymnasium.make(env_id)
        obs, _ = e.reset(seed=s)
        total, over = 0.0, False
        while not over:
            obs, r, term, trunc, _ = e.step(act(obs))
            total += float(r)
            over = term or trunc
        returns.append(total)
    return returns
"""
_EVAL: dict[str, Any] = {}
exec(EVAL_LOOP, _EVAL)
gymnasium_returns: Callable[[str, Callable[[Any], Any], list[int]], list[float]] = _EVAL["gymnasium_returns"]


def _import_optimizer_machinery() -> None:
    """Construct one throwaway torch optimiser. torch's first `Optimizer.__init__` imports ``torch._dynamo``
    (about 1 s, once per process). SB3 builds its optimisers in its model's constructor, before its clock
    starts; pbmarl's PPO builds its own inside `best_response`, each task afresh, so without this its clock
    would carry that one-off import and SB3's would not (rows before 2026-11-27 19:00 did)."""
    import torch

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def _run_pbmarl_ppo(env: str, seed: int, budget: int, params: dict[str, Any]) -> dict[str, float]:
    """PPO is a best-response `Learner` (rounds through the rollout pool): trained with `best_response`, then
    evaluated greedily on the same reset seeds as SB3."""
    import pbmarl as pb

    game = pb.load_game(f"gym:{env}")
    learner = pb.PPO(game, seed=seed, budget=budget, num_threads=1, **params)
    _import_optimizer_machinery()
    t0, c0 = time.perf_counter(), time.process_time()
    policy = learner.best_response(0, [None])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    steps = int(learner.history["learner_steps"].iloc[-1])
    legal = np.ones((1, game.num_actions), bool)
    returns = gymnasium_returns(env, lambda raw: int(policy.action_probabilities(
        game.flatten_observation(raw)[None], legal)[0].argmax()), EVAL_SEEDS)
    return {"return": float(np.mean(returns)), "return_std": float(np.std(returns)),
            "seconds_per_1000": 1000 * seconds / steps, "cpu_per_1000": 1000 * cpu / steps, "env_steps": steps}


# -- Stable-Baselines3 (in its own venv) ---------------------------------------------------------
#: builds SB3's untrained ``model`` of a case from the JSON of `sb3_arguments` in ``sys.argv[1]``
SB3_MODEL = r"""
import json, sys, time
import numpy as np, torch, gymnasium as gym
torch.set_num_threads(1)
import stable_baselines3 as sb3
from stable_baselines3.common.noise import NormalActionNoise
env_id, algo, seed, budget, params, eval_seeds = json.loads(sys.argv[1])
env = gym.make(env_id)
if algo == "PPO":  # rl-zoo's CartPole-v1 PPO
    from stable_baselines3.common.env_util import make_vec_env
    env = make_vec_env(env_id, n_envs=params["num_envs"], seed=seed)
    lr, clip = params["lr"], params["clip_coef"]
    kw = dict(n_steps=params["steps_per_round"] // params["num_envs"], batch_size=params["steps_per_round"],
              gae_lambda=params["gae_lambda"], gamma=params["gamma"], n_epochs=params["epochs"],
              ent_coef=params["ent_coef"], learning_rate=lambda f: f * lr, clip_range=lambda f: f * clip,
              policy_kwargs={"net_arch": list(params["hidden"])}, seed=seed, device="cpu", verbose=0)
else:
    kw = dict(learning_rate=params["lr"], batch_size=params["batch_size"], gamma=params["gamma"], seed=seed,
              learning_starts=params["learning_starts"], policy_kwargs={"net_arch": list(params["hidden"])},
              device="cpu", verbose=0)
for ours, theirs in (("buffer_size", "buffer_size"), ("tau", "tau"), ("train_freq", "train_freq"),
                     ("gradient_steps", "gradient_steps"), ("target_update_interval", "target_update_interval"),
                     ("exploration_fraction", "exploration_fraction"), ("epsilon_end", "exploration_final_eps")):
    if ours in params:
        kw[theirs] = tuple(params[ours]) if isinstance(params[ours], list) else params[ours]
if params.get("sde"):  # gSDE (rl-zoo's MountainCarContinuous SAC), the same option on both sides
    kw["use_sde"] = True
    kw["policy_kwargs"]["log_std_init"] = params["log_std_init"]
if algo in ("TD3", "DDPG"):  # SB3 adds it to the action scaled to [-1, 1]: sigma is in half action ranges already
    kw["action_noise"] = NormalActionNoise(np.zeros(env.action_space.shape),
                                           params["noise_sigma"] * np.ones(env.action_space.shape))
if algo == "SAC" and "alpha" in params and not params.get("autotune", True):
    kw["ent_coef"] = params["alpha"]
model = getattr(sb3, algo)("MlpPolicy", env, **kw)
"""
SB3_SCRIPT = SB3_MODEL + r"""
t0, c0 = time.perf_counter(), time.process_time()
model.learn(total_timesteps=budget)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
returns = gymnasium_returns(env_id, lambda obs: model.predict(obs, deterministic=True)[0], eval_seeds)
print(json.dumps({"return": float(np.mean(returns)), "return_std": float(np.std(returns)),
                  "seconds_per_1000": 1000 * seconds / budget, "cpu_per_1000": 1000 * cpu / budget,
                  "env_steps": budget, "version": sb3.__version__}))
"""


def sb3_arguments(env: str, algo: str, seed: int, budget: int) -> str:
    """The JSON argument `SB3_MODEL` reads: SB3's algorithm, its settings for the case, the evaluation seeds."""
    _, params, sb3_algo = CASES[(env, algo)]
    if algo == "rainbow":  # SB3 has no Rainbow: the reference is its DQN with the DQN row's settings
        params, algo = CASES[(env, "dqn")][1], "dqn"
    params = {**params, **SB3_OVERRIDES.get((env, algo), {})}
    return json.dumps([env, sb3_algo, seed, budget, params, EVAL_SEEDS])


def run_sb3(python: str, env: str, algo: str, seed: int, budget: int) -> dict[str, Any]:
    arg = sb3_arguments(env, algo, seed, budget)
    out = subprocess.run([python, "-c", EVAL_LOOP + SB3_SCRIPT, arg], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"SB3 run failed ({env}/{algo}, seed {seed}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# -- the table -----------------------------------------------------------------------------------
def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(RESULTS)).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", default=None,
                        help="ENV/ALGO, e.g. Pendulum-v1/sac (repeatable); default: every case")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sb3-python", default="/work/venvs/sb3/bin/python")
    parser.add_argument("--side", choices=("both", "pbmarl", "sb3"), default="both",
                        help="run one side only (for rows longer than one ~12-minute slice of the shared machine: "
                             "the two sides then run in consecutive slices and the ratios are left blank)")
    parser.add_argument("--skip-sb3", action="store_true", help="same as --side pbmarl")
    parser.add_argument("--steps", type=int, default=None,
                        help="override every case's budget (a shorter, partial measurement; recorded in the CSV)")
    parser.add_argument("--matmul-precision", choices=PRECISIONS, default="float32",
                        help="pbmarl's matmul_precision for the off-policy learners (bfloat16: hidden-to-hidden "
                             "products in bfloat16 by autocast; medium: oneDNN's bfloat16 math mode; SB3 stays "
                             "float32; the command column records it)")
    args = parser.parse_args(argv)
    side = "pbmarl" if args.skip_sb3 else args.side
    wanted = {tuple(o.split("/", 1)) for o in args.only or ()}
    unknown = wanted - set(CASES)
    if unknown:
        known = ", ".join(f"{e}/{a}" for e, a in CASES)
        parser.error(f"unknown case(s) {sorted(unknown)}; known: {known}")
    cases = [c for c in CASES if not wanted or c in wanted]
    if args.matmul_precision != "float32" and any(a == "ppo" for _, a in cases):
        parser.error("--matmul-precision applies to the off-policy learners (SAC, TD3, DDPG, DQN, Rainbow), not PPO")
    command = "python benchmarks/control.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"{'env/algo':32} {'seed':>4} {'steps':>6} {'pbmarl return':>14} {'SB3 return':>11} {'diff':>8} "
          f"{'pbmarl s/1k':>11} {'SB3 s/1k':>9} {'time ratio':>10} {'pbmarl cpu/1k':>13} {'SB3 cpu/1k':>10} "
          f"{'cpu ratio':>9} {'load (1 min) before/after':>26}")
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    new_file = not os.path.exists(RESULTS) or os.path.getsize(RESULTS) == 0
    nan = float("nan")
    with open(RESULTS, "a", newline="") as fh:
        writer = csv.writer(fh)
        if new_file:
            writer.writerow(HEADER)
        for env, algo in cases:
            for seed in args.seeds:
                budget = args.steps or CASES[(env, algo)][0]
                load_before = os.getloadavg()[0]
                ours = run_pbmarl(env, algo, seed, budget, args.matmul_precision) if side != "sb3" else None
                ref = run_sb3(args.sb3_python, env, algo, seed, budget) if side != "pbmarl" else None
                load_after = os.getloadavg()[0]

                def get(out: dict[str, Any] | None, key: str) -> float:
                    return float(out[key]) if out else nan

                diff = get(ours, "return") - get(ref, "return")
                ratio = get(ours, "seconds_per_1000") / get(ref, "seconds_per_1000")
                cpu_ratio = get(ours, "cpu_per_1000") / get(ref, "cpu_per_1000")
                print(f"{env + '/' + algo:32} {seed:>4} {budget:>6} {get(ours, 'return'):>14.1f} "
                      f"{get(ref, 'return'):>11.1f} {diff:>8.1f} "
                      f"{get(ours, 'seconds_per_1000'):>11.2f} {get(ref, 'seconds_per_1000'):>9.2f} "
                      f"{ratio:>10.2f} {get(ours, 'cpu_per_1000'):>13.2f} {get(ref, 'cpu_per_1000'):>10.2f} "
                      f"{cpu_ratio:>9.2f} {load_before:>13.2f}/{load_after:<12.2f}", flush=True)

                def cell(value: float, digits: int = 3) -> Any:
                    return "" if value != value else round(value, digits)

                writer.writerow([datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                 _commit(), command, env, algo, seed, budget,
                                 cell(get(ours, "return"), 2), cell(get(ref, "return"), 2),
                                 cell(get(ours, "seconds_per_1000")), cell(get(ref, "seconds_per_1000")), cell(ratio),
                                 cell(get(ours, "cpu_per_1000")), cell(get(ref, "cpu_per_1000")), cell(cpu_ratio),
                                 round(load_before, 2), round(load_after, 2)])
                fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
