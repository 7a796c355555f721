"""Batched numpy environments: every copy of an environment a rollout worker holds, stepped in one call.

* `pbmarl.envs.instances`: one real environment object per copy (`EnvInstance`, `make_instance`);
* `pbmarl.envs.batch`: `BatchEnv` and the steppers ``RolloutPool(..., stepper=...)`` picks from;
* `pbmarl.envs.classic_control`: numpy ports of Gymnasium's classic control (``Pendulum-v1``);
* `pbmarl.envs.mpe`: numpy ports of mpe2's particle worlds (``simple_spread_v3`` and relatives).

Each port gives the same states, observations, rewards and flags as the original for the same
seed (`tests/test_env_batch.py`). The rollout engines (`pbmarl.rollout`) step these; nothing
here imports the rollout layer.
"""
