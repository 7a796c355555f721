"""Widgets: the dashboard redraws after every step; the table explorer shows the chosen cell."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from types import SimpleNamespace

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
    measured.run(2, progress=False)
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
            pop.add(p, pb.policies.FixedPolicy.pure(game, action))
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


def test_failed_click_shows_one_line_and_the_run_stays_usable() -> None:
    game = pb.load_game("kuhn_poker")
    pool = pb.RolloutPool(game, seed=0)
    psro = pb.PSRO(game, solver="nash", evaluator=pool, eval_episodes=20, seed=0)
    dash = Dashboard(psro, progress=False)
    dash.step_button.click()
    assert "iteration 1" in dash.counter.value and dash.error.value == "" and dash.last_error is None
    pool.close()
    dash.step_button.click()  # the evaluator cannot sample: the click fails
    assert isinstance(dash.last_error, RuntimeError)
    assert "RuntimeError: this RolloutPool is closed" in dash.error.value and "Traceback" not in dash.error.value
    assert "\n" not in dash.error.value and "still at iteration 1" in dash.error.value
    assert not dash.step_button.disabled and not dash.run_button.disabled
    assert psro.iteration == 1 and psro.population.sizes == (2, 2)  # all-or-nothing: nothing was added
    psro.evaluator = pb.RolloutPool(game, seed=0)  # fix the cause, click again
    dash.step_button.click()
    assert psro.iteration == 2 and "iteration 2" in dash.counter.value
    assert dash.error.value == "" and dash.last_error is None
    psro.evaluator.close()


def test_run_fills_the_progress_bar_beside_the_buttons(psro: pb.PSRO) -> None:
    dash = Dashboard(psro)
    assert dash.progress_bar.layout.visibility == "hidden"
    dash.run(3)
    controls = dash.widget.children[0]
    assert dash.progress_bar in controls.children and dash.counter in controls.children
    assert dash.progress_bar.value == dash.progress_bar.max == 3
    assert dash.progress_bar.layout.visibility == "visible" and "3/3" in dash.progress_text.value
    assert "exploitability" in dash.progress_text.value and "iteration 3" in dash.counter.value
    children = list(dash.widget.children)
    assert children.index(dash.output) < children.index(dash.image)  # what a step prints shows above the figure
    dash.step()
    assert dash.progress_bar.layout.visibility == "hidden"  # a finished run's bar does not linger
    assert not Dashboard(pb.PSRO(pb.load_game("kuhn_poker"), seed=0), progress=False).progress_text.value


def test_table_section_opens_an_explorer_that_follows_the_run(psro: pb.PSRO) -> None:
    dash = Dashboard(psro, progress=False)
    assert dash.explorer is None  # built only when the section is opened
    dash.table_section.selected_index = 0
    assert dash.explorer is not None and dash.explorer.pickers[0].options == ("p0/0",)
    dash.step()
    assert dash.explorer.pickers[0].options == ("p0/0", "p0/1")
    assert dash.table_section.children == (dash.explorer.widget,)


def _sampled(values: np.ndarray, stderr: np.ndarray | None = None) -> SimpleNamespace:
    """A two-player table as the heatmap reads it: values, stderr and ids (player 0's payoffs given)."""
    values = np.asarray(values, dtype=float)
    both = np.stack([values, -values], axis=-1)
    se = np.zeros_like(both) if stderr is None else np.stack([stderr, stderr], axis=-1)
    ids = [[f"p{p}/{i}" for i in range(n)] for p, n in enumerate(values.shape)]
    return SimpleNamespace(values=both, stderr=se, ids=ids)


def _heatmap_texts(values: np.ndarray, stderr: np.ndarray | None = None, **kwargs: object) -> list[str]:
    import matplotlib.pyplot as plt

    from pbmarl.plots import plot_payoff_heatmap

    table = _sampled(values, stderr)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))  # the dashboard's panel size
    plot_payoff_heatmap(table, ax=axes[1], colorbar=False, **kwargs)
    texts = [t.get_text() for t in axes[1].texts]
    sizes = {t.get_fontsize() for t in axes[1].texts}
    plt.close(fig)
    return texts + [f"size={s}" for s in sizes]


def test_heatmap_annotations_fit_their_cells_or_are_left_out() -> None:
    rng = np.random.default_rng(0)
    small = rng.normal(size=(3, 3)) / 6
    small[0, 0] = -2.8e-17  # rounding noise reads 0
    texts = _heatmap_texts(small)
    assert texts[0] == "0" and len(texts) == 9 + 1
    big = rng.normal(size=(10, 10)) / 6  # "-0.167-0.0833" would overlap at this size
    assert _heatmap_texts(big) == []
    forced = _heatmap_texts(big, annotate=True)  # asked for: written, in a smaller font
    assert len(forced) == 100 + 1 and float(forced[-1].split("=")[1]) < 8
    stderr = np.full((5, 5), 0.01234)
    with_se = _heatmap_texts(rng.normal(size=(5, 5)), stderr)
    assert all("\n±0.012" in t for t in with_se[:-1])
    roomy = _heatmap_texts(rng.normal(size=(3, 3)), np.full((3, 3), 0.01234))
    assert all("±" in t for t in roomy[:-1])
    tight = _heatmap_texts(rng.normal(size=(8, 8)), np.full((8, 8), 0.01234))
    assert tight == [] or not any("±" in t for t in tight)  # the ± lines go first


def test_heatmap_hover_text_names_the_cell() -> None:
    from pbmarl.plots import plot_payoff_heatmap

    fig = plot_payoff_heatmap(_sampled(np.array([[0.5, -2.8e-17], [1.0, -1.0]]), np.array([[0.0123, 0], [0, 0]])))
    ax = fig.axes[0]
    assert ax.format_coord(0.1, -0.2) == "p0/0 vs p1/0: 0.5 ± 0.012"
    assert ax.format_coord(1.2, 0.3) == "p0/0 vs p1/1: 0"
    assert ax.format_coord(5, 5) == ""


def test_table_explorer_shows_noise_as_zero() -> None:
    table = pb.PayoffTable.from_array([[-2.8e-17, 1.0], [-1.0, 0.25]])
    explorer = TableExplorer(table)
    details = explorer.details.value
    assert "e-17" not in details and "<td>0</td>" in details


def test_run_says_why_it_stopped_early() -> None:
    psro = pb.PSRO(pb.load_game("kuhn_poker"), solver="nash", stop_exploitability=0.5, seed=0)
    dash = Dashboard(psro)
    assert psro.converged and dash.run(2) == []
    assert "0/2" in dash.progress_text.value and "stopped: converged" in dash.progress_text.value
