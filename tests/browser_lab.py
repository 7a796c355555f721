"""JupyterLab in headless Chromium, for the `browser` tests: a server in a temporary folder and a page
driver that runs a notebook the way a person does (Run All, then clicks).

Needs Debian's ``chromium`` and ``chromium-driver`` (the system chromedriver; nothing is downloaded)
and selenium. Under ``CI=true`` a missing browser fails the tests; elsewhere they skip, naming the
install command.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "apt-get install -y chromium chromium-driver && pip install selenium jupyterlab"
#: text that means a widget was printed instead of drawn, or an output that failed
WIDGET_AS_TEXT = ("HBox(", "VBox(", "Error displaying widget", "Loading widget...", "IntProgress(")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        missing.append("jupyterlab")
    return f"needs {', '.join(missing)}: {INSTALL}" if missing else None


def require_browser() -> None:
    """Skip (or, under CI=true, fail) when the browser or its driver is missing."""
    reason = missing_browser()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and the browser tests cannot run: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Lab:
    """A JupyterLab server on 127.0.0.1 with a token, serving a temporary folder. Its kernels run at the
    smoke budget (``PBMARL_SMOKE=1``) unless ``smoke=False``, which gives them the reader's full budget."""

    def __init__(self, folder: Path, *, smoke: bool = True) -> None:
        self.folder = folder
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        settings = folder.parent / "lab-settings"
        notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True, exist_ok=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = dict(os.environ, PBMARL_SMOKE="1", JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(folder.parent / "lab-workspaces"),
                   JUPYTER_RUNTIME_DIR=str(folder.parent / "jupyter-runtime"),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                   RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "disabled"))
        env.pop("MPLBACKEND", None)  # Agg in the kernel would draw no pictures
        if not smoke:
            env.pop("PBMARL_SMOKE")
        command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
                   f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={folder}",
                   "--ServerApp.port_retries=0", "--LabApp.news_url=", "--ServerApp.open_browser=False"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")
        self.log = (folder.parent / "jupyterlab.log").open("w")
        self.process = subprocess.Popen(command, cwd=folder, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready(60)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def _wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer within {seconds:.0f} s; see {self.log.name}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def chrome() -> Any:
    """Headless Chromium through Debian's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1500,1100", "--disable-extensions"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


def wait_for(condition: Callable[[], Any], seconds: float, what: str, poll: float = 0.25) -> Any:
    """`condition()`'s first truthy value within `seconds`, else an AssertionError naming `what`."""
    deadline = time.monotonic() + seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - the page may be re-rendering; retried until the deadline
            last_error = exc
        time.sleep(poll)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}" + (f" ({last_error})" if last_error else ""))


class NotebookPage:
    """One notebook open in JupyterLab: Run All, read the outputs, click the dashboard."""

    def __init__(self, driver: Any, lab: Lab, name: str) -> None:
        from selenium.webdriver.common.by import By

        self.by = By
        self.driver = driver
        self.name = name
        driver.get(lab.url(f"lab/tree/{name}"))  # a path relative to the server's root
        wait_for(lambda: self._idle_kernel(), 90, f"{name} to open with an idle kernel")

    def _find(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(self.by.CSS_SELECTOR, css))

    def _idle_kernel(self) -> bool:
        cells = self._find(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
        status = " ".join(e.text for e in self._find(".jp-StatusBar-TextItem"))  # "Python 3 (ipykernel) | Idle"
        return bool(cells) and "| Idle" in status

    def menu(self, top: str, item: str) -> None:
        """Click a menu-bar entry, then an item of its menu."""
        entries = [e for e in self._find(".lm-MenuBar-itemLabel") if e.text.strip() == top]
        assert entries, f"no menu {top!r}"
        entries[0].click()
        items = wait_for(lambda: [e for e in self._find(".lm-Menu-itemLabel") if e.text.strip() == item], 10,
                         f"menu item {item!r}")
        items[0].click()

    def prompts(self) -> list[str]:
        return [e.text.strip() for e in self._find(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt")]

    def run_all(self, seconds: float) -> None:
        """Run ▸ Run All Cells, and wait until every code cell has run and the kernel is idle."""
        self.menu("Run", "Run All Cells")
        wait_for(lambda: any("[*]" in p for p in self.prompts()), 20, "Run All to start")
        wait_for(lambda: (all(p.startswith("[") and p[1:-2].isdigit() for p in self.prompts())
                          and self._idle_kernel()), seconds, f"{self.name}: Run All to finish")

    def output_texts(self) -> list[str]:
        return [e.text for e in self._find(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output")]

    def error_outputs(self) -> list[str]:
        css = ('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output'
               '[data-mime-type="application/vnd.jupyter.stderr"], .jp-RenderedText[data-mime-type='
               '"application/vnd.jupyter.error"]')
        errors = [e.text for e in self._find(css)]
        return [t for t in errors + self.output_texts() if "Traceback" in t or "Error displaying" in t]

    def dashboard(self, index: int = 0) -> Any:
        boards = wait_for(lambda: self._find(".pbmarl-dashboard"), 20, "the dashboard to render as a widget")
        return boards[index]

    def iteration(self, board: Any) -> int:
        text = board.find_element(self.by.CSS_SELECTOR, ".pbmarl-iteration").text
        return int(text.split()[-1])

    def click(self, board: Any, label: str) -> None:
        buttons = [b for b in board.find_elements(self.by.CSS_SELECTOR, "button") if b.text.strip() == label]
        assert buttons, f"no {label!r} button in the dashboard"
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", buttons[0])
        buttons[0].click()

    def add_cell_and_run(self, source: str, seconds: float = 60) -> None:
        """Append a code cell at the end with `source` and run it (Shift+Enter), as a person types it."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        before = len(self.prompts())
        cells = self._find(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cells[-1])
        cells[-1].find_element(self.by.CSS_SELECTOR, ".jp-InputPrompt, .jp-InputArea-prompt").click()
        ActionChains(self.driver).send_keys(Keys.ESCAPE).send_keys("b").perform()
        editor = wait_for(lambda: self._find(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-active .cm-content"),
                          10, "the new cell's editor")[0]
        editor.click()
        editor.send_keys(source)
        ActionChains(self.driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
        wait_for(lambda: len(self.prompts()) > before and self.prompts()[before].strip("[]: ").isdigit()
                 and self._idle_kernel(), seconds, f"the cell {source!r} to run")
        cell = self._find(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")[before]
        outputs = [e.text for e in cell.find_elements(self.by.CSS_SELECTOR, ".jp-OutputArea-output")]
        assert not [t for t in outputs if "Error" in t], f"the cell {source!r} failed: {outputs}"


def serve(folder: Path, notebooks: list[Path], *, smoke: bool = True) -> Lab:
    """A JupyterLab serving copies of `notebooks` in `folder` (a new, empty one), each at its path
    relative to the repository (so ``tutorials/…`` links and relative paths still work)."""
    folder.mkdir(parents=True)
    for path in notebooks:
        target = folder / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return Lab(folder, smoke=smoke)


def lab_server(tmp_path_factory: pytest.TempPathFactory, notebooks: list[Path]) -> Iterator[Lab]:
    """`serve` in a temporary folder at the smoke budget; the fixture's body."""
    lab = serve(tmp_path_factory.mktemp("lab") / "root", notebooks)
    try:
        yield lab
    finally:
        lab.stop()
