"""Notebooks as a person uses them: JupyterLab in headless Chromium, Run All, then the dashboard's buttons.

nbmake executes the notebooks but never renders a widget or clicks one; these tests do. Each
notebook runs at the smoke budget (``PBMARL_SMOKE=1``). A screenshot of each dashboard is saved
under the test's temporary folder; a failure names it.

Run them with ``python -m pytest -m browser tests/test_browser.py`` (they need Debian's chromium and
chromium-driver; see the README).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_lab import ROOT, WIDGET_AS_TEXT, Lab, NotebookPage, chrome, lab_server, require_browser, wait_for

pytestmark = pytest.mark.browser

#: how long Run All may take at the smoke budget on a loaded machine, where the default is too short
RUN_ALL_SECONDS = {"tutorials/07_pettingzoo.ipynb": 420}
#: every notebook that shows a Dashboard (tutorials 04 and 07, and any later one that adds one)
DASHBOARDS = sorted(
    str(path.relative_to(ROOT)) for folder in ("tutorials", "notebooks") for path in (ROOT / folder).glob("*.ipynb")
    if "Dashboard(" in path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_browser()
    yield from lab_server(tmp_path_factory, [ROOT / name for name in DASHBOARDS])


@pytest.fixture(scope="module")
def driver(lab: Lab) -> Iterator[Any]:
    browser = chrome()
    try:
        yield browser
    finally:
        browser.quit()


class Screenshots:
    """Saves the page (and the dashboard) under the test's folder; `note` names them for a failure."""

    def __init__(self, driver: Any, folder: Path, name: str) -> None:
        self.driver, self.folder, self.name = driver, folder, name
        self.saved: list[Path] = []

    def page(self, label: str) -> Path:
        path = self.folder / f"{self.name}-{label}.png"
        self.driver.save_screenshot(str(path))
        self.saved.append(path)
        return path

    def element(self, element: Any, label: str) -> Path:
        path = self.folder / f"{self.name}-{label}.png"
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", element)
        element.screenshot(str(path))
        self.saved.append(path)
        return path

    def note(self) -> str:
        return "screenshots: " + ", ".join(map(str, self.saved)) if self.saved else "no screenshot saved"


def _check(condition: bool, message: str, shots: Screenshots) -> None:
    if not condition:
        shots.page("failure")
        raise AssertionError(f"{message}; {shots.note()}")


def _run_all_and_check(page: NotebookPage, shots: Screenshots, seconds: float) -> Any:
    """Run All; no traceback, no widget drawn as text, and the dashboard rendered as controls."""
    try:
        page.run_all(seconds)
    except AssertionError as exc:
        shots.page("run-all")
        raise AssertionError(f"{exc}; {shots.note()}") from None
    errors = page.error_outputs()
    _check(not errors, f"{page.name}: an output shows an error: {errors[:1]}", shots)
    as_text = [t for t in page.output_texts() for marker in WIDGET_AS_TEXT if marker in t]
    _check(not as_text, f"{page.name}: a widget rendered as text: {as_text[:1]}", shots)
    board = page.dashboard()
    shots.element(board, "dashboard-after-run-all")
    return board


def _step_advances(page: NotebookPage, board: Any, shots: Screenshots, seconds: float = 120) -> int:
    """Click Step; the iteration counter must go up by one. Returns the new iteration."""
    before = page.iteration(board)
    page.click(board, "Step")
    try:
        wait_for(lambda: page.iteration(board) == before + 1, seconds, f"the counter to go from {before} to {before + 1}")
    except AssertionError as exc:
        shots.element(board, f"dashboard-step-from-{before}")
        raise AssertionError(f"{page.name}: {exc}; {shots.note()}") from None
    error = board.find_element(page.by.CSS_SELECTOR, ".pbmarl-error").text
    _check(not error, f"{page.name}: the dashboard shows an error after Step: {error!r}", shots)
    return before + 1


