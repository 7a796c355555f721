"""Strip outputs, execution counts and run metadata from the tutorials and notebooks.

Notebooks are stored without outputs (the test suite executes them). Run this before committing:

    python tools/strip_notebooks.py              # strip every tutorials/*.ipynb and notebooks/*.ipynb in place
    python tools/strip_notebooks.py --check      # exit 1, listing them, if any notebook holds outputs
    python tools/strip_notebooks.py path.ipynb   # only these files
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
#: notebook-level metadata worth keeping; everything else (widget state, versions) is run noise
KEEP_METADATA = ("kernelspec", "language_info")


def strip(notebook: nbformat.NotebookNode) -> bool:
    """Remove outputs and run metadata in place; return whether anything changed."""
    before = nbformat.writes(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata = {}
    notebook.metadata = {k: v for k, v in notebook.metadata.items() if k in KEEP_METADATA}
    notebook.metadata.get("language_info", {}).pop("version", None)
    return nbformat.writes(notebook) != before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: tutorials/ and notebooks/)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook needs stripping")
    args = parser.parse_args(argv)
    paths = args.paths or sorted([*ROOT.glob("tutorials/*.ipynb"), *ROOT.glob("notebooks/*.ipynb")])
    dirty = []
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        if strip(notebook):
            dirty.append(path)
            if not args.check:
                nbformat.write(notebook, path)
    for path in dirty:
        print(f"{'needs stripping' if args.check else 'stripped'}: {path}")
    return 1 if args.check and dirty else 0


if __name__ == "__main__":
    sys.exit(main())
