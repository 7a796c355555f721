"""Live notebook widgets: a `Dashboard` for a running PSRO-style loop and a `TableExplorer`.

ipywidgets is imported when a widget is built, never by ``import pbmarl``. Every button has a
method that does the same thing (`Dashboard.step`, `Dashboard.run`, `TableExplorer.select`),
so a notebook, a script or a test can drive the widgets without clicking.

Example:
    >>> from pbmarl.widgets import Dashboard
    >>> psro = pb.PSRO("kuhn_poker", solver="nash")
    >>> dash = Dashboard(psro)
    >>> dash                 # Step / Run-N buttons, exploitability curve, payoff heatmap, meta-strategy
    Dashboard(PSRO('kuhn_poker', solver='nash', iteration=0, sizes=(1, 1), exploitability=0.4583))
    >>> dash.run(10)         # the same as typing 10 and pressing Run  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import html
import io
import time
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pbmarl.fmt import fmt
from pbmarl.plots import plot_exploitability, plot_meta_strategy_bars, plot_payoff_heatmap
from pbmarl.plots._axes import blank_figure
from pbmarl.plots.curves import Y_AXES

__all__ = ["Dashboard", "TableExplorer"]


def _ipywidgets() -> Any:
    try:
        import ipywidgets
    except ImportError:
        raise ImportError("pbmarl's widgets need ipywidgets: pip install 'pbmarl[notebooks]'") from None
    return ipywidgets


def _png(figure: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _message(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, wrap=True, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


class Dashboard:
    """A live view of a PSRO, `SelfPlay` or `FictitiousPlay` object, updated after every `step()`.

    Shows a Step button, a Run button with the number of iterations (an IntText), the
    iteration counter, a progress bar while it runs, the last record, and one figure of three
    panels: the exploitability curve, the current payoff table as a heatmap (two-player games;
    its numbers are written where they fit) and the current meta-strategy as bars. Below, a
    collapsed "payoff table" section opens a `TableExplorer` to read any cell.

    A click that fails shows a one-line error in the dashboard (the exception is kept in
    `last_error`) and leaves the buttons usable; with PSRO's all-or-nothing steps the run is
    then exactly as it was before the click. Whatever a step prints (a learner's progress bar,
    say) appears inside the dashboard, under the controls.

    Args:
        psro: the loop to drive; anything with `step()`, `history`, `table` and `population`.
        y: the curve: ``"exploitability"``, ``"nash_conv"``, ``"meta_nash_conv"`` or
            ``"approx_nash_conv"`` (see `plot_exploitability`). Default: exploitability where the
            game is measured exactly, else the oracle's estimate of NashConv.
        player: whose payoffs the heatmap colours.
        log: logarithmic y axis for the curve (default: for exploitability and NashConv; the
            estimates can be 0 or negative).
        progress: show the progress bar during `run`.
        redraw_seconds: during `run`, redraw at most this often (a redraw takes about a third
            of a second, far longer than one step on a small game); the last step is always
            drawn, and `step` always redraws.
        dpi: resolution of the rendered figure.

    Attributes:
        figure: the matplotlib figure (redrawn after every step).
        step_button, run_button, iterations: the controls (``step_button.click()`` steps).
        counter: the iteration counter; progress: the progress bar; error: the one-line error.
        last_error: the exception of the last failed click (None after a good one).
        widget: the whole dashboard as one ipywidgets box (what a notebook cell displays).

    Example:
        >>> dash = Dashboard(pb.PSRO("kuhn_poker")); dash.step(); dash.exploitability_line.get_xdata()  # doctest: +SKIP
    """

    def __init__(
        self,
        psro: Any,
        *,
        y: str | None = None,
        player: int = 0,
        log: bool | None = None,
        progress: bool = True,
        redraw_seconds: float = 1.0,
        dpi: int = 80,
    ) -> None:
        if not (isinstance(redraw_seconds, (int, float)) and redraw_seconds >= 0):
            raise ValueError(f"redraw_seconds must be a non-negative number, got {redraw_seconds!r}")
        for attribute in ("step", "history", "table", "population"):
            if not hasattr(psro, attribute):
                raise TypeError(f"Dashboard needs a PSRO-style loop with .{attribute}; got {type(psro).__name__}")
        if y is not None and y not in Y_AXES:
            raise ValueError(f"y must be one of {sorted(Y_AXES)} or None, got {y!r}")
        if isinstance(player, bool) or not isinstance(player, (int, np.integer)) or not 0 <= player < 2:
            raise ValueError(f"player must be 0 or 1 (whose payoffs the heatmap shows), got {player!r}")
        widgets = _ipywidgets()
        self.psro = psro
        self.y = y
        self.player = int(player)
        self.log = log
        self.progress = progress
        self.redraw_seconds = float(redraw_seconds)
        self.dpi = dpi
        self.figure = blank_figure((13, 3.8))
        self.figure.set_layout_engine("none")  # fixed margins below: a layout engine costs a third of a redraw
        self.step_button = widgets.Button(description="Step", icon="forward", tooltip="one iteration")
        self.iterations = widgets.IntText(value=5, description="iterations", layout=widgets.Layout(width="160px"))
        self.run_button = widgets.Button(description="Run", icon="play", tooltip="run that many iterations")
        self.counter = widgets.HTML(layout=widgets.Layout(min_width="100px", margin="0 8px"))
        self.counter.add_class("pbmarl-iteration")
        self.progress_bar = widgets.IntProgress(value=0, min=0, max=1, layout=widgets.Layout(
            width="180px", visibility="hidden"))
        self.progress_bar.add_class("pbmarl-progress-bar")
        self.progress_text = widgets.HTML(layout=widgets.Layout(margin="0 8px"))
        self.progress_text.add_class("pbmarl-progress")
        self.error = widgets.HTML()
        self.error.add_class("pbmarl-error")
        self.last_error: BaseException | None = None
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.output = widgets.Output()
        self.explorer: TableExplorer | None = None
        self.table_section = widgets.Accordion(children=[widgets.VBox()])
        self.table_section.set_title(0, "payoff table: read any cell")
        self.table_section.selected_index = None
        self.table_section.observe(lambda _: self._show_table(), names="selected_index")
        self.step_button.on_click(lambda _: self._click(self.step))
        self.run_button.on_click(lambda _: self._click(lambda: self.run(self.iterations.value)))
        controls = widgets.HBox([self.step_button, self.iterations, self.run_button, self.counter,
                                 self.progress_bar, self.progress_text])
        self.widget = widgets.VBox([controls, self.error, self.status, self.output, self.image, self.table_section])
        self.widget.add_class("pbmarl-dashboard")
        self.refresh()

    # -- actions ----------------------------------------------------------------
    def step(self) -> Any:
        """One iteration of the loop, then redraw; returns the iteration's record."""
        self.progress_bar.layout.visibility = "hidden"  # a bar left from an earlier run would be stale
        self.progress_text.value = ""
        record = self.psro.step()
        self.refresh()
        return record

    def run(self, iterations: int) -> list[Any]:
        """`iterations` more iterations, redrawing as they go (see `redraw_seconds`); returns their records.

        Stops early where the run's own budget ends (`done`: ``stop_exploitability``, ``max_iterations``).
        """
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
            raise ValueError(f"iterations must be a non-negative int, got {iterations!r}")
        total = int(iterations)
        records: list[Any] = []
        start = drawn = time.monotonic()
        self._show_progress(0, total, "")
        text = ""
        try:
            for _ in range(total):
                stopped = self._finished()
                if stopped:
                    self._show_progress(len(records), total, f"{text + ' · ' if text else ''}stopped: {stopped}")
                    break
                records.append(self.psro.step())
                if time.monotonic() - drawn >= self.redraw_seconds:
                    self.refresh()
                    drawn = time.monotonic()
                value = self._latest(records[-1])
                seconds = (time.monotonic() - start) / len(records)
                text = f"{self._column()} {fmt(value)} · {seconds:.2g} s/it"
                self._show_progress(len(records), total, text)
        except BaseException:
            with contextlib.suppress(Exception):  # show the steps that did finish; the failure propagates
                self.refresh()
            raise
        self.refresh()
        return records

    def _latest(self, record: Any) -> float | None:
        """The progress text's value: the record's column, or for ``approx_nash_conv`` (which no record
        holds: it sums the next iteration's best-response values) the latest one the history gives."""
        column = self._column()
        if column != "approx_nash_conv":
            return getattr(record, column, None)
        from pbmarl.plots.curves import _approx_nash_conv

        values = _approx_nash_conv(self.psro.history, "")
        finite = values[np.isfinite(values)]
        return float(finite[-1]) if len(finite) else None

    def _show_progress(self, done: int, total: int, text: str) -> None:
        if not self.progress:
            return
        self.progress_bar.layout.visibility = "visible"
        self.progress_bar.max = max(total, 1)
        self.progress_bar.value = min(done, max(total, 1))
        line = f"{done}/{total}" + (f" · {text}" if text else "")
        self.progress_text.value = f'<span style="white-space:nowrap">{html.escape(line)}</span>'

    def _finished(self) -> str:
        """Why the run is at its own budget (``"converged"``, ``"at max_iterations"``), or ``""``; a run
        without a budget of its own never stops here."""
        try:
            done = bool(self.psro.done)
        except ValueError:
            return ""
        if not done:
            return ""
        return "converged" if getattr(self.psro, "converged", False) else "at max_iterations"

    def _click(self, action: Any) -> None:
        """Run a button's action; a failure becomes the one-line error, and the buttons stay usable."""
        self.step_button.disabled = self.run_button.disabled = True
        self.error.value = ""
        self.output.clear_output()
        failure: Exception | None = None
        try:
            with self.output:  # inside, not around: ipywidgets' Output would print the whole traceback
                try:
                    action()
                except Exception as exc:  # noqa: BLE001 - shown to the person who clicked, kept in last_error
                    failure = exc
            self.last_error = failure
            if failure is not None:
                self.error.value = _error_line(failure, self.psro)
                with contextlib.suppress(Exception):  # the error line already says what went wrong
                    self.refresh()
        finally:
            self.step_button.disabled = self.run_button.disabled = False

    # -- drawing ------------------------------------------------------------------
    def _column(self) -> str:
        """The curve's column: `y` if given, else the best measure the history holds."""
        if self.y is not None:
            return self.y
        history = self.psro.history
        if "exploitability" in history.columns and history["exploitability"].notna().any():
            return "exploitability"
        if "br_values" in history.columns:
            return "approx_nash_conv"
        return "meta_nash_conv"

    def refresh(self) -> None:
        """Redraw the figure and the status line from the loop's current state."""
        history = self.psro.history
        self.figure.clear()
        curve, table, bars = self.figure.subplots(1, 3, gridspec_kw=dict(
            width_ratios=[1.1, 1.0, 1.2], left=0.065, right=0.99, bottom=0.22, top=0.91, wspace=0.25))
        column = self._column()
        log = self.log if self.log is not None else column in ("exploitability", "nash_conv")
        try:
            plot_exploitability(history, y=column, log=log, ax=curve, title=Y_AXES[column])
            curve.set_ylabel("")
        except ValueError:  # nothing measured yet
            _message(curve, f"no {Y_AXES[column]} yet")
        if self.psro.table.num_players == 2:
            plot_payoff_heatmap(self.psro.table, player=self.player, colorbar=False, ax=table)
        else:
            _message(table, f"{self.psro.table.num_players}-player table: see psro.table.to_frame()")
        if len(history):
            plot_meta_strategy_bars(history, ax=bars, title="meta-strategy")
            _thin_tick_labels(bars)
        else:
            _message(bars, "no meta-strategy yet")
        self.image.value = _png(self.figure, self.dpi)
        records = getattr(self.psro, "records", None)
        self.status.value = f"<code>{html.escape(str(records[-1]))}</code>" if records else ""
        iteration = getattr(self.psro, "iteration", len(records) - 1 if records else 0)
        self.counter.value = f'<b style="white-space:nowrap">iteration {iteration}</b>'
        if self.explorer is not None and self.table_section.selected_index == 0:
            self.explorer.refresh()

    def _show_table(self) -> None:
        """Open the payoff-table section: a `TableExplorer` of the loop's table, built on first use."""
        if self.table_section.selected_index != 0:
            return
        if self.explorer is None:
            player = self.player if self.player < self.psro.table.num_players else 0
            self.explorer = TableExplorer(self.psro.table, player=player, dpi=self.dpi)
            self.table_section.children = [self.explorer.widget]
        else:
            self.explorer.refresh()

    @property
    def curve_axes(self) -> Axes:
        """The panel with the exploitability curve."""
        return self.figure.axes[0]

    @property
    def table_axes(self) -> Axes:
        """The panel with the payoff heatmap."""
        return self.figure.axes[1]

    @property
    def strategy_axes(self) -> Axes:
        """The panel with the meta-strategy bars."""
        return self.figure.axes[2]

    @property
    def exploitability_line(self) -> Line2D | None:
        """The curve's line (one point per measured iteration), or None before any measurement."""
        lines = self.curve_axes.lines
        return lines[0] if lines else None

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"Dashboard({self.psro!r})"


