"""Exact evaluation: payoff tables, best responses and NashConv from the whole game tree.

`pbmarl.evaluation.realization` turns policies into realisation plans,
`pbmarl.evaluation.engine` holds the pure ndarray maths over a `GameTree`,
`ExactEvaluator` wraps both with a per-policy cache, and `to_openspiel_policy`
hands a meta-strategy mixture to OpenSpiel's own tools.
"""

from pbmarl.evaluation.exact import ExactEvaluator, Exploitability, as_profile, exploitability
from pbmarl.evaluation.openspiel_bridge import to_openspiel_policy

__all__ = ["ExactEvaluator", "Exploitability", "as_profile", "exploitability", "to_openspiel_policy"]
