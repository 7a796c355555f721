"""Meta-solver timings and NashConv on random zero-sum tables, pbmarl beside nashpy.

    python benchmarks/solvers.py           # sizes 10, 50, 200; best of 3; nashpy capped at 20 s a call
    python benchmarks/solvers.py --quick   # one run each; nashpy capped at 5 s a call

Every row is one method on the same table (payoffs ~ N(0, 1), zero-sum). "NashConv" is
the meta-game NashConv of the answer in that table (0 at an equilibrium). nashpy calls
run in a child process so one that never returns (its Lemke-Howson can loop) is cut
off at the cap and reported as such. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
import warnings
from typing import Any

import nashpy  # imported before forking, so the children's timings leave the import out
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pbmarl.solvers import MetaSolver, SolverError, meta_nash_conv

Result = tuple[float, Any] | str  # (seconds, distributions) or why there is none


def time_pbmarl(name: str, M: np.ndarray, repeats: int) -> Result:
    solver = MetaSolver(name)
    best, sigma = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            sigma = solver(M)
        except (ValueError, SolverError) as exc:
            return f"refused ({type(exc).__name__}): {exc}"
        best = min(best, time.perf_counter() - start)
    assert sigma is not None
    return best, tuple(sigma)


def _nashpy_call(method: str, M: np.ndarray, fp_iterations: int) -> tuple[np.ndarray, np.ndarray]:
    game = nashpy.Game(M, -M)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "linear_program":
            return game.linear_program()
        if method == "lemke_howson":
            return game.lemke_howson(initial_dropped_label=0)
        if method == "asymmetric_replicator_dynamics":
            xs, ys = game.asymmetric_replicator_dynamics()
            return xs[-1], ys[-1]
        if method == "fictitious_play":
            *_, (row, col) = game.fictitious_play(iterations=fp_iterations)  # the last play counts
            return row / row.sum(), col / col.sum()
        if method == "support_enumeration":
            return next(iter(game.support_enumeration()))
    raise ValueError(method)


def _child(conn: Any, method: str, M: np.ndarray, fp_iterations: int) -> None:
    np.random.seed(0)  # nashpy's fictitious play breaks ties with the global generator
    start = time.perf_counter()
    try:
        x, y = _nashpy_call(method, M, fp_iterations)
        conn.send((time.perf_counter() - start, (np.asarray(x, float), np.asarray(y, float))))
    except Exception as exc:  # noqa: BLE001 - whatever nashpy raises is reported as text
        conn.send(f"error: {type(exc).__name__}")


def time_nashpy(method: str, M: np.ndarray, *, cap: float, fp_iterations: int) -> Result:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, method, M, fp_iterations))
    proc.start()
    if parent.poll(cap):
        result = parent.recv()
        proc.join()
        return result
    proc.kill()
    proc.join()
    return f"no answer within {cap:g} s"


def nash_conv_of(M: np.ndarray, sigma: Any) -> str:
    x, y = (np.asarray(s, dtype=float) for s in sigma)
    if x.shape != (M.shape[0],) or y.shape != (M.shape[1],) or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return f"invalid (shapes {x.shape}, {y.shape})"
    if abs(x.sum() - 1) > 1e-6 or abs(y.sum() - 1) > 1e-6 or x.min() < -1e-9 or y.min() < -1e-9:
        return "invalid (off the simplex)"
    return f"{meta_nash_conv(M, (x, y)):.2e}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run per method, 5 s cap per nashpy call")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    args = parser.parse_args(argv)
    repeats, cap = (1, 5.0) if args.quick else (3, 20.0)
    fp_iterations = 2_000 if args.quick else 10_000
    rng = np.random.default_rng(0)
    print(f"random zero-sum tables, payoffs ~ N(0, 1); pbmarl: best of {repeats}; "
          f"nashpy: one call in a child process, capped at {cap:g} s")
    header = f"{'size':>5}  {'library':<7} {'method':<32} {'seconds':>9} {'x nash':>8}  NashConv"
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        M = rng.normal(size=(n, n))
        rows: list[tuple[str, str, Result]] = []
        for name in MetaSolver.names:
            rows.append(("pbmarl", name, time_pbmarl(name, M, repeats)))
        nashpy_methods = ["linear_program", "lemke_howson", "asymmetric_replicator_dynamics", "fictitious_play"]
        if n <= 10:
            nashpy_methods.append("support_enumeration")
        for method in nashpy_methods:
            label = f"{method} ({fp_iterations} it)" if method == "fictitious_play" else method
            rows.append(("nashpy", label, time_nashpy(method, M, cap=cap, fp_iterations=fp_iterations)))
        reference = next(r for lib, name, r in rows if lib == "pbmarl" and name == "nash")
        ref_seconds = reference[0] if isinstance(reference, tuple) else float("nan")
        for library, name, result in rows:
            if isinstance(result, str):
                print(f"{n:>5}  {library:<7} {name:<32} {'-':>9} {'-':>8}  {result}")
                continue
            seconds, sigma = result
            print(f"{n:>5}  {library:<7} {name:<32} {seconds:>9.4f} {seconds / ref_seconds:>8.1f}  {nash_conv_of(M, sigma)}")
        print()


if __name__ == "__main__":
    main()
