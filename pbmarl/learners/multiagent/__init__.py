"""Group learners for multi-agent games: the `GroupLearner` base (`group`), `MAPPO`/`IPPO`/`RMAPPO`
(`mappo`), `QMIX`/`IQL`/VDN (`qmix`, mixing networks in `mixers`), `MADDPG` (`maddpg`) and
`Independent` (`independent`: one single-agent control learner per group), with `episode_batch`
(episodes as ``[episode, time]`` grids for recurrent unrolls).
"""
