"""pbmarl: population-based multi-agent RL (PSRO and relatives), stepped from notebooks.

    import pbmarl as pb
    game = pb.load_game("kuhn_poker")
    psro = pb.PSRO(game, solver="nash")
    for record in psro.run(10):
        print(record)

Names are imported lazily: ``import pbmarl`` loads neither torch nor Ray.
"""

from __future__ import annotations

from typing import Any

from pbmarl._version import __version__
from pbmarl.lazy import lazy_exports

#: public name -> module that defines it, or the subpackage that exports it (and says where it lives)
_EXPORTS: dict[str, str] = {
    # games
    "MatrixGame": "pbmarl.games.matrix",
    "load_game": "pbmarl.games.registry",
    # policies
    "RandomPolicy": "pbmarl.policies.simple",
    "TabularPolicy": "pbmarl.policies.tabular",
    "Mixture": "pbmarl.policies.mixture",
    "MLPPolicy": "pbmarl.policies.neural",
    # data
    "Population": "pbmarl.population",
    "PayoffTable": "pbmarl.payoffs",
    # solvers
    "MetaSolver": "pbmarl.solvers",
    # evaluation
    "ExactEvaluator": "pbmarl.evaluation",
    "exploitability": "pbmarl.evaluation",
    "RolloutPool": "pbmarl.rollout",
    "EvalResult": "pbmarl.rollout",
    "init_ray": "pbmarl.hosting",
    "AgentMapping": "pbmarl.rollout.mapping",
    # learners
    "ExactBestResponse": "pbmarl.learners.oracles.exact",
    "DQN": "pbmarl.learners",
    "PPO": "pbmarl.learners",
    "A2C": "pbmarl.learners",
    "SAC": "pbmarl.learners",
    "TD3": "pbmarl.learners",
    "DDPG": "pbmarl.learners",
    "HDDPG": "pbmarl.learners",
    "Rainbow": "pbmarl.learners",
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
    "XDO": "pbmarl.algorithms",
    "MMD": "pbmarl.algorithms",
    "PPOSelfPlay": "pbmarl.algorithms",
    "DeepMMD": "pbmarl.algorithms",
    "JPSRO": "pbmarl.algorithms",
    "sequence_form_lp": "pbmarl.evaluation.sequence_form",
    "League": "pbmarl.algorithms",
    "NFSP": "pbmarl.algorithms",
    "P2SRO": "pbmarl.algorithms",
    "MARL": "pbmarl.algorithms",
    "MAPPO": "pbmarl.learners",
    "QMIX": "pbmarl.learners",
    "MADDPG": "pbmarl.learners",
    "A3C": "pbmarl.learners",
    "IMPALA": "pbmarl.learners",
    "ApeX": "pbmarl.learners",
}

#: the subpackages a notebook reaches one dot deeper (configs, records, helpers): ``pb.learners.DQNConfig``
_SUBPACKAGES = ("algorithms", "config", "envs", "evaluation", "experiments", "games", "hosting", "learners",
                "payoffs", "plots", "policies", "population", "protocols", "rl", "rollout", "runs", "solvers",
                "widgets")

#: names that left the top level (a notebook rarely types them) -> where they live now; ``pb.NAME`` says so
_MOVED: dict[str, str] = {
    "GaussianPolicy": "pbmarl.policies",
    "DeterministicPolicy": "pbmarl.policies",
    "noise": "pbmarl.policies",
    "to_openspiel_policy": "pbmarl.evaluation",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


_lazy_getattr, __dir__ = lazy_exports(globals(), _EXPORTS, __all__, subpackages=_SUBPACKAGES)


def __getattr__(name: str) -> Any:
    """A public name or subpackage, loaded on first access; ``pb.plot_...`` and a moved name say where they live."""
    if name in _MOVED:
        where = _MOVED[name]
        raise AttributeError(f"module 'pbmarl' has no attribute {name!r}: pbmarl.{name} moved to {where}.{name} "
                             f"(`from {where} import {name}` or `pb.{where.split('.', 1)[1]}.{name}`)")
    if name.startswith("plot_"):
        from pbmarl.plots import __all__ as plots

        known = f"`from pbmarl.plots import {name}` or `pb.plots.{name}(...)`" if name in plots else (
            f"which has {', '.join(plots)}")
        raise AttributeError(f"module 'pbmarl' has no attribute {name!r}: the plots live in pbmarl.plots, {known}")
    return _lazy_getattr(name)
