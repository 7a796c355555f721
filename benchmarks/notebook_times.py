"""Full-budget Run All time of every notebook, measured the way a reader meets it: JupyterLab in headless
Chromium (the machinery of the browser tests, ``tests/browser_lab.py``), ``PBMARL_SMOKE`` unset.

    python benchmarks/notebook_times.py --list
    flock /tmp/pbmarl-heavy.lock python benchmarks/notebook_times.py --only 01 02 03
    flock /tmp/pbmarl-heavy.lock python benchmarks/notebook_times.py --only pettingzoo --timeout 600

Each notebook gets a fresh JupyterLab server and browser (nothing restored from a previous one), is
opened, given Run ▸ Run All Cells, and timed from the click until every code cell shows its
execution count and the kernel is idle. The run then fails if an output shows a traceback or a widget
drawn as text. The reference is the sitting the issue allows: 180 s on 2 cores.

Every row is appended to ``benchmarks/results/notebook_times.csv`` with the date, the git commit
(``+dirty`` when the notebook differs from it), the load average before and after (the machine is
shared: the wall time alone says little without it), the CPU seconds of the kernel's process tree
(the processes still alive at the end, so Ray workers shut down earlier are not counted) and the
command.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser_lab import WIDGET_AS_TEXT, Lab, NotebookPage, chrome, missing_browser, serve, wait_for  # noqa: E402

RESULTS = Path(__file__).with_name("results") / "notebook_times.csv"
FIELDS = ["date", "commit", "notebook", "seconds", "status", "load_start", "load_end", "kernel_cpu_seconds",
          "command"]
#: where a failed run's screenshot goes
SCREENSHOTS = Path(tempfile.gettempdir()) / "pbmarl-notebook-times"
#: the sitting issue 18 allows for Run All at the default budget, on 2 cores
LIMIT_SECONDS = 180.0


def notebooks() -> list[Path]:
    return sorted([*ROOT.glob("tutorials/*.ipynb"), *ROOT.glob("notebooks/*.ipynb")])


def _commit(path: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", str(path)], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _kernel_cpu_seconds(lab: Lab) -> float:
    """CPU seconds of the kernel processes and their live descendants (and their reaped children)."""
    import psutil

    total = 0.0
    for kernel in psutil.Process(lab.process.pid).children(recursive=True):
        try:
            if "ipykernel" not in " ".join(kernel.cmdline()):
                continue
            for proc in [kernel, *kernel.children(recursive=True)]:
                times = proc.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            continue
    return total


def _run_all(page: NotebookPage, timeout: float) -> tuple[float, str]:
    """Run All; (seconds from the click until every cell has run and the kernel is idle, status)."""
    start = time.monotonic()
    page.menu("Run", "Run All Cells")
    wait_for(lambda: any("[*]" in p for p in page.prompts()), 60, "Run All to start", poll=0.1)
    while True:
        # polled every second: the poll itself costs the browser some CPU, which the notebook would feel
        time.sleep(1.0)
        seconds = time.monotonic() - start
        prompts = page.prompts()
        if not any("[*]" in p for p in prompts) and page._idle_kernel():
            ran = all(p.startswith("[") and p[1:-2].isdigit() for p in prompts)
            errors = page.error_outputs()
            if errors:
                return seconds, "error: " + " | ".join(errors[0].strip().splitlines()[-1:])[:200]
            if not ran:
                return seconds, "error: not every cell ran"
            as_text = [t for t in page.output_texts() for marker in WIDGET_AS_TEXT if marker in t]
            if as_text:
                return seconds, "error: widget as text: " + as_text[0].strip().splitlines()[0][:120]
            return seconds, "ok"
        if seconds > timeout:
            return seconds, f"timeout: still running after {timeout:.0f} s"


def time_notebook(path: Path, folder: Path, timeout: float) -> dict[str, Any]:
    name = str(path.relative_to(ROOT))
    lab = serve(folder, [path], smoke=False)
    driver = None
    try:
        driver = chrome()
        page = NotebookPage(driver, lab, name)
        load_start = _load()
        seconds, status = _run_all(page, timeout)
        load_end = _load()
        cpu = _kernel_cpu_seconds(lab)
        if status != "ok":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # outside `folder`, which is deleted at the end
            shot = SCREENSHOTS / f"{path.stem}.png"
            driver.save_screenshot(str(shot))
            status += f" (screenshot {shot})"
    finally:
        if driver is not None:
            driver.quit()
        lab.stop()
    return {"notebook": name, "seconds": round(seconds, 1), "status": status, "load_start": load_start,
            "load_end": load_end, "kernel_cpu_seconds": round(cpu, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", default=None,
                        help="notebooks whose path contains one of these strings (default: all)")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up on a notebook after this many seconds")
    parser.add_argument("--list", action="store_true", help="print the notebooks that would run, and stop")
    parser.add_argument("--no-save", action="store_true", help="print only; append nothing to the CSV")
    args = parser.parse_args(argv)
    chosen = [p for p in notebooks()
              if args.only is None or any(part in str(p.relative_to(ROOT)) for part in args.only)]
    if not chosen:
        parser.error(f"--only {args.only} matches no notebook; known: "
                     + ", ".join(str(p.relative_to(ROOT)) for p in notebooks()))
    if args.list:
        print("\n".join(str(p.relative_to(ROOT)) for p in chosen))
        return 0
    reason = missing_browser()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    command = "python benchmarks/notebook_times.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"{'notebook':45s} {'seconds':>8s} {'limit':>6s} {'kernel cpu s':>12s}  {'load before':15s} "
          f"{'load after':15s} status", flush=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pbmarl-notebook-times-") as scratch:
        for index, path in enumerate(chosen):
            row = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "commit": _commit(path), "command": command}
            try:
                row |= time_notebook(path, Path(scratch) / str(index) / "root", args.timeout)
            except Exception as exc:  # noqa: BLE001 - one notebook that cannot open must not stop the others
                row |= {"notebook": str(path.relative_to(ROOT)), "seconds": "", "status": f"error: {exc}"[:300],
                        "load_start": _load(), "load_end": _load(), "kernel_cpu_seconds": ""}
            failed += row["status"] != "ok"
            print(f"{row['notebook']:45s} {row['seconds']!s:>8s} {LIMIT_SECONDS:6.0f} "
                  f"{row['kernel_cpu_seconds']!s:>12s}  {row['load_start']:15s} {row['load_end']:15s} "
                  f"{row['status']}", flush=True)
            if not args.no_save:
                new = not RESULTS.exists()
                with RESULTS.open("a", newline="") as handle:
                    writer = csv.DictWriter(handle, fieldnames=FIELDS)
                    if new:
                        writer.writeheader()
                    writer.writerow({key: row[key] for key in FIELDS})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
