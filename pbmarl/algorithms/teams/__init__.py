"""The multi-agent teams family: MARL runs of learning groups, and teams as PSRO players.

- `marl`: `MARL`, the driver (groups of agents, each trained by a group learner);
- `records`: `MARLConfig` and `MARLRecord`;
- `rounds`: `MARLRounds`, a MARL step on the parameter server (the learners' ``workers > 1``);
- `team_game`: `TeamGame` and `TeamEvaluator` (a multi-agent game seen as a game between teams);
- `oracle`: `GroupOracle` (a group learner as a PSRO best response) and `team_psro`.
"""
