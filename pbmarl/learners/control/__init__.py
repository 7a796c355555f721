"""One-agent control learners: the `ControlLearner` base (`base`, its config and record in
`config`), `SAC`, `TD3`, `DDPG`, `HDDPG`, `Rainbow`, `ApeXDDPG` (`apex_ddpg`); `rounds` (any of them on a
parameter server, ``workers > 1``); `step_env` (the one-agent environment
they step), `critics` (stacked twin critics) and `seat_oracle` (a control learner answering
for one seat of a multi-seat game, through `pbmarl.learners.multiagent.independent`).
"""
