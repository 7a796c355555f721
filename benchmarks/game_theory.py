"""Exact game-theoretic breadth: the sequence-form LP, XDO, PSRO-Nash and JPSRO, beside their references.

    python benchmarks/game_theory.py                 # every part
    python benchmarks/game_theory.py --only lp       # lp | xdo | jpsro  (xdo includes PSRO at matched budgets)
    python benchmarks/game_theory.py --only jpsro --openspiel-jpsro   # also run OpenSpiel's JPSRO (minutes)

| measure | bar | reference |
|---|---|---|
| LP time on Leduc | < 0.5 s | OpenSpiel's cvxpy `sequence_form_lp`, run here when cvxpy imports (in its own
  library folder, CVXPY_PATH, default /work/venvs/cvxpy-lib), else the cited 0.9 s |
| XDO on Leduc | exploitability < 2e-3 within 20 iterations | the authors' data: 0.00096 at iteration 16 |
| PSRO-Nash on Leduc | exploitability at XDO's iterations and wall time | — |
| JPSRO on 3-player Kuhn | summed CCE gap <= 0.06 at iteration 10, <= 1e-8 at convergence | OpenSpiel's probe:
  2.06, 0.83, 0.63, 0.49, ..., 0.052 at iteration 10 |
| JPSRO wall time | <= 1/10 of OpenSpiel's | OpenSpiel's jpsro, run here with --openspiel-jpsro (needs
  cvxpy), else the cited 48 s at iteration 10 |

Every printed row is appended to ``benchmarks/results/game_theory.csv`` with the date, the git
commit and the command.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbmarl as pb  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "game_theory.csv"
FIELDS = ["date", "commit", "command", "measure", "value", "bar", "reference", "met"]
CITED_LP_SECONDS = 0.9
XDO_AUTHORS = {5: 0.92, 8: 0.090, 13: 0.0078, 16: 0.00096}
OPENSPIEL_JPSRO = [2.06, 0.83, 0.63, 0.49]
OPENSPIEL_JPSRO_10 = 0.052
OPENSPIEL_JPSRO_SECONDS = 48.0

_OPENSPIEL_LP = """
import sys, time
import pyspiel
from open_spiel.python.algorithms import sequence_form_lp
game = pyspiel.load_game("leduc_poker")
best = float("inf")
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    v0, v1, _, _ = sequence_form_lp.solve_zero_sum_game(game)
    best = min(best, time.perf_counter() - start)
print(best, v0)
"""


_OPENSPIEL_JPSRO = """
import sys, time
import pyspiel
from open_spiel.python.algorithms import jpsro
game = pyspiel.load_game("kuhn_poker", {"players": 3})
start = time.perf_counter()
def callback(iteration, *args):
    gaps = args[9]  # train_meta_gaps: the full-game gap of each iteration's joint
    print("ITER", iteration, time.perf_counter() - start, float(sum(gaps[-1])), flush=True)
    return args[-1]
