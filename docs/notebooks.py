"""Execute the tutorials and research notebooks for the docs, on the test suite's small budgets.

Each notebook is copied from ``tutorials/`` or ``notebooks/`` into the same folder under ``docs/``,
executed there with ``PBMARL_SMOKE=1`` (two at a time; the ones that start Ray one after another, as
the test suite keeps them), and stamped with the hash of its source and of the library it ran
against. ``docs/conf.py`` refuses a copy whose stamp does not match the files as they are now, so an
output from an older notebook or an older library is never published as current.

    python docs/notebooks.py            # every notebook
    python docs/notebooks.py 04 12      # those whose name contains one of these
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FOLDERS = ("tutorials", "notebooks")
RAY_CELL = re.compile(r"init_ray\(|ray\.init\(|backend=\\?[\"']ray")  # as tests/conftest.py groups them
STAMP = "pbmarl_docs"
WIDGET = "application/vnd.jupyter.widget-view+json"
PROGRESS = re.compile(r"\d+/\d+ \[|\d+%\||\d+\w* \[\d\d:\d\d|\?\w+/s\]|\w+/s\]")  # tqdm's text form of its bar
WIDGET_NOTE = "[an interactive widget (buttons and live plots): it works in Jupyter, with a running kernel]"
NOTE = (
    "```{{note}}\nThis page was executed when the documentation was built, with `PBMARL_SMOKE=1`: the small "
    "budgets the test suite uses, so curves are shorter and numbers rougher than at full budget. "
    "Download the notebook ({{download}}`{folder}/{name} <../../{folder}/{name}>`, stored without outputs) and run "
    "it for the full story.\n```"
)


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*.ipynb"))


def library_hash() -> str:
    """The hash of every Python file of the package and of this file: a change makes every output stale."""
    digest = hashlib.sha256(Path(__file__).read_bytes())  # and this executor: how a copy is made
    for path in sorted((ROOT / "pbmarl").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def target(source: Path) -> Path:
    return DOCS / source.parent.name / source.name


def stale(source: Path, lib: str) -> str | None:
    """Why the executed copy of ``source`` may not be published, or None when it is current."""
    import nbformat

    copy = target(source)
    if not copy.exists():
        return f"{copy.relative_to(ROOT)} was never executed"
    stamp = nbformat.read(copy, as_version=4).metadata.get(STAMP, {})
    if stamp.get("source_sha256") != file_hash(source):
        return f"{source.relative_to(ROOT)} changed since {copy.relative_to(ROOT)} was executed"
    if stamp.get("library_sha256") != lib:
        return f"pbmarl changed since {copy.relative_to(ROOT)} was executed"
    return None


def execute(source: Path, lib: str) -> tuple[str, float]:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(source, as_version=4)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pbmarl-docs-") as work:  # run folders a notebook writes land here
        try:
            NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=False,
                           resources={"metadata": {"path": work}}).execute()
        except Exception as error:  # name the notebook; keep the cell and the exception, not the whole traceback
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
            raise RuntimeError(f"{source.relative_to(ROOT)}: {text[:800]}\n...\n{text[-1200:]}") from None
    seconds = time.perf_counter() - start
    for cell in notebook.cells:  # a widget needs a live kernel: say what is there instead of printing its repr
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET in data:
                if PROGRESS.search(str(data.get("text/plain", ""))):
                    continue  # a progress bar, frozen at its start: noise on a static page
                data.pop(WIDGET)
                data["text/plain"] = WIDGET_NOTE
            kept.append(output)
        if cell.cell_type == "code":
            cell.outputs = kept
    note = nbformat.v4.new_markdown_cell(NOTE.format(folder=source.parent.name, name=source.name))
    if notebook.nbformat_minor < 5:  # cell ids came with nbformat 4.5
        note.pop("id", None)
    title = 1 if notebook.cells and notebook.cells[0].cell_type == "markdown" else 0
    notebook.cells.insert(title, note)
    notebook.metadata[STAMP] = {"source_sha256": file_hash(source), "library_sha256": lib, "smoke": True,
                                "seconds": round(seconds, 1)}
    copy = target(source)
    copy.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, copy)
    return source.name, seconds


def _chain(paths: list[Path], lib: str) -> list[tuple[str, float]]:
    return [execute(path, lib) for path in paths]


def main(argv: list[str]) -> int:
    os.environ["PBMARL_SMOKE"] = "1"
    os.environ.pop("MPLBACKEND", None)  # Agg in the kernel would draw no pictures
    os.environ["TQDM_DISABLE"] = "1"  # a progress bar frozen on a static page is noise
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    lib = library_hash()
    chosen = [p for p in sources() if not argv or any(a in p.name for a in argv)]
    todo = [p for p in chosen if stale(p, lib) is not None]
    for p in chosen:
        if p not in todo:
            print(f"current   {p.parent.name}/{p.name}")
    ray = [p for p in todo if RAY_CELL.search(p.read_text())]
    rest = [p for p in todo if p not in ray]
    start = time.perf_counter()
    failed = []
    with ProcessPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(_chain, ray, lib)] if ray else []
        jobs += [pool.submit(_chain, [p], lib) for p in rest]
        for job in jobs:
            try:
                for name, seconds in job.result():
                    print(f"executed  {name}  {seconds:.1f} s", flush=True)
            except Exception as error:  # report every notebook that fails, then fail
                failed.append(error)
                print(f"FAILED    {error}", file=sys.stderr, flush=True)
    print(f"notebooks: {len(todo) - len(failed)} executed in {time.perf_counter() - start:.0f} s, "
          f"{len(failed)} failed, {len(chosen) - len(todo)} current")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
