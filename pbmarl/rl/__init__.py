"""The maths of reinforcement learning, as pure functions over arrays and tensors (rlax style).

Each function states its equation in its docstring, cites its source, checks shapes on entry and
has its own test file (tests/test_rl_<module>.py). The learners call these; nothing here imports
a learner, a game or a rollout.

* `multistep`: GAE, discounted returns, n-step targets.
* `vtrace`: V-trace targets and policy-gradient advantages (IMPALA).
* `value_learning`: the C51 projection, double-Q targets, the hysteretic TD loss.
* `policy_gradients`: the PPO clipped surrogate.
* `polyak`: Polyak averaging of target networks.
* `schedules`: linear schedules over training progress.
"""
