"""Build the documentation site: ``python docs/build.py`` (or ``make docs``).

1. executes the tutorials and notebooks on small budgets (docs/notebooks.py; skipped where a copy's stamp
   shows its notebook and the library unchanged since it ran),
2. builds the HTML with warnings as errors and nitpicky cross-references
   (``sphinx-build -W --keep-going -n``; guide pages' code runs during it),
3. checks every internal link and anchor of the built site (docs/check_links.py), that every tutorial and
   notebook page holds all the figures its notebook drew, and, in headless Chromium (docs/check_site.py), that
   every page loads without a JavaScript error and draws all its images, and that the search box finds
   `exploitability`. A page that fails any of these fails the build.

The site is docs/_build/html/index.html and works offline. ``--prose`` skips the notebooks (a quick look at the
guide pages); it is never what CI runs. ``--screenshots DIR`` also saves a guide page, an API page, a tutorial
figure and a benchmark page as PNGs (docs/_screenshots is ignored by git).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    prose = "--prose" in argv
    shots = Path(argv[argv.index("--screenshots") + 1]) if "--screenshots" in argv[:-1] else None
    start = time.perf_counter()
    env = dict(os.environ)
    if prose:
        env["PBMARL_DOCS_NOTEBOOKS"] = "0"
    else:
        if subprocess.call([sys.executable, str(DOCS / "notebooks.py")]) != 0:
            return 1
    executed = time.perf_counter()
    out = DOCS / "_build" / "html"
    jobs = os.environ.get("PBMARL_DOCS_JOBS", "2")
    code = subprocess.call([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-j", jobs, "-b", "html",
                            str(DOCS), str(out)], env=env)
    built = time.perf_counter()
    if code == 0:
        code = subprocess.call([sys.executable, str(DOCS / "check_links.py"), str(out)])
    if code == 0 and not prose:
        code = check_pages(out, shots)
    print(f"docs: notebooks {executed - start:.0f} s, sphinx {built - executed:.0f} s, total "
          f"{time.perf_counter() - start:.0f} s -> {out / 'index.html'}")
    return code


def check_pages(out: Path, screenshots: Path | None = None) -> int:
    """Every figure a notebook drew is on its page; in headless Chromium every page loads and draws its images, and
    the offline search finds `exploitability` (docs/check_site.py)."""
    missing = []
    for copy in sorted(p for folder in ("tutorials", "notebooks") for p in (DOCS / folder).glob("*.ipynb")):
        figures = sum("image/png" in output.get("data", {}) for cell in json.loads(copy.read_text())["cells"]
                      for output in cell.get("outputs", []))
        page = out / copy.parent.name / f"{copy.stem}.html"
        shown = page.read_text(encoding="utf-8").count("<img") if page.exists() else -1
        if shown < figures:
            missing.append(f"{copy.parent.name}/{copy.stem}: {figures} figures, {shown} on the page")
    if missing:
        print("pages: figures missing: " + "; ".join(missing), file=sys.stderr)
        return 1
    print("pages: every notebook figure is on its page")
    import check_site

    reason = check_site.missing_browser()
    if reason is not None:  # CI installs the browser (.ci/run); a local build says what was not checked
        print(f"pages: not opened in a browser: {reason}", file=sys.stderr if os.environ.get("CI") else sys.stdout)
        return 1 if os.environ.get("CI") else 0
    return check_site.main([str(out)] + (["--screenshots", str(screenshots)] if screenshots else []))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
