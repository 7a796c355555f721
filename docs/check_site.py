"""Check a built site as a reader's browser shows it: headless Chromium through selenium and Debian's chromedriver.

Every HTML page is opened from disk (the site works offline): it must finish loading with a body, log no error
to the console (a script that fails, a file that is missing), and draw every image it holds (``naturalWidth > 0``:
a figure that is referenced but missing or unreadable fails). The search page must find `exploitability`.
``docs/build.py`` runs this after building; ``--screenshots DIR`` also saves a guide page, an API page, a tutorial
figure and a benchmark page.

    python docs/check_site.py docs/_build/html [--screenshots docs/_screenshots]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

#: a page of each kind a reader opens, and what to bring to the top before the screenshot (CSS; first match)
SCREENSHOTS = {
    "guide": ("guide/psro.html", "div.cell:has(img)"),
    "api": ("api/generated/pbmarl.PSRO.html", "dl.py.class > dt"),
    "tutorial": ("tutorials/10_cooperative_marl.html", "div.cell:has(img)"),
    "benchmark": ("benchmarks/control.html", "img"),
}
INSTALL = "apt-get install -y chromium chromium-driver && pip install selenium"


def missing_browser() -> str | None:
    """Why the site cannot be checked here (what to install), or None."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    return f"needs {', '.join(missing)}: {INSTALL}" if missing else None


def chrome() -> Any:
    """Headless Chromium that keeps the page's console errors (``driver.get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1400,1000", "--disable-extensions", "--allow-file-access-from-files"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


#: per page: whether it loaded with a body, and the images not drawn (src, cut short)
PAGE_STATE = """
return [document.readyState === "complete" && document.body !== null && document.body.innerText.trim().length > 0,
        Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(-90))];
"""


def check_page(driver: Any, site: Path, page: Path) -> list[str]:
    """What is wrong with one page in the browser (empty when nothing is)."""
    name = page.relative_to(site).as_posix()
    driver.get(page.resolve().as_uri())
    loaded, broken = driver.execute_script(PAGE_STATE)
    if not loaded:  # images may still be decoding on a large page: give them a moment before judging
        time.sleep(1)
        loaded, broken = driver.execute_script(PAGE_STATE)
    problems = [] if loaded else [f"{name}: did not load (no body text)"]
    problems += [f"{name}: image not drawn: {src}" for src in broken]
    problems += [f"{name}: console error: {entry['message'][-200:]}" for entry in driver.get_log("browser")
                 if entry.get("level") == "SEVERE"]
    return problems


def search_hits(driver: Any, site: Path, word: str, seconds: float = 30) -> int:
    """How many pages the site's own search box lists for `word` (Sphinx's search page, run offline)."""
    from selenium.webdriver.common.by import By

    driver.get((site / "search.html").resolve().as_uri() + f"?q={word}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, "#search-results .search-summary"))
        if "Search finished" in status or "did not match" in status:  # Sphinx's searchtools.js is done
            return len(driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li"))
        time.sleep(0.25)
    return len(driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li"))


def screenshot(driver: Any, site: Path, page: str, target: str, path: Path) -> Path:
    """Save `page` as a PNG with the first element matching `target` near the top of the window (the page's top when
    none matches)."""
    from selenium.webdriver.common.by import By

    driver.get((site / page).resolve().as_uri())
    found = driver.find_elements(By.CSS_SELECTOR, target)
    for _ in range(2):  # again once the images above it have loaded and moved it
        if found:
            driver.execute_script("window.scrollTo({top: arguments[0].getBoundingClientRect().top + window.scrollY - 60, "
                                  "behavior: 'instant'});", found[0])  # the theme scrolls smoothly otherwise
        deadline = time.monotonic() + 10
        while (time.monotonic() < deadline
               and not driver.execute_script("return Array.from(document.images).every(i => i.complete)")):
            time.sleep(0.1)
    time.sleep(0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


def check(site: Path, *, word: str = "exploitability", screenshots: Path | None = None) -> tuple[list[str], int, int]:
    """``(problems, pages checked, search hits)``: every page of `site` opened, the search tried, screenshots saved."""
    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)
    if not pages:
        return [f"{site}: no HTML pages (was the site built?)"], 0, 0
    driver = chrome()
    try:
        problems = [problem for page in pages for problem in check_page(driver, site, page)]
        if screenshots is not None:  # before the search, whose highlighted words Sphinx keeps for the next pages
            for kind, (page, target) in SCREENSHOTS.items():
                if not (site / page).exists():
                    problems.append(f"{page}: no such page for the {kind} screenshot")
                    continue
                shot = screenshot(driver, site, page, target, screenshots / f"{kind}.png")
                print(f"site: screenshot {shot}")
        hits = search_hits(driver, site, word) if (site / "search.html").exists() else 0
        if hits == 0:
            problems.append(f"search.html: the search box found nothing for {word!r}")
    finally:
        driver.quit()
    return problems, len(pages), hits


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built site, e.g. docs/_build/html")
    parser.add_argument("--screenshots", type=Path, default=None, help="save four PNGs in this folder")
    args = parser.parse_args(argv)
    reason = missing_browser()
    if reason is not None:
        print(f"site: cannot check the pages in a browser: {reason}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    problems, pages, hits = check(args.site, screenshots=args.screenshots)
    for problem in problems:
        print(f"site: {problem}", file=sys.stderr)
    print(f"site: {pages} pages opened in headless Chromium in {time.perf_counter() - start:.0f} s, "
          f"{len(problems)} problems; the search finds 'exploitability' on {hits} pages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
