"""Meta-solvers: payoff array (n_1, ..., n_k, k) -> one distribution per player.

Pure functions over ndarrays live in small modules; `MetaSolver` and `MetaStrategy`
are the thin objects a notebook holds::

    sigma = MetaSolver("nash")(table)      # "uniform", "last", "nash", "prd", "rm", "mmd", "alpharank", "rectified_nash"
    sigma[0], sigma.nash_conv, sigma.to_frame()
"""

from pbmarl.solvers.alpharank import alpharank_profiles, solve_alpharank
from pbmarl.solvers.bimatrix import LemkeHowsonFailure, PivotLimitReached, lemke_howson
from pbmarl.solvers.dynamics import (
    fictitious_play,
    magnetic_mirror_descent,
    project_simplex,
    projected_replicator_dynamics,
    regret_matching,
    solve_fictitious_play,
    solve_mmd,
    solve_prd,
    solve_rm,
)
from pbmarl.solvers.inputs import DistributionsLike, PayoffLike, as_payoff_array, check_distributions, read_table
from pbmarl.solvers.logit_path import logit_path_nash
from pbmarl.solvers.metasolver import SOLVERS, MetaSolver
from pbmarl.solvers.metastrategy import MetaStrategy
from pbmarl.solvers.nash import bimatrix_nash, nash_equilibrium, nplayer_nash, solve_nash
from pbmarl.solvers.nashconv import deviation_payoffs, expected_payoffs, meta_nash_conv, meta_regrets
from pbmarl.solvers.nplayer import iterative_nash
from pbmarl.solvers.rectified import rectified_nash, rectified_opponents
from pbmarl.solvers.result import SolverError, SolverResult
from pbmarl.solvers.simple import solve_last, solve_uniform
from pbmarl.solvers.subgame import subgame_nash
from pbmarl.solvers.zerosum import is_constant_sum, solve_zero_sum

__all__ = [
    "SOLVERS",
    "DistributionsLike",
    "LemkeHowsonFailure",
    "MetaSolver",
    "MetaStrategy",
    "PayoffLike",
    "PivotLimitReached",
    "SolverError",
    "SolverResult",
    "alpharank_profiles",
    "as_payoff_array",
    "bimatrix_nash",
    "check_distributions",
    "deviation_payoffs",
    "expected_payoffs",
    "fictitious_play",
    "is_constant_sum",
    "iterative_nash",
    "lemke_howson",
    "logit_path_nash",
    "magnetic_mirror_descent",
    "meta_nash_conv",
    "meta_regrets",
    "nash_equilibrium",
    "nplayer_nash",
    "project_simplex",
    "projected_replicator_dynamics",
    "read_table",
    "rectified_nash",
    "rectified_opponents",
    "regret_matching",
    "solve_alpharank",
    "solve_fictitious_play",
    "solve_last",
    "solve_mmd",
    "solve_nash",
    "solve_prd",
    "solve_rm",
    "solve_uniform",
    "solve_zero_sum",
    "subgame_nash",
]
