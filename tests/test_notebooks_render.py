"""Notebooks as a reader meets them: executed and exported to HTML, figures exported to PNG, and the
stored files clean (no outputs, no library code, a SMOKE switch).

Every notebook is also executed by ``pytest --nbmake tutorials notebooks``; this file checks what
nbmake does not: that the rendered page really holds the pictures and tables.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted([*ROOT.glob("tutorials/*.ipynb"), *ROOT.glob("notebooks/*.ipynb")])
SMOKE_LINE = 'SMOKE = os.environ.get("PBMARL_SMOKE", "0") == "1"'


@pytest.fixture
def kernel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel inherits this environment: small budgets, pbmarl importable, the inline backend."""
    monkeypatch.setenv("PBMARL_SMOKE", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # Agg in the kernel would draw no pictures


def test_tutorial_renders_to_html_with_its_figures_and_tables(kernel_env: None) -> None:
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExecutePreprocessor

    path = ROOT / "tutorials" / "02_payoff_tables.ipynb"
    notebook = nbformat.read(path, as_version=4)
    executor = ExecutePreprocessor(timeout=300, kernel_name="python3")
    executor.preprocess(notebook, {"metadata": {"path": str(path.parent)}})
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # the exact and the sampled heatmaps, each shown once
    html, _ = HTMLExporter().from_notebook_node(notebook)
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', html)) >= 2
    assert '<table border="1" class="dataframe"' in html  # table.to_frame() and friends
    assert "FillResult(20 cells" in html  # the sampled fill reports what it did
    assert "player_0" in html and "p1/3" in html  # the table's ids made it to the page
    assert "Traceback" not in html


def test_dashboard_figure_exports_to_png_with_every_point(tmp_path: Path) -> None:
    import pbmarl as pb
    from pbmarl.widgets import Dashboard

    psro = pb.PSRO(pb.load_game("kuhn_poker"), solver="nash", seed=0)
    dash = Dashboard(psro, progress=False, dpi=50)
    dash.run(3)
    path = tmp_path / "dashboard.png"
    dash.figure.savefig(path, dpi=50)
    pixels = matplotlib.image.imread(path)
    width, height = dash.figure.get_size_inches() * 50
    assert pixels.shape[:2] == (round(height), round(width))
    line = dash.exploitability_line
    assert list(line.get_xdata()) == [0, 1, 2, 3]
    assert list(line.get_ydata()) == pytest.approx(list(psro.history["exploitability"]))
    assert dash.table_axes.images[0].get_array().shape == (4, 4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_is_stored_clean(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert notebook.cells[0].cell_type == "markdown" and notebook.cells[0].source.startswith("# ")
    stored = [cell for cell in code if cell.outputs or cell.execution_count is not None]
    assert not stored, f"{path.name} holds outputs: run python tools/strip_notebooks.py"
    assert any(SMOKE_LINE in cell.source for cell in code), f"{path.name} does not read the SMOKE switch"
    for cell in code:
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        defined = [node for node in ast.walk(ast.parse(source))
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        assert not defined, f"{path.name} defines {[n.name for n in defined]}: library code belongs in pbmarl"


def test_every_tutorial_is_numbered() -> None:
    names = [p.name for p in sorted((ROOT / "tutorials").glob("*.ipynb"))]
    assert names and all(name[:2].isdigit() and name[2] == "_" for name in names)
    assert [int(name[:2]) for name in names] == list(range(1, len(names) + 1))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_longer_experiment_is_announced_in_the_first_cell(path: Path) -> None:
    """A notebook with a FULL switch (its real experiment runs past a sitting) says so up front."""
    notebook = nbformat.read(path, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    if not re.search(r"^FULL = False\b", code, flags=re.MULTILINE):
        return
    first = notebook.cells[0].source
    assert "FULL = True" in first and re.search(r"about [\d.]+ minutes", first), (
        f"{path.name}: the first cell must give the expected time and name FULL = True")


@pytest.mark.ray
def test_quiet_ray_start_prints_one_line_of_its_own(tmp_path: Path) -> None:
    """What tutorial 06 shows: pbmarl's summary on stdout, none of Ray's INFO lines on stderr."""
    import subprocess
    import sys

    code = "import pbmarl as pb; pb.init_ray(num_cpus=1, quiet=True); import ray; ray.shutdown()"
    env = dict(os.environ, RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "disabled"), RAY_ADDRESS="")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env,
                          cwd=tmp_path)
    if done.returncode != 0 and "Ray did not start on this machine" in done.stderr:
        pytest.skip("Ray could not start on this overloaded machine (init_ray's own diagnosis)")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pbmarl: started a local Ray instance"), done.stdout
    assert "1 CPUs" in lines[0] and "1 node(s)" in lines[0]
    assert "Started a local Ray instance" not in done.stderr and " INFO " not in done.stderr, done.stderr[-2000:]
