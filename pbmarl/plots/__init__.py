"""Plots of runs and payoff tables; every function returns its matplotlib `Figure`.

| function | draws |
| --- | --- |
| `plot_exploitability` | exploitability / NashConv against iteration, wall time or env steps; runs overlaid |
| `plot_population` | population size per player against iteration |
| `plot_meta_strategy` | each player's meta-strategy over time, stacked per member |
| `plot_meta_strategy_bars` | one meta-strategy (or several, side by side) as bars |
| `plot_payoff_heatmap` | a two-player payoff table, with standard errors |
| `plot_response_graph` | alpha-rank's response graph of a payoff table |
| `plot_simplex` | paths of three-strategy distributions on the simplex (replicator dynamics) |
| `plot_against_lp` | PSRO / XDO exploitability overlaid with the sequence-form LP's exact line |
| `plot_jpsro_gap` | JPSRO's summed (C)CE gap per iteration or wall time |

Figures are not registered with pyplot: in a notebook, a cell that returns one shows it
once; elsewhere, ``fig.savefig(path)``.
"""

from pbmarl.plots.curves import plot_exploitability, plot_meta_strategy, plot_meta_strategy_bars, plot_population
from pbmarl.plots.game_theory import plot_against_lp, plot_jpsro_gap
from pbmarl.plots.response_graph import plot_response_graph
from pbmarl.plots.simplex import plot_simplex
from pbmarl.plots.tables import plot_payoff_heatmap

__all__ = ["plot_against_lp", "plot_exploitability", "plot_jpsro_gap", "plot_meta_strategy", "plot_meta_strategy_bars",
           "plot_payoff_heatmap", "plot_population", "plot_response_graph", "plot_simplex"]
