"""Widgets: the dashboard redraws after every step; the table explorer shows the chosen cell."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.widgets import Dashboard, TableExplorer


@pytest.fixture
def psro() -> pb.PSRO:
    return pb.PSRO(pb.load_game("kuhn_poker"), solver="nash", seed=0)


def _heatmap_shape(dash: Dashboard) -> tuple[int, ...]:
    return dash.table_axes.images[0].get_array().shape


def test_dashboard_shows_the_initial_population(psro: pb.PSRO) -> None:
    dash = Dashboard(psro, progress=False)
    assert list(dash.exploitability_line.get_xdata()) == [0]
    assert dash.exploitability_line.get_ydata()[0] == pytest.approx(psro.records[0].exploitability)
    assert _heatmap_shape(dash) == (1, 1)
    assert len(dash.strategy_axes.patches) == 2  # one bar per member, both players
    assert dash.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert "iter   0" in dash.status.value


def test_step_button_adds_one_point_and_grows_the_heatmap(psro: pb.PSRO) -> None:
    dash = Dashboard(psro, progress=False)
    before = len(dash.exploitability_line.get_xdata())
    image_before = dash.image.value
    dash.step_button.click()
    assert psro.iteration == 1
    xs, ys = dash.exploitability_line.get_xdata(), dash.exploitability_line.get_ydata()
    assert len(xs) == before + 1 and list(xs) == [0, 1]
    assert ys[-1] == pytest.approx(psro.records[-1].exploitability)
    assert _heatmap_shape(dash) == (2, 2)
    np.testing.assert_allclose(dash.table_axes.images[0].get_array(), psro.table.values[..., 0])
    assert len(dash.strategy_axes.patches) == 4
    assert dash.image.value != image_before
    assert not dash.step_button.disabled and not dash.run_button.disabled  # re-enabled after the click


def test_run_button_runs_the_typed_number_of_iterations(psro: pb.PSRO) -> None:
    dash = Dashboard(psro, progress=False)
    dash.iterations.value = 3
    dash.run_button.click()
    assert psro.iteration == 3
    assert len(dash.exploitability_line.get_xdata()) == 4
    assert _heatmap_shape(dash) == (4, 4)
    bars = [p.get_height() for p in dash.strategy_axes.patches]
    np.testing.assert_allclose(bars, np.concatenate([psro.meta_strategy[0], psro.meta_strategy[1]]))


def test_run_method_redraws_and_respects_max_iterations() -> None:
    psro = pb.SelfPlay(pb.load_game("kuhn_poker"), max_iterations=2, seed=0)
    dash = Dashboard(psro, progress=False, redraw_seconds=0)
    records = dash.run(5)
    assert [r.iteration for r in records] == [1, 2]
    assert list(dash.exploitability_line.get_xdata()) == [0, 1, 2]


def test_dashboard_without_exact_measurement_follows_the_oracles_estimate() -> None:
    measured = pb.PSRO(pb.load_game("kuhn_poker"), solver="nash", seed=0)
    psro = pb.PSRO(pb.load_game("kuhn_poker"), solver="nash", measure=False, seed=0)
    dash = Dashboard(psro, progress=False)
    assert dash.exploitability_line is None and "yet" in dash.curve_axes.texts[0].get_text()
    dash.run(2)
    list(measured.run(2))
    assert dash.curve_axes.get_title() == "NashConv estimated by the oracle"
    assert dash.curve_axes.get_yscale() == "linear"
    # with the exact oracle the estimate is the NashConv of iterations 0 and 1, which `measured` measured
    np.testing.assert_allclose(dash.exploitability_line.get_ydata(), measured.history["nash_conv"].iloc[:2])
    dash = Dashboard(psro, y="meta_nash_conv", progress=False)
    assert len(dash.exploitability_line.get_xdata()) == 3


def test_dashboard_bad_arguments(psro: pb.PSRO) -> None:
    with pytest.raises(TypeError, match="PSRO-style loop with .step"):
        Dashboard(object())
    with pytest.raises(ValueError, match="y must be one of"):
        Dashboard(psro, y="loss")
    with pytest.raises(ValueError, match="player must be 0 or 1"):
        Dashboard(psro, player=2)
    with pytest.raises(ValueError, match="iterations must be a non-negative int, got -1"):
        Dashboard(psro, progress=False).run(-1)


def test_table_explorer_shows_the_selected_cell() -> None:
    game = pb.MatrixGame([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    pop = pb.Population(game)
    for p in range(2):
        for action in range(3):
            pop.add(p, pb.FixedPolicy.pure(game, action))
    table = pb.PayoffTable(pop)
    table.update((1, 2), [[-1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])
    table.set_exact((0, 2), [1.0, -1.0])
    explorer = TableExplorer(table)
    assert explorer.index == (0, 0)
    cell = explorer.select("p0/1", 2)
    assert explorer.index == (1, 2)
    assert [picker.value for picker in explorer.pickers] == ["p0/1", "p1/2"]
    assert cell["count"] == 3 and cell["payoff_0"] == pytest.approx(-2 / 3)
    assert cell["stderr_0"] == pytest.approx(table.stderr[1, 2, 0])
    assert "<b>samples:</b> 3" in explorer.details.value and "sampled" in explorer.details.value
    (outline,) = explorer.figure.axes[0].patches
    assert outline.get_xy() == (1.5, 0.5)  # column 2, row 1
    explorer.pickers[0].value = "p0/0"  # a dropdown change redraws by itself
    assert explorer.cell["exact"] and "exact" in explorer.details.value
    assert explorer.figure.axes[0].patches[0].get_xy() == (1.5, -0.5)


def test_table_explorer_follows_a_growing_table(psro: pb.PSRO) -> None:
    explorer = TableExplorer(psro.table)
    assert explorer.pickers[0].options == ("p0/0",)
    psro.step()
    explorer.refresh()
    assert explorer.pickers[1].options == ("p1/0", "p1/1")
    cell = explorer.select(1, 1)
    assert cell["payoff_1"] == pytest.approx(psro.table.values[1, 1, 1])
    with pytest.raises(ValueError, match="out of range"):
        explorer.select(0, 5)
    with pytest.raises(TypeError, match="needs a PayoffTable"):
        TableExplorer(np.zeros((2, 2)))
