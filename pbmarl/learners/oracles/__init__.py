"""Best-response oracles for turn-based games: the `Learner` base (`base`: one task per
``best_response``, rounds, save/load through `files`), `DQN`, `PPO`, `A2C` and the exact
best response (`exact`, no torch); the actor-learner set-ups built on them, `A3C` (`a3c`),
`IMPALA` (`impala`, V-trace) and `ApeX` (`apex`, a central prioritised replay), which run on
`pbmarl.distributed`'s infrastructure.

A learner here answers PSRO's ``respond(player, opponents)`` by training against a mixture
of opponents (`task.Task`), each task starting from fresh networks.
"""
