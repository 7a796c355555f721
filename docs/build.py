"""Build the documentation site: ``python docs/build.py`` (or ``make docs``).

1. executes the tutorials and notebooks on small budgets (docs/notebooks.py; skipped where a copy's stamp
   shows its notebook and the library unchanged since it ran),
2. builds the HTML with warnings as errors and nitpicky cross-references
   (``sphinx-build -W --keep-going -n``; guide pages' code runs during it),
3. checks every internal link and anchor of the built site (docs/check_links.py).

The site is docs/_build/html/index.html and works offline. ``--prose`` skips the notebooks (a quick look at the
guide pages); it is never what CI runs.
"""

from __future__ import annotations

import os
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
    print(f"docs: notebooks {executed - start:.0f} s, sphinx {built - executed:.0f} s, total "
          f"{time.perf_counter() - start:.0f} s -> {out / 'index.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
