"""Build the documentation site: ``python docs/build.py`` (or ``make docs``).

1. executes the tutorials and notebooks on small budgets (docs/notebooks.py; skipped where a copy's stamp
   shows its notebook and the library unchanged since it ran),
2. builds the HTML with warnings as errors and nitpicky cross-references
   (``sphinx-build -W --keep-going -n``; guide pages' code runs during it),
3. checks every internal link and anchor of the built site (docs/check_links.py), that every tutorial and
   notebook page shows its figures, and, in headless Chromium, that the search box finds `exploitability`.

The site is docs/_build/html/index.html and works offline. ``--prose`` skips the notebooks (a quick look at the
guide pages); it is never what CI runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    prose = "--prose" in argv
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
        code = check_pages(out)
    print(f"docs: notebooks {executed - start:.0f} s, sphinx {built - executed:.0f} s, total "
          f"{time.perf_counter() - start:.0f} s -> {out / 'index.html'}")
    return code


def check_pages(out: Path) -> int:
    """Every figure a notebook drew is on its page; the offline search finds `exploitability` (headless Chromium)."""
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
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("pages: no chromium, so the search box was not tried (apt-get install chromium)",
              file=sys.stderr if os.environ.get("CI") else sys.stdout)
        return 1 if os.environ.get("CI") else 0
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--dump-dom", (out / "search.html").resolve().as_uri() + "?q=exploitability"],
                         capture_output=True, text=True, timeout=120).stdout
    found = re.search(r"found (\d+) page", dom)
    if not found or int(found.group(1)) == 0:
        print("pages: the search box found nothing for 'exploitability'", file=sys.stderr)
        return 1
    print(f"pages: every notebook figure is on its page; search finds 'exploitability' on {found.group(1)} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
