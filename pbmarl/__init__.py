"""pbmarl: population-based multi-agent RL (PSRO and relatives), stepped from notebooks.

    import pbmarl as pb
    game = pb.load_game("kuhn_poker")
    psro = pb.PSRO(game, solver="nash")
    for record in psro.run(10):
        print(record)

Names are imported lazily: ``import pbmarl`` loads neither torch nor Ray.
"""

from __future__ import annotations

from pbmarl._version import __version__
from pbmarl.lazy import lazy_exports

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # games
    "MatrixGame": "pbmarl.games.matrix",
    "load_game": "pbmarl.games.registry",
    # policies
    "RandomPolicy": "pbmarl.policies.simple",
    "TabularPolicy": "pbmarl.policies.tabular",
    "Mixture": "pbmarl.policies.mixture",
    "MLPPolicy": "pbmarl.policies.neural",
    "GaussianPolicy": "pbmarl.policies.continuous",
    "DeterministicPolicy": "pbmarl.policies.continuous",
    "noise": "pbmarl.policies",
    # data
    "Population": "pbmarl.population",
    "PayoffTable": "pbmarl.payoffs",
    # solvers
    "MetaSolver": "pbmarl.solvers",
    # evaluation
    "ExactEvaluator": "pbmarl.evaluation",
    "exploitability": "pbmarl.evaluation",
    "to_openspiel_policy": "pbmarl.evaluation",
    "RolloutPool": "pbmarl.rollout",
    "EvalResult": "pbmarl.rollout",
    "init_ray": "pbmarl.hosting",
    "AgentMapping": "pbmarl.rollout.mapping",
    # learners
    "ExactBestResponse": "pbmarl.learners.oracles.exact",
    "DQN": "pbmarl.learners",
    "PPO": "pbmarl.learners",
    "A2C": "pbmarl.learners",
    "SAC": "pbmarl.learners.control.sac",
    "TD3": "pbmarl.learners.control.td3",
    "DDPG": "pbmarl.learners.control.ddpg",
    "HDDPG": "pbmarl.learners.control.hddpg",
    "Rainbow": "pbmarl.learners.control.rainbow",
    # every run
    "Stop": "pbmarl.runs",
    "load_run": "pbmarl.runs",
    # experiments: grids of runs on Ray Tune, trackers, statistics
    "Experiment": "pbmarl.experiments",
    "spec": "pbmarl.experiments",
    "compare": "pbmarl.experiments.stats",
    # faces
    # algorithms
    "PSRO": "pbmarl.algorithms",
    "SelfPlay": "pbmarl.algorithms",
    "FictitiousPlay": "pbmarl.algorithms",
    "XDO": "pbmarl.algorithms.xdo",
    "MMD": "pbmarl.algorithms.mmd",
    "PPOSelfPlay": "pbmarl.algorithms.selfplay.ppo",
    "DeepMMD": "pbmarl.algorithms.selfplay.deep_mmd",
    "JPSRO": "pbmarl.algorithms.jpsro",
    "sequence_form_lp": "pbmarl.evaluation.sequence_form",
    "League": "pbmarl.algorithms.league.league",
    "NFSP": "pbmarl.algorithms.nfsp",
    "P2SRO": "pbmarl.algorithms.psro.p2sro",
    "MARL": "pbmarl.algorithms.teams.marl",
    "MAPPO": "pbmarl.learners.multiagent.mappo",
    "QMIX": "pbmarl.learners.multiagent.qmix",
    "MADDPG": "pbmarl.learners.multiagent.maddpg",
    "A3C": "pbmarl.learners.oracles.a3c",
    "IMPALA": "pbmarl.learners.oracles.impala",
    "ApeX": "pbmarl.learners.oracles.apex",
}

#: the subpackages a notebook reaches one dot deeper (configs, records, helpers): ``pb.learners.DQNConfig``
_SUBPACKAGES = ("algorithms", "config", "envs", "evaluation", "experiments", "games", "hosting", "learners",
                "payoffs", "plots", "policies", "population", "protocols", "rl", "rollout", "runs", "solvers",
                "widgets")

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__, subpackages=_SUBPACKAGES)
