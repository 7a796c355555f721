"""Plots: each returns a Figure holding the data it was given; bad input raises a clear error."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import pbmarl as pb
from pbmarl.plots import (
    plot_exploitability,
    plot_meta_strategy,
    plot_meta_strategy_bars,
    plot_payoff_heatmap,
    plot_population,
    plot_response_graph,
    plot_simplex,
)

RPS = [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]


def _history(iterations: int = 4) -> pd.DataFrame:
    """A history shaped like `PSRO.history`: one member per player per iteration."""
    rows = []
    for it in range(iterations):
        n = it + 1
        sigma = np.zeros(n)
        sigma[-2:] = 1.0 / min(n, 2)
        rows.append({
            "iteration": it, "nash_conv": 1.0 / (it + 1), "exploitability": 0.5 / (it + 1) if it else None,
            "meta_nash_conv": 0.0, "wall_time": 0.1 * it, "env_steps": 1000 * it,
            "size_0": n, "size_1": n, "sigma_0": sigma.tolist(), "sigma_1": sigma[::-1].tolist(),
        })
    return pd.DataFrame(rows).set_index("iteration")


# -- exploitability --------------------------------------------------------------------
def test_exploitability_one_run_skips_unmeasured_rows() -> None:
    fig = plot_exploitability(_history(5))
    assert isinstance(fig, Figure)
    (line,) = fig.axes[0].lines
    assert list(line.get_xdata()) == [1, 2, 3, 4]  # iteration 0 was not measured
    np.testing.assert_allclose(line.get_ydata(), [0.25, 0.5 / 3, 0.125, 0.1])
    assert fig.axes[0].get_yscale() == "log"


@pytest.mark.parametrize("x", ["iteration", "wall_time", "env_steps"])
def test_exploitability_overlays_runs_against_each_x(x: str) -> None:
    runs = {"nash": _history(4), "uniform": _history(6)}
    fig = plot_exploitability(runs, x=x, y="nash_conv", log=False, reference={"CFR+": 0.05})
    ax = fig.axes[0]
    curves = [line for line in ax.lines if line.get_label() in runs]
    assert [len(line.get_xdata()) for line in curves] == [4, 6]
    assert ax.get_yscale() == "linear"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["nash", "uniform", "CFR+"]
    if x == "env_steps":
        assert curves[1].get_xdata()[-1] == 5000


def test_approx_nash_conv_sums_the_next_best_responses_values(tmp_path) -> None:
    history = _history(4).assign(br_values=[[], [0.3, 0.2], [0.1, 0.05], [0.02, 0.01]])
    line = plot_exploitability(history, y="approx_nash_conv", log=False).axes[0].lines[0]
    # iteration t's meta-strategy is answered by iteration t+1's best responses
    assert list(line.get_xdata()) == [0, 1, 2]
    np.testing.assert_allclose(line.get_ydata(), [0.5, 0.15, 0.03])
    history.to_csv(tmp_path / "history.csv")
    again = plot_exploitability(pd.read_csv(tmp_path / "history.csv", index_col="iteration"), y="approx_nash_conv")
    np.testing.assert_allclose(again.axes[0].lines[0].get_ydata(), [0.5, 0.15, 0.03])
    with pytest.raises(ValueError, match="no 'br_values' column"):
        plot_exploitability(_history(), y="approx_nash_conv")


def test_exploitability_says_which_runs_drew_the_same_curve() -> None:
    """Seeds of an exact-oracle run cannot differ: the legend says a curve repeats an earlier one, not only its colour."""
    other = _history(4)
    other.loc[3, "exploitability"] = 0.2  # differs at its last point
    runs = {"seed 0": _history(4), "seed 1": _history(4), "seed 2": other}
    labels = [text.get_text() for text in plot_exploitability(runs).axes[0].get_legend().get_texts()]
    assert labels == ["seed 0", "seed 1 (same curve as 'seed 0')", "seed 2"]


def test_exploitability_log_scale_keeps_zero_visible() -> None:
    history = _history(3)
    history.loc[2, "exploitability"] = 0.0
    line = plot_exploitability(history).axes[0].lines[0]
    assert line.get_ydata()[-1] > 0


def test_exploitability_log_x_drops_the_point_at_zero() -> None:
    ax = plot_exploitability(_history(5), x="wall_time", y="nash_conv", logx=True).axes[0]
    assert ax.get_xscale() == "log"
    np.testing.assert_allclose(ax.lines[0].get_xdata(), [0.1, 0.2, 0.3, 0.4])


def test_exploitability_draws_into_given_axes() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    assert plot_exploitability(_history(), ax=ax) is fig
    assert len(ax.lines) == 1


def test_exploitability_bad_input() -> None:
    with pytest.raises(ValueError, match="x must be one of"):
        plot_exploitability(_history(), x="time")
    with pytest.raises(ValueError, match="y must be one of"):
        plot_exploitability(_history(), y="loss")
    with pytest.raises(ValueError, match="no 'exploitability' values"):
        plot_exploitability(_history().assign(exploitability=None))
    with pytest.raises(ValueError, match="'b' has no 'wall_time' column"):
        plot_exploitability({"a": _history(), "b": _history().drop(columns="wall_time")}, x="wall_time")
    with pytest.raises(TypeError, match="DataFrame"):
        plot_exploitability([1, 2, 3])
    with pytest.raises(ValueError, match="reference 'x'"):
        plot_exploitability(_history(), reference={"x": float("nan")})


# -- population and meta-strategies --------------------------------------------------------------
def test_population_one_step_line_per_player() -> None:
    ax = plot_population(_history(5)).axes[0]
    assert len(ax.lines) == 2
    assert list(ax.lines[0].get_ydata()) == [1, 2, 3, 4, 5]


def test_population_needs_size_columns() -> None:
    with pytest.raises(ValueError, match="size_0"):
        plot_population(_history().drop(columns=["size_0", "size_1"]))


def test_meta_strategy_one_band_per_member_padded_with_zeros() -> None:
    fig = plot_meta_strategy(_history(4))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(ax.collections) == 4  # members p*/0 .. p*/3
    # band 0's top edge: member 0 holds all mass at iteration 0, none once two later members share it
    top = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert top.max() == pytest.approx(1.0) and top.min() == pytest.approx(0.0)


def test_meta_strategy_reads_sigma_written_to_csv(tmp_path) -> None:
    path = tmp_path / "history.csv"
    _history(3).to_csv(path)
    fig = plot_meta_strategy(pd.read_csv(path, index_col="iteration"), players=1, title="from a CSV")
    assert len(fig.axes) == 1 and len(fig.axes[0].collections) == 3
    assert fig.axes[0].get_title() == "from a CSV" and fig.get_suptitle() == ""


def test_meta_strategy_bad_input() -> None:
    with pytest.raises(ValueError, match="player 2 is out of range"):
        plot_meta_strategy(_history(), players=2)
    with pytest.raises(ValueError, match="not a distribution"):
        plot_meta_strategy(_history().assign(sigma_0=[[1.0], [-1.0, 2.0], [0.5, 0.5, 0], [1, 0, 0, 0]]))
    with pytest.raises(ValueError, match="empty"):
        plot_meta_strategy(_history().iloc[:0])
    with pytest.raises(ValueError, match="one player"):
        plot_meta_strategy(_history(), ax=Figure().add_subplot())


def test_meta_strategy_bars_compare_solvers_side_by_side() -> None:
    strategies = {"a": [[0.5, 0.5, 0.0], [1.0, 0.0]], "b": _history(3).iloc[[0, 1]].assign(
        sigma_0=[[1.0], [0.2, 0.8, 0.0]], sigma_1=[[1.0], [0.0, 1.0]])}
    ax = plot_meta_strategy_bars(strategies).axes[0]
    assert len(ax.patches) == 2 * 5  # two labels x (3 + 2) members
    heights = [p.get_height() for p in ax.patches]
    assert heights[:5] == [0.5, 0.5, 0.0, 1.0, 0.0]
    assert heights[5:] == pytest.approx([0.2, 0.8, 0.0, 0.0, 1.0])


def test_meta_strategy_bars_bad_input() -> None:
    with pytest.raises(ValueError, match="same sizes"):
        plot_meta_strategy_bars({"a": [[1.0], [1.0]], "b": [[0.5, 0.5], [1.0]]})
    with pytest.raises(ValueError, match="not a distribution"):
        plot_meta_strategy_bars([[0.5, 0.6], [1.0]])
    with pytest.raises(ValueError, match="no iteration 9"):
        plot_meta_strategy_bars(_history(), iteration=9)


# -- payoff tables ---------------------------------------------------------------------------
def test_heatmap_of_a_table_shows_values_and_stderr() -> None:
    game = pb.MatrixGame(RPS)
    pop = pb.Population(game)
    for _ in range(3):
        pop.add(0, pb.RandomPolicy(game))
    for _ in range(2):
        pop.add(1, pb.RandomPolicy(game))
    table = pb.PayoffTable(pop)
    table.update((0, 0), [[1.0, -1.0], [0.0, 0.0], [-1.0, 1.0]])
    table.set_exact((1, 1), [0.5, -0.5])
    fig = plot_payoff_heatmap(table, player=0, highlight=(1, 1))
    ax = fig.axes[0]
    image = ax.images[0].get_array()
    assert image.shape == (3, 2)
    assert image.mask.sum() == 4  # never-evaluated cells are masked (grey)
    texts = [t.get_text() for t in ax.texts]
    assert "0\n±0.58" in texts and "0.5" in texts and texts.count("—") == 4
    assert len(ax.patches) == 1  # the highlight
    assert len(fig.axes) == 2  # with its colorbar


def test_heatmap_of_player_one_from_array_and_frame() -> None:
    table = pb.PayoffTable.from_array(RPS)
    ax = plot_payoff_heatmap(table, player=1, colorbar=False).axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), -np.asarray(RPS, float))
    ax = plot_payoff_heatmap(table.matrix(0), annotate=False).axes[0]
    assert ax.images[0].get_array().shape == (3, 3) and not ax.texts
    assert plot_payoff_heatmap(np.ones((2, 4))).axes[0].images[0].get_array().shape == (2, 4)


def test_heatmap_bad_input() -> None:
    three = pb.PayoffTable.from_array(np.zeros((2, 2, 2, 3)))
    with pytest.raises(ValueError, match="two-player table; this one has 3 players"):
        plot_payoff_heatmap(three)
    with pytest.raises(ValueError, match="player must be 0 or 1, got 2"):
        plot_payoff_heatmap(pb.PayoffTable.from_array(RPS), player=2)
    with pytest.raises(ValueError, match="shape \\(3,\\)"):
        plot_payoff_heatmap([1, 2, 3])
    with pytest.raises(ValueError, match="outside the 3x3 table"):
        plot_payoff_heatmap(pb.PayoffTable.from_array(RPS), highlight=(3, 0))


def test_response_graph_of_rock_paper_scissors() -> None:
    ax = plot_response_graph(pb.PayoffTable.from_array(RPS)).axes[0]
    # every profile has one improving deviation for each player: 9 profiles x 2
    assert len(ax.patches) == 18
    (nodes,) = ax.collections
    assert len(nodes.get_offsets()) == 9
    # the cycle is symmetric: every profile gets the same alpha-rank mass
    np.testing.assert_allclose(nodes.get_array(), 1 / 9)


def test_response_graph_puts_mass_on_the_dominant_profile() -> None:
    # prisoner's dilemma: (defect, defect) = (1, 1) is the only sink
    pd_payoffs = np.array([[[3, 3], [0, 5]], [[5, 0], [1, 1]]], dtype=float)
    ax = plot_response_graph(pd_payoffs, alpha=50).axes[0]
    assert len(ax.patches) == 4
    mass = ax.collections[0].get_array()
    assert mass[3] > 0.99
    # node masses are the alpha-rank meta-solver's stationary distribution, profile by profile
    from pbmarl.solvers.alpharank import alpharank_profiles

    np.testing.assert_allclose(mass, alpharank_profiles(pd_payoffs, alpha=50, m=50).ravel())


def test_response_graph_three_players_and_bad_input() -> None:
    ax = plot_response_graph(np.random.default_rng(0).normal(size=(2, 2, 2, 3))).axes[0]
    assert len(ax.collections[0].get_offsets()) == 8
    with pytest.raises(ValueError, match="missing"):
        plot_response_graph(np.array([[[np.nan, 0.0]]] * 2).reshape(2, 1, 2))
    with pytest.raises(ValueError, match="alpha must be a positive number"):
        plot_response_graph(RPS, alpha=0)
    with pytest.raises(ValueError, match="m \\(alpha-rank's population size\\) must be an int >= 2, got 1"):
        plot_response_graph(RPS, m=1)
    with pytest.raises(ValueError, match="at most 64"):
        plot_response_graph(np.zeros((9, 9)))


# -- simplex -----------------------------------------------------------------------------------
def test_simplex_draws_each_path_with_start_and_end() -> None:
    paths = {"a": [[0.6, 0.2, 0.2], [0.4, 0.3, 0.3], [1 / 3, 1 / 3, 1 / 3]], "b": [[0.1, 0.1, 0.8], [0.2, 0.2, 0.6]]}
    ax = plot_simplex(paths, labels=("R", "P", "S"), field=RPS).axes[0]
    lines = [line for line in ax.lines if line.get_label() in paths]
    assert [len(line.get_xdata()) for line in lines] == [3, 2]
    assert len(ax.collections) == 1  # the replicator field
    assert {t.get_text() for t in ax.texts} >= {"R", "P", "S"}
    # the barycentre maps to the triangle's centre
    assert lines[0].get_xdata()[-1] == pytest.approx(0.5)
    assert lines[0].get_ydata()[-1] == pytest.approx(np.sqrt(3) / 6)


def test_simplex_bad_input() -> None:
    with pytest.raises(ValueError, match="leaves the simplex at step 1"):
        plot_simplex([[0.5, 0.5, 0.0], [0.5, 0.6, 0.0]])
    with pytest.raises(ValueError, match=r"shape \(steps, 3\)"):
        plot_simplex([[0.5, 0.5]])
    with pytest.raises(ValueError, match="3x3 payoff matrix"):
        plot_simplex([[1.0, 0.0, 0.0]], field=np.eye(2))


def test_exploitability_draws_several_columns_per_run() -> None:
    history = _history(4).assign(br_values=[[], [0.3, 0.2], [0.1, 0.05], [0.02, 0.01]])
    ax = plot_exploitability({"a": history, "b": history}, y=["nash_conv", "approx_nash_conv"], log=False).axes[0]
    assert [len(line.get_xdata()) for line in ax.lines] == [4, 3, 4, 3]
    assert ax.lines[1].get_label() == "a · NashConv estimated by the oracle"
    with pytest.raises(ValueError, match="got 'loss'"):
        plot_exploitability(history, y=["nash_conv", "loss"])


def test_large_tables_and_populations_stay_readable() -> None:
    table = pb.PayoffTable.from_array(np.random.default_rng(0).normal(size=(50, 45)))
    ax = plot_payoff_heatmap(table).axes[0]
    assert ax.images[0].get_array().shape == (50, 45) and not ax.texts
    assert ax.get_xlabel() == "player 1's policy (index)"
    sigma = [np.full(70, 1 / 70), np.full(65, 1 / 65)]
    ax = plot_meta_strategy_bars(sigma).axes[0]
    assert len(ax.patches) == 135
    assert [t.get_text() for t in ax.get_xticklabels()] == ["70 members", "65 members"]


# -- reaching the plots from `import pbmarl as pb` ---------------------------------------
def test_plots_are_one_dot_below_pb_and_a_guessed_pb_plot_name_says_where() -> None:
    assert pb.plots.plot_exploitability is plot_exploitability
    assert "plots" not in pb.__all__ and "plot_exploitability" not in pb.__all__  # the top level stays small
    with pytest.raises(AttributeError, match=r"from pbmarl.plots import plot_exploitability. or .pb.plots.plot_expl"):
        pb.plot_exploitability  # noqa: B018
    with pytest.raises(AttributeError, match=r"'plot_exploit'.*which has plot_against_lp, plot_exploitability"):
        pb.plot_exploit  # noqa: B018
    with pytest.raises(AttributeError, match=r"^module 'pbmarl' has no attribute 'plotting'$"):
        pb.plotting  # noqa: B018


def test_against_lp_legend_leaves_the_axes_their_width() -> None:
    """The LP's legend entry (value, exploitability, where it is drawn) once ran so wide that the layout squeezed the
    axes to under half the figure (tutorial 12)."""
    import io

    from pbmarl.plots import plot_against_lp

    fig = plot_against_lp({"PSRO": _history(4), "XDO": _history(6)}, pb.load_game("kuhn_poker"))
    fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")  # as a notebook draws it: the layout runs
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels[2].startswith("sequence-form LP: value -0.0555556\n(exploitability ")
    assert fig.axes[0].get_position().width > 0.8