def _thin_tick_labels(ax: Axes, points: float = 9.0) -> None:
    """Hide all but every k-th x tick label so that the shown ones are at least `points` apart."""
    labels = ax.get_xticklabels()
    if len(labels) < 2:
        return
    figure = ax.get_figure(root=True)
    width = figure.get_size_inches()[0] if figure is not None else 6.4
    span = 72 * width * ax.get_position().width / len(labels)
    every = max(1, int(np.ceil(points / span)))
    for i, label in enumerate(labels):
        label.set_visible(i % every == 0)


def _error_line(exc: BaseException, psro: Any) -> str:
    """One line of HTML for a failed click: what failed, and where the run stands."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    iteration = getattr(psro, "iteration", None)
    where = f" The run is still at iteration {iteration}." if iteration is not None else ""
    text = f"{type(exc).__name__}: {first.rstrip('.')}" if first else type(exc).__name__
    return (f'<span style="color:#b00020">&#9888; the step failed: {html.escape(text)}.{where} '
            "Fix the cause and click again (the exception is in <code>dashboard.last_error</code>).</span>")


class TableExplorer:
    """Pick one member per player and read that cell of a payoff table: payoffs, samples, stderr.

    Two-player tables also show the heatmap with the chosen cell outlined. A table bound to a
    growing population picks up new members on `refresh()`.

    Args:
        table: a `PayoffTable`.
        player: whose payoffs the heatmap colours (two-player tables).
        dpi: resolution of the heatmap.

    Example:
        >>> explorer = TableExplorer(table)
        >>> explorer.select("p0/0", "p1/0")      # the same as picking them in the dropdowns
        payoff_0    0.125
        payoff_1   -0.125
        count           0
        stderr_0      0.0
        stderr_1      0.0
        exact        True
        Name: (p0/0, p1/0), dtype: object
        >>> explorer.cell                         # that row of table.to_frame()  # doctest: +SKIP
    """

    def __init__(self, table: Any, *, player: int = 0, dpi: int = 80) -> None:
        for attribute in ("to_frame", "ids", "num_players", "cell_index"):
            if not hasattr(table, attribute):
                raise TypeError(f"TableExplorer needs a PayoffTable, got {type(table).__name__}")
        if isinstance(player, bool) or not isinstance(player, (int, np.integer)) or not 0 <= player < table.num_players:
            raise ValueError(f"player must be in 0..{table.num_players - 1}, got {player!r}")
        widgets = _ipywidgets()
        self.table = table
        self.player = int(player)
        self.dpi = dpi
        self.figure = blank_figure((5.5, 4.5))
        self.pickers = [widgets.Dropdown(description=f"player {p}") for p in range(table.num_players)]
        self.details = widgets.HTML()
        self.image = widgets.Image(format="png")
        self._updating = False
        self.refresh()
        for picker in self.pickers:
            picker.observe(lambda _: self._show(), names="value")
        self.widget = widgets.HBox([widgets.VBox([*self.pickers, self.details]), self.image])

    def refresh(self) -> None:
        """Re-read the table's members (it may have grown) and redraw."""
        self._updating = True
        try:
            for picker, ids in zip(self.pickers, self.table.ids):
                current = picker.value
                picker.options = list(ids)
                picker.value = current if current in ids else (ids[0] if ids else None)
        finally:
            self._updating = False
        self._show()

    def select(self, *members: int | str) -> pd.Series:
        """Choose one member per player (ids like ``"p0/2"`` or indices); returns the cell."""
        index = self.table.cell_index(members)
        self._updating = True
        try:
            for picker, ids, i in zip(self.pickers, self.table.ids, index):
                picker.value = ids[i]
        finally:
            self._updating = False
        self._show()
        return self.cell

    @property
    def index(self) -> tuple[int, ...]:
        """The chosen cell as member indices."""
        return self.table.cell_index(tuple(p.value for p in self.pickers))

    @property
    def cell(self) -> pd.Series:
        """The chosen cell's row of ``table.to_frame()``: payoff and stderr per player, count, exact."""
        frame = self.table.to_frame()
        key = tuple(p.value for p in self.pickers)
        return frame.loc[key if len(key) > 1 else key[0]]

    def _show(self) -> None:
        if self._updating or any(p.value is None for p in self.pickers):
            return
        cell = self.cell
        rows = []
        for p in range(self.table.num_players):
            payoff, se = cell[f"payoff_{p}"], cell[f"stderr_{p}"]
            rows.append({"player": p, "payoff": payoff, "stderr": se})
        frame = pd.DataFrame(rows).set_index("player")
        kind = "exact" if bool(cell["exact"]) else ("never evaluated" if int(cell["count"]) == 0 else "sampled")
        self.details.value = (f"<b>samples:</b> {int(cell['count'])} &nbsp; <b>kind:</b> {kind}"
                              + frame.to_html(float_format=lambda v: fmt(v, ".4g"), na_rep="—"))
        self.figure.clear()
        if self.table.num_players == 2:
            plot_payoff_heatmap(self.table, player=self.player, highlight=self.index, ax=self.figure.add_subplot())
        else:
            _message(self.figure.add_subplot(), "heatmaps are drawn for two-player tables")
        self.image.value = _png(self.figure, self.dpi)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"TableExplorer({self.table!r})"

