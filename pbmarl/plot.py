"""Plots over history DataFrames and payoff tables; each function returns its figure.

The functions live in `pbmarl.plots`; this module is their short public address::

    from pbmarl.plot import plot_exploitability, plot_payoff_heatmap
    plot_exploitability({"nash": a.history, "uniform": b.history}, x="wall_time")
"""

from pbmarl.plots import (
    plot_against_lp,
    plot_exploitability,
    plot_jpsro_gap,
    plot_meta_strategy,
    plot_meta_strategy_bars,
    plot_payoff_heatmap,
    plot_population,
    plot_response_graph,
    plot_simplex,
)

__all__ = ["plot_against_lp", "plot_exploitability", "plot_jpsro_gap", "plot_meta_strategy", "plot_meta_strategy_bars",
           "plot_payoff_heatmap", "plot_population", "plot_response_graph", "plot_simplex"]