jpsro.run_loop(game, "kuhn3", iterations=int(sys.argv[1]), callback=callback)
"""


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Rows:
    """Rows printed side by side and appended to the results CSV."""

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []
        self.stamp = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "commit": _commit(), "command": " ".join(["python"] + sys.argv)}

    def add(self, measure: str, value: str, bar: str, reference: str, met: bool | None) -> None:
        flag = "" if met is None else ("met" if met else "NOT met")
        print(f"  {measure:<44} {value:<26} bar {bar:<28} reference {reference}  {f'[{flag}]' if flag else ''}")
        self.rows.append({**self.stamp, "measure": measure, "value": value, "bar": bar, "reference": reference,
                          "met": flag})

    def write(self) -> None:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        new = not RESULTS.exists()
        with open(RESULTS, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            writer.writerows(self.rows)
        print(f"\nappended {len(self.rows)} rows to {RESULTS.relative_to(ROOT)}")


def _cvxpy_env() -> dict[str, str]:
    path = os.environ.get("CVXPY_PATH", "/work/venvs/cvxpy-lib")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))}


def openspiel_jpsro(iterations: int) -> tuple[list[tuple[int, float, float]], str]:
    """OpenSpiel's JPSRO(MGCCE) on 3-player Kuhn: ``(iteration, seconds, summed gap)`` per iteration."""
    try:
        out = subprocess.run([sys.executable, "-c", _OPENSPIEL_JPSRO, str(iterations)], env=_cvxpy_env(),
                             capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return [], "timed out"
    rows = [(int(a), float(b), float(c)) for _, a, b, c in
            (line.split() for line in out.stdout.splitlines() if line.startswith("ITER "))]
    return rows, ("" if out.returncode == 0 else (out.stderr.strip().splitlines() or ["failed"])[-1])


def openspiel_lp_seconds(repeats: int) -> tuple[float | None, str]:
    """OpenSpiel's cvxpy LP on Leduc in a subprocess that sees cvxpy's own library folder."""
    try:
        out = subprocess.run([sys.executable, "-c", _OPENSPIEL_LP, str(repeats)], env=_cvxpy_env(),
                             capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1]
    seconds, value = out.stdout.split()
    return float(seconds), f"value {float(value):.7f}"


def part_lp(rows: Rows, repeats: int) -> None:
    print("\nSequence-form LP on Leduc poker")
    game = pb.load_game("leduc_poker")
    start = time.perf_counter()
    game.tree()
    tree_seconds = time.perf_counter() - start
    best, sol = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        sol = pb.sequence_form_lp(game)
        best = min(best, time.perf_counter() - start)
    assert sol is not None
    ex = pb.exploitability(game, list(sol.policies))
    theirs, note = openspiel_lp_seconds(repeats)
    reference = (f"OpenSpiel cvxpy LP {theirs:.3f} s here ({note})" if theirs is not None
                 else f"OpenSpiel cvxpy LP {CITED_LP_SECONDS} s (cited; not run here: {note})")
    rows.add("LP time on Leduc (best of runs, tree built)", f"{best:.3f} s", "< 0.5 s", reference, best < 0.5)
    rows.add("LP tree build (once per game, cached)", f"{tree_seconds:.3f} s", "-", "-", None)
    rows.add("LP value on Leduc", f"{sol.value:.7f}", "-0.0856064 +- 1e-6", "published value",
             abs(sol.value + 0.0856064) < 1e-6)
    rows.add("LP policies' NashConv", f"{ex.nash_conv:.2e}", "< 1e-9", "-", ex.nash_conv < 1e-9)


def part_xdo(rows: Rows, iterations: int) -> None:
    print("\nXDO (CFR+ restricted games, tau halving) and PSRO-Nash on Leduc poker")
    xdo = pb.XDO("leduc_poker", stop_exploitability=1e-3, max_iterations=iterations - 1)
    xdo.run(progress=False)  # iterations 0 .. iterations-1 (0 comes with the run), or fewer once converged
    for record in xdo.records:
        ref = XDO_AUTHORS.get(record.iteration)
        print(f"    {record}" + (f"   (authors: {ref})" if ref is not None else ""))
    h = xdo.history
    below = h.index[h["exploitability"] < 2e-3]
    first = int(below[0]) if len(below) else None
    last = xdo.records[-1]
    rows.add("XDO: first iteration with exploitability < 2e-3", str(first), "<= 20",
             "authors: 0.0078 at 13, 0.00096 at 16", first is not None and first <= 20)
    rows.add(f"XDO: exploitability at iteration {last.iteration}", f"{last.exploitability:.2e}", "-",
             f"authors at 16: {XDO_AUTHORS[16]}", None)
    rows.add("XDO: wall time", f"{last.wall_time:.2f} s", "-", f"{last.total_inner_iterations} CFR+ iterations",
             None)
    psro = pb.PSRO("leduc_poker", solver="nash")
    matched_iter = None
    start = time.perf_counter()
    while psro.iteration < last.iteration or time.perf_counter() - start < last.wall_time:
        psro.step()
        if psro.iteration == last.iteration:
            matched_iter = psro.records[-1]
        if psro.iteration >= 400:
            break
    assert matched_iter is not None and matched_iter.exploitability is not None
    rows.add(f"PSRO-Nash: exploitability at iteration {last.iteration}", f"{matched_iter.exploitability:.3f}",
             "-", f"XDO {last.exploitability:.2e}", None)
    end = psro.records[-1]
    assert end.exploitability is not None
    rows.add(f"PSRO-Nash: exploitability after XDO's {last.wall_time:.1f} s",
             f"{end.exploitability:.3f} (iter {end.iteration})", "-", f"XDO {last.exploitability:.2e}", None)


def part_jpsro(rows: Rows, iterations: int, *, openspiel: bool) -> None:
    print("\nJPSRO(MGCCE) on 3-player Kuhn poker")
    theirs: list[tuple[int, float, float]] = []
    if openspiel:
        theirs, note = openspiel_jpsro(10)  # its 11 joints: the uniform one and 10 iterations
        print("    OpenSpiel jpsro (its iterations count from 1): " + (", ".join(
            f"{i}: gap {g:.3g} at {t:.1f} s" for i, t, g in theirs) or f"not run ({note})"))
    jpsro = pb.JPSRO("kuhn_poker(players=3)", solver="mgcce", max_iterations=iterations)
    print(f"    {jpsro.records[0]}   (OpenSpiel: {OPENSPIEL_JPSRO[0]})")
    for record in jpsro.run(progress=False):
        ref = OPENSPIEL_JPSRO[record.iteration] if record.iteration < len(OPENSPIEL_JPSRO) else (
            OPENSPIEL_JPSRO_10 if record.iteration == 10 else None)
        print(f"    {record}" + (f"   (OpenSpiel: {ref})" if ref is not None else ""))
    h = jpsro.history
    at10 = h.loc[10] if 10 in h.index else h.iloc[-1]
    rows.add("JPSRO: summed CCE gap at iteration 10", f"{at10['gap']:.4f}", "<= 0.06",
             f"OpenSpiel {OPENSPIEL_JPSRO_10}", bool(at10["gap"] <= 0.06))
    rows.add("JPSRO: summed CCE gap at convergence", f"{h['gap'].iloc[-1]:.2e} (iter {h.index[-1]})", "<= 1e-8",
             "-", bool(h["gap"].iloc[-1] <= 1e-8))
    # OpenSpiel numbers its first joint (the uniform population) 1; pbmarl numbers it 0
    same = [t for i, t, _ in theirs if i == 11]
    reference = f"OpenSpiel {same[0]:.1f} s here" if same else f"OpenSpiel {OPENSPIEL_JPSRO_SECONDS} s (cited)"
    budget = (same[0] if same else OPENSPIEL_JPSRO_SECONDS) / 10
    rows.add("JPSRO: wall time to iteration 10", f"{at10['wall_time']:.2f} s", f"<= {budget:.1f} s", reference,
             bool(at10["wall_time"] <= budget))
    for i, _, gap in theirs:
        if i == 11:
            rows.add("OpenSpiel JPSRO: gap at its 11th joint (pbmarl's iteration 10)", f"{gap:.4f}", "-",
                     f"pbmarl {at10['gap']:.4f}", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["lp", "xdo", "jpsro"], default=None)
    parser.add_argument("--repeats", type=int, default=3, help="LP timing runs (best is kept)")
    parser.add_argument("--iterations", type=int, default=20, help="XDO iterations")
    parser.add_argument("--jpsro-iterations", type=int, default=30)
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to the CSV")
    parser.add_argument("--openspiel-jpsro", action="store_true",
                        help="run OpenSpiel's JPSRO beside pbmarl's (minutes; needs cvxpy) instead of citing its 48 s")
    args = parser.parse_args()
    rows = Rows()
    if args.only in (None, "lp"):
        part_lp(rows, args.repeats)
    if args.only in (None, "xdo"):
        part_xdo(rows, args.iterations)
    if args.only in (None, "jpsro"):
        part_jpsro(rows, args.jpsro_iterations, openspiel=args.openspiel_jpsro)
    if not args.no_write:
        rows.write()


if __name__ == "__main__":
    main()