def test_tutorials_04_and_07_are_among_the_dashboards() -> None:
    assert {"tutorials/04_psro_step_by_step.ipynb", "tutorials/07_pettingzoo.ipynb"} <= set(DASHBOARDS)


@pytest.mark.parametrize("name", DASHBOARDS)
def test_run_all_then_step_twice(name: str, lab: Lab, driver: Any, tmp_path: Path) -> None:
    shots = Screenshots(driver, tmp_path, Path(name).stem)
    page = NotebookPage(driver, lab, name)
    board = _run_all_and_check(page, shots, RUN_ALL_SECONDS.get(name, 240))
    first = page.iteration(board)
    assert _step_advances(page, board, shots) == first + 1
    assert _step_advances(page, board, shots) == first + 2
    shots.element(board, "dashboard-after-two-steps")
    if name == "tutorials/04_psro_step_by_step.ipynb":
        _run_button_fills_the_bar_inside_the_dashboard(page, board, shots)
    if name == "tutorials/07_pettingzoo.ipynb":
        _failed_step_is_one_line_and_recoverable(page, board, shots)


def _failed_step_is_one_line_and_recoverable(page: NotebookPage, board: Any, shots: Screenshots) -> None:
    """Close the pool under the dashboard: Step shows one line, no traceback; a fresh pool steps again."""
    before = page.iteration(board)
    page.add_cell_and_run("pool.close()")
    page.click(board, "Step")
    error = wait_for(lambda: board.find_element(page.by.CSS_SELECTOR, ".pbmarl-error").text, 120,
                     "the one-line error of the failed step")
    shots.element(board, "dashboard-failed-step")
    _check("this RolloutPool is closed" in error and "\n" not in error.strip(),
           f"expected a one-line error naming the closed pool, got {error!r}", shots)
    _check("Traceback" not in board.text, "the failed step printed a traceback inside the dashboard", shots)
    _check(page.iteration(board) == before, "the failed step moved the counter", shots)
    page.add_cell_and_run("pool = psro.evaluator = pb.RolloutPool(game, seed=0)")
    assert _step_advances(page, board, shots) == before + 1


def _run_button_fills_the_bar_inside_the_dashboard(page: NotebookPage, board: Any, shots: Screenshots) -> None:
    """Type 2 iterations, press Run: the bar inside the dashboard reads 2/2 (or says the run converged
    first) and the counter went up by as many iterations."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    before = page.iteration(board)
    box = board.find_element(page.by.CSS_SELECTOR, "input")  # the iterations field
    page.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
    box.click()
    ActionChains(page.driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).send_keys("2").send_keys(
        Keys.TAB).perform()
    wait_for(lambda: box.get_attribute("value") == "2", 10, "the iterations field to read 2")
    page.click(board, "Run")

    def finished() -> str:  # the bar's last words, once the buttons are back (the click has returned)
        text = str(board.find_element(page.by.CSS_SELECTOR, ".pbmarl-progress").text)
        step = [b for b in board.find_elements(page.by.CSS_SELECTOR, "button") if b.text.strip() == "Step"][0]
        return text if (text.startswith("2/2") or "stopped:" in text) and step.is_enabled() else ""

    try:  # two iterations, or fewer where the run converges first (the bar then says so)
        text = wait_for(finished, 120, "Run to finish its 2 iterations")
    except AssertionError as exc:
        shots.element(board, "dashboard-run")
        raise AssertionError(f"{exc}: the counter reads {page.iteration(board)}, "
                             f"the field {box.get_attribute('value')!r}; {shots.note()}") from None
    done = int(text.split("/")[0])
    shots.element(board, "dashboard-after-run")
    _check(done >= 1 and page.iteration(board) == before + done,
           f"Run did {done} iteration(s) but the counter went from {before} to {page.iteration(board)}", shots)
    bar = board.find_elements(page.by.CSS_SELECTOR, ".pbmarl-progress-bar")
    _check(len(bar) == 1 and bar[0].is_displayed(), "the Run button's progress bar is not inside the dashboard", shots)
