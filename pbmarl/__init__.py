"""pbmarl: population-based multi-agent RL (PSRO and relatives), stepped from notebooks.

    import pbmarl as pb
    game = pb.load_game("kuhn_poker")
    psro = pb.PSRO(game, solver="nash")
    for record in psro.run(10):
        print(record)

Names are imported lazily: ``import pbmarl`` loads neither torch nor Ray.
"""

from __future__ import annotations

import importlib
from typing import Any

from pbmarl._version import __version__

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # games
    "Game": "pbmarl.games.base",
    "VecEnv": "pbmarl.games.stepper",
    "MatrixGame": "pbmarl.games.matrix",
    "load_game": "pbmarl.games.registry",
    # policies
    "Policy": "pbmarl.policies.base",
    "RandomPolicy": "pbmarl.policies.simple",
    "FixedPolicy": "pbmarl.policies.simple",
    "TabularPolicy": "pbmarl.policies.tabular",
    "Mixture": "pbmarl.policies.mixture",
    "MLPPolicy": "pbmarl.policies.neural",
    "GaussianPolicy": "pbmarl.policies.continuous",
    "DeterministicPolicy": "pbmarl.policies.continuous",
    "ActionOutput": "pbmarl.policies.base",
    "noise": "pbmarl.policies",
    # data
    "Population": "pbmarl.population",
    "PayoffTable": "pbmarl.payoffs",
    # solvers
    "MetaSolver": "pbmarl.solvers",
    "MetaStrategy": "pbmarl.solvers",
    "meta_nash_conv": "pbmarl.solvers",
    "SolverError": "pbmarl.solvers",
    # evaluation
    "ExactEvaluator": "pbmarl.evaluation",
    "exploitability": "pbmarl.evaluation",
    "to_openspiel_policy": "pbmarl.evaluation",
    "RolloutPool": "pbmarl.rollout",
    "EvalResult": "pbmarl.rollout",
    "FillResult": "pbmarl.rollout",
    "Trajectories": "pbmarl.rollout",
    "init_ray": "pbmarl.hosting",
    "RayHeadLost": "pbmarl.hosting.liveness",
    "AgentMapping": "pbmarl.rollout.mapping",
    # learners
    "ExactBestResponse": "pbmarl.learners.oracles.exact",
    "DQN": "pbmarl.learners",
    "PPO": "pbmarl.learners",
    "A2C": "pbmarl.learners",
    "DQNConfig": "pbmarl.learners",
    "PPOConfig": "pbmarl.learners",
    "A2CConfig": "pbmarl.learners",
    "make_learner": "pbmarl.learners",
    "SAC": "pbmarl.learners.control.sac",
    "TD3": "pbmarl.learners.control.td3",
    "DDPG": "pbmarl.learners.control.ddpg",
    "HDDPG": "pbmarl.learners.control.hddpg",
    "Rainbow": "pbmarl.learners.control.rainbow",
    "SACConfig": "pbmarl.learners.control.sac",
    "TD3Config": "pbmarl.learners.control.td3",
    "DDPGConfig": "pbmarl.learners.control.ddpg",
    "HDDPGConfig": "pbmarl.learners.control.hddpg",
    "RainbowConfig": "pbmarl.learners.control.rainbow",
    # every run
    "Stop": "pbmarl.runs",
    "load_run": "pbmarl.runs",
    # experiments: grids of runs on Ray Tune, trackers, statistics
    "Experiment": "pbmarl.experiments",
    "spec": "pbmarl.experiments",
    "RunSpec": "pbmarl.experiments",
    "compare": "pbmarl.experiments.stats",
    "CSVLogger": "pbmarl.experiments",
    "TensorBoardLogger": "pbmarl.experiments",
    "MLflowLogger": "pbmarl.experiments",
    "WandbLogger": "pbmarl.experiments",
    # faces
    "Dashboard": "pbmarl.widgets",
    "TableExplorer": "pbmarl.widgets",
    # algorithms
    "PSRO": "pbmarl.algorithms",
    "Oracle": "pbmarl.protocols",
    "Evaluator": "pbmarl.protocols",
    "BestResponse": "pbmarl.protocols",
    "SelfPlay": "pbmarl.algorithms",
    "FictitiousPlay": "pbmarl.algorithms",
    "XDO": "pbmarl.algorithms.xdo",
    "MMD": "pbmarl.algorithms.mmd",
    "PPOSelfPlay": "pbmarl.algorithms.selfplay.ppo",
    "DeepMMD": "pbmarl.algorithms.selfplay.deep_mmd",
    "JPSRO": "pbmarl.algorithms.jpsro",
    "sequence_form_lp": "pbmarl.evaluation.sequence_form",
    "League": "pbmarl.algorithms.league.league",
    "LeagueConfig": "pbmarl.algorithms.league.rules",
    "WinRateTable": "pbmarl.algorithms.league.win_rates",
    "pfsp": "pbmarl.algorithms.league.pfsp",
    "NFSP": "pbmarl.algorithms.nfsp",
    "NFSPConfig": "pbmarl.algorithms.nfsp",
    "P2SRO": "pbmarl.algorithms.psro.p2sro",
    "ParallelOracle": "pbmarl.algorithms.psro.parallel_oracle",
    "Target": "pbmarl.algorithms.psro.targets",
    "TargetSelector": "pbmarl.algorithms.psro.targets",
    "MARL": "pbmarl.algorithms.teams.marl",
    "MARLRecord": "pbmarl.algorithms.teams.marl",
    "MAPPO": "pbmarl.learners.multiagent.mappo",
    "IPPO": "pbmarl.learners.multiagent.mappo",
    "RMAPPO": "pbmarl.learners.multiagent.mappo",
    "MAPPOConfig": "pbmarl.learners.multiagent.mappo",
    "QMIX": "pbmarl.learners.multiagent.qmix",
    "IQL": "pbmarl.learners.multiagent.qmix",
    "QMIXConfig": "pbmarl.learners.multiagent.qmix",
    "MADDPG": "pbmarl.learners.multiagent.maddpg",
    "MADDPGConfig": "pbmarl.learners.multiagent.maddpg",
    "GroupOracle": "pbmarl.algorithms.teams.oracle",
    "Independent": "pbmarl.learners.multiagent.independent",
    "IndependentConfig": "pbmarl.learners.multiagent.independent",
    "independent_learners": "pbmarl.learners.multiagent.independent",
    "TeamGame": "pbmarl.algorithms.teams.team_game",
    "TeamEvaluator": "pbmarl.algorithms.teams.team_game",
    "team_psro": "pbmarl.algorithms.teams.oracle",
    "A3C": "pbmarl.learners.oracles.a3c",
    "IMPALA": "pbmarl.learners.oracles.impala",
    "IMPALAConfig": "pbmarl.learners.oracles.impala",
    "vtrace": "pbmarl.rl.vtrace",
    "ApeX": "pbmarl.learners.oracles.apex",
    "ApeXConfig": "pbmarl.learners.oracles.apex",
    "apex_epsilons": "pbmarl.learners.oracles.apex",
    "ApeXDDPG": "pbmarl.learners.control.apex_ddpg",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pbmarl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
