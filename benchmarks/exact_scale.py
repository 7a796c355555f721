"""The exact engine at scale: trees, n-player meta-games and Lemke-Howson, each beside a reference.

    python benchmarks/exact_scale.py --only games --games "leduc_poker,goofspiel(num_cards=4)"
    python benchmarks/exact_scale.py --only meta          # 3-, 4-, 5-player tables, 10^3 to 10^4 cells
    python benchmarks/exact_scale.py --only lh --seeds 3  # pbmarl Lemke-Howson vs pygambit lcp_solve
    python benchmarks/exact_scale.py --only mixture       # NashConv of 100-member mixtures on Leduc
    python benchmarks/exact_scale.py --only then          # today's n-player Nash beside the one the issue timed
    python benchmarks/exact_scale.py --only routes --games "leduc_poker(players=3)"  # ways to get a tree ready

games: per game, the tree walk (disk cache off) beside a bare Python walk over pyspiel states that
    collects nothing, the tree loaded from the disk cache, PSRO-Nash for 10 iterations, and OpenSpiel's
    `exploitability.nash_conv` of the uniform policy alone (the common alternative).
meta: per random table without a pure equilibrium (those are solved by the pure check in a
    millisecond; the seeds skipped are printed), time and meta-game NashConv of pbmarl's default with and without pygambit
    (and the method that produced the answer), `iterative_nash` (dynamics with Newton polishing, the default
    between the issue and the logit path; the issue's own baseline is the `then` section), the dynamics
    alone (no Newton polishing), each pygambit method and OpenSpiel's projected replicator dynamics
    (10^4 steps).
lh: two-player general-sum m x m tables, pbmarl's `bimatrix_nash` (Lemke-Howson) vs pygambit's
    `lcp_solve`, time and NashConv.
then: the n-player "nash" meta-solver as it was when the exact-engine issue timed it (the package at
    `THEN_REV`, extracted with `git archive` and run in a subprocess) beside today's default without
    pygambit, on the issue's table shapes (4 players x 9 strategies, 3 players x 12), same seeds.
routes: the candidate ways of having a tree ready, beside the bare walk in the same run: the bare
    walk split over processes at the root's chance outcomes (an upper bound on what a split build
    could gain: it only counts), pyspiel's own C++ enumeration (`load_game_as_cached_tree`) followed
    by the same walk, the engine's walk, and the engine's disk cache.
mixture: NashConv of a mixture of 100 random tabular policies per player on Leduc, plans cached
    (PSRO's case) and from scratch.

Every printed row is appended to ``benchmarks/results/exact_scale.csv`` with the date, the git
commit, the command and the load average (1, 5, 15 minutes) when it was printed. All times are from one run on one machine, so ratios compare like with like.
"""

# every lambda below is called at once by `timed`, inside its loop iteration
# ruff: noqa: B023
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _rows import Stamp, append, load_avg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pbmarl as pb  # noqa: E402
from pbmarl.games.tree import build_tree  # noqa: E402
from pbmarl.games.tree_cache import load_cached_tree, save_cached_tree  # noqa: E402
from pbmarl.solvers.nashconv import meta_nash_conv  # noqa: E402

FIELDS = ["date", "commit", "command", "measure", "value", "bar", "reference", "met", "load_avg"]
GAMES = "leduc_poker,liars_dice,kuhn_poker(players=4),goofspiel(num_cards=4),leduc_poker(players=3),goofspiel(num_cards=5)"
#: the last commit whose n-player solver (nplayer.py, nash.py, dynamics, nashconv) is the one the issue timed
THEN_REV = "5802071^"
THEN_SHAPES = [(9, 9, 9, 9), (12, 12, 12)]
TABLES = [(10, 10, 10), (22, 22, 22), (6, 6, 6, 6), (10, 10, 10, 10), (4, 4, 4, 4, 4), (6, 6, 6, 6, 6)]


class Report:
    def __init__(self) -> None:
        self.stamp = Stamp("benchmarks/exact_scale.py", iso=True)

    def row(self, measure: str, value: str, bar: str = "-", reference: str = "-", met: str = "") -> None:
        load = load_avg()  # the machine is shared: say how busy it was
        print(f"{measure:<62} {value:>16}  bar {bar:<12} ref {reference}  {met}  (load {load})")
        append("exact_scale", [self.stamp.row(measure=measure, value=value, bar=bar, reference=reference, met=met,
                                              load_avg=load)], FIELDS)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def bare_walk(game: pb.games.Game) -> int:
    return walk_from(game.new_initial_state(), game.num_players)


def walk_from(root: Any, num_players: int) -> int:
    """Histories below `root` (itself included), stepping pyspiel states and collecting nothing."""
    stack, n = [root], 0
    while stack:
        state = stack.pop()
        n += 1
        kind = state.current_player()
        if kind == -4:
            continue
        if kind == -1:
            actions = [a for a, _ in state.chance_outcomes()]
        elif kind == -2:
            for joint in np.ndindex(*[len(state.legal_actions(p)) for p in range(num_players)]):
                child = state.clone()
                child.apply_actions([state.legal_actions(p)[i] for p, i in enumerate(joint)])
                stack.append(child)
            continue
        else:
            actions = state.legal_actions(kind)
        for a in actions:
            stack.append(state.child(a))
    return n


def tree_timings(game: pb.games.Game, name: str) -> tuple[int, float, float, object, float]:
    """(histories, bare walk s, the engine's walk s (disk cache off), the tree, load from the disk cache s)."""
    os.environ["PBMARL_TREE_CACHE"] = "0"
    t_bare, nodes = timed(lambda: bare_walk(game))
    t_build, tree = timed(lambda: build_tree(game))
    os.environ["PBMARL_TREE_CACHE"] = str(Path.home() / ".cache" / "pbmarl" / "bench-trees")
    save_cached_tree(game, tree)  # type: ignore[arg-type]
    t_load, _ = timed(lambda: load_cached_tree(pb.load_game(name)))
    os.environ["PBMARL_TREE_CACHE"] = "0"
    return nodes, t_bare, t_build, tree, t_load  # type: ignore[return-value]


def games_section(report: Report, names: list[str], skip_openspiel: bool = False) -> None:
    import warnings

    from open_spiel.python import policy as osp
    from open_spiel.python.algorithms import exploitability

    warnings.simplefilter("ignore", UserWarning)
    for name in names:
        game = pb.load_game(name)
        nodes, t_bare, t_build, tree, t_load = tree_timings(game, name)
        ratio = t_bare / t_build
        report.row(f"{name}: tree walk ({nodes:,} histories)", f"{t_build:.2f} s", "-",
                   f"bare pyspiel walk {t_bare:.2f} s (walk at {ratio:.2f}x its speed)")
        bar_ok = t_load < 2.0 and t_bare / t_load >= 1.5
        report.row(f"{name}: tree ready from the disk cache", f"{t_load:.3f} s", "< 2 s, >= 1.5x bare",
                   f"{t_bare / t_load:.1f}x faster than the bare walk", "met" if bar_ok else "not met")
        game.__dict__["_tree_cache"] = tree
        psro = pb.PSRO(game, solver="nash", max_iterations=10)
        t_psro, records = timed(lambda: psro.run(progress=False))
        solve = sum(r.times["solve"] for r in records)  # type: ignore[attr-defined]
        last = records[-1]  # type: ignore[index]
        phases = {k: sum(r.times[k] for r in records) for k in ("oracle", "evaluate", "measure")}  # type: ignore[attr-defined]
        kuhn4 = "players=4" in name
        report.row(f"{name}: PSRO-Nash 10 iterations", f"{t_psro:.2f} s", "<= 5 s" if kuhn4 else "-",
                   f"meta-solve {solve:.2f} s, payoff fill {phases['evaluate']:.2f} s, best responses "
                   f"{phases['oracle']:.2f} s, NashConv {phases['measure']:.2f} s; NashConv {last.nash_conv:.4g}",
                   ("met" if t_psro <= 5 else "not met") if kuhn4 else "")
        if game.num_players >= 3:
            psro_meta_tables(report, name, psro, records)  # type: ignore[arg-type]
        t_pb, ours = timed(lambda: pb.exploitability(game, [pb.RandomPolicy(game)] * game.num_players).nash_conv)
        if skip_openspiel:
            report.row(f"{name}: NashConv of the uniform policy", f"{t_pb:.3f} s", "-", "OpenSpiel not run (--skip-openspiel)")
            continue
        t_os, nc = timed(lambda: exploitability.nash_conv(game.pyspiel_game, osp.UniformRandomPolicy(game.pyspiel_game)))
        report.row(f"{name}: NashConv of the uniform policy", f"{t_pb:.3f} s", "-",
                   f"OpenSpiel nash_conv {t_os:.2f} s ({t_os / max(t_pb, 1e-9):.1f}x), |diff| {abs(float(nc) - float(ours)):.1e}")  # type: ignore[arg-type]


def psro_meta_tables(report: Report, name: str, psro: pb.PSRO, records: list) -> None:
    """Re-solve the meta-games PSRO met (iteration i's table is the leading corner of the last one, its
    warm start the meta-strategy before) by pbmarl's default without pygambit and by `iterative_nash`."""
    from pbmarl.solvers.nash import nplayer_nash
    from pbmarl.solvers.nplayer import iterative_nash

    U = psro.table.values
    own = old = 0.0
    unconverged = {"own": 0, "old": 0}
    for before, record in zip(records, records[1:]):
        sub = U[tuple(slice(0, n) for n in record.sizes)]
        init = [np.concatenate([s, np.zeros(n - len(s))]) for s, n in zip(before.meta_strategy, record.sizes)]
        t, res = timed(lambda: nplayer_nash(sub, init=init, gambit=False))
        own += t
        unconverged["own"] += not res.info["converged"]  # type: ignore[attr-defined]
        t, res = timed(lambda: iterative_nash(sub, init=init))
        old += t
        unconverged["old"] += not res.info["converged"]  # type: ignore[attr-defined]
    report.row(f"{name}: its {len(records) - 1} PSRO meta-games, pbmarl default without pygambit", f"{own:.2f} s",
               "-", f"iterative_nash with polishing (the interim default) {old:.2f} s ({old / max(own, 1e-9):.1f}x); unconverged: "
               f"{unconverged['own']} vs {unconverged['old']}", "")


def _table(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape + (len(shape),))


def _seeds_without_pure(shape: tuple[int, ...], seeds: int, first_seed: int) -> list[int]:
    """The first `seeds` seeds from `first_seed` whose random table has no pure equilibrium (a table with one
    is solved by the pure check in a millisecond, which would say nothing about the solvers)."""
    from pbmarl.solvers.nplayer import pure_equilibria

    return [s for s in range(first_seed, first_seed + 1000) if not pure_equilibria(_table(shape, s)).size][:seeds]


def meta_section(report: Report, seeds: int, shapes: list[tuple[int, ...]], first_seed: int) -> None:
    from open_spiel.python.algorithms import projected_replicator_dynamics as prd

    from pbmarl.solvers.gambit import gambit_available, gambit_nash
    from pbmarl.solvers.nash import nplayer_nash
    from pbmarl.solvers.nplayer import iterative_nash

    # one-time costs (imports: pygambit's alone takes seconds) are paid here, not by the first table
    warm = _table((3, 3, 3), 0)
    nplayer_nash(warm, gambit=False)
    if gambit_available():
        nplayer_nash(warm, gambit=True)
        gambit_nash(warm, method="ipa")

    totals: dict[str, float] = {}
    for shape in shapes:
        cells = int(np.prod(shape))
        # random tables with a pure equilibrium are solved by the pure check in a millisecond: only
        # tables without one are timed (the seeds skipped are named)
        chosen = _seeds_without_pure(shape, seeds, first_seed)
        skipped = sorted(set(range(first_seed, max(chosen, default=first_seed) + 1)) - set(chosen))
        report.row(f"meta {len(shape)}p {'x'.join(map(str, shape))}: seeds timed {chosen}", "-", "-",
                   f"seeds skipped (a pure equilibrium): {skipped}")
        for seed in chosen:
            U = _table(shape, seed)
            label = f"{len(shape)}p {'x'.join(map(str, shape))} ({cells:,} cells) seed {seed}"
            methods: dict[str, str] = {}

            def default(gambit: bool | str) -> tuple[np.ndarray, ...]:
                res = nplayer_nash(U, gambit=gambit)
                methods[str(gambit)] = res.method
                return res.distributions

            runs: list[tuple[str, Callable[[], object]]] = [
                ("pbmarl default, pygambit", lambda: default("auto")),
                ("pbmarl default, no pygambit", lambda: default(False)),
                # the solver n-player "nash" ran before this version: RM+, PRD, FP with Newton polishing
                ("pbmarl iterative_nash with polishing (interim default)", lambda: iterative_nash(U).distributions),
                ("pbmarl dynamics alone", lambda: iterative_nash(U, polish=False).distributions),
            ]
            if gambit_available():
                runs.append(("pygambit ipa", lambda: gambit_nash(U, method="ipa").distributions))
                if cells <= 2000:
                    # logit took 10-40 s on the larger tables, and gnm minutes without returning on
                    # 4- and 5-player tables: left out there
                    runs.append(("pygambit logit", lambda: gambit_nash(U, method="logit").distributions))
                    if len(shape) == 3:
                        runs.append(("pygambit gnm", lambda: gambit_nash(U, method="gnm").distributions))
            runs.append(("OpenSpiel PRD 1e4 steps", lambda: prd.projected_replicator_dynamics(
                [U[..., p] for p in range(len(shape))], prd_iterations=10_000)))
            times: dict[str, float] = {}
            for name, fn in runs:
                try:
                    t, sigma = timed(fn)
                    nc = meta_nash_conv(U, sigma)  # type: ignore[arg-type]
                    times[name] = t
                    totals[name] = totals.get(name, 0.0) + t
                    value, ref = f"{t:.3f} s", f"NashConv {nc:.2g}"
                except Exception as exc:  # a failing method is a row too
                    value, ref = "failed", type(exc).__name__
                met, bar = "", "-"
                if name.startswith("pbmarl default"):
                    ref += f", method {methods.get('auto' if 'no' not in name else 'False', '?')}"
                if name == "pbmarl default, pygambit" and cells == 10_000 and len(shape) == 4 and value != "failed":
                    bar, met = "<= 0.5 s, 1e-6", "met" if t <= 0.5 and nc <= 1e-6 else "not met"
                if name == "pbmarl iterative_nash with polishing (interim default)" and "pbmarl default, no pygambit" in times:
                    ratio = t / max(times["pbmarl default, no pygambit"], 1e-9) if value != "failed" else float("nan")
                    ref += f"; default without pygambit is {ratio:.1f}x faster"
                if name.startswith(("pygambit", "OpenSpiel")) and value != "failed":
                    ref += f"; pbmarl default is {t / max(times['pbmarl default, pygambit'], 1e-9):.1f}x faster"
                report.row(f"meta {label}: {name}", value, bar, ref, met)
    if "pbmarl default, no pygambit" in totals:
        own = totals["pbmarl default, no pygambit"]
        for name, total in totals.items():
            bar, met = ("-", "")
            report.row(f"meta, all tables above: {name}", f"{total:.2f} s", bar,
                       f"{total / max(own, 1e-9):.1f}x the time of pbmarl's default without pygambit", met)


_THEN_SCRIPT = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from pbmarl.solvers.nash import nash_equilibrium
from pbmarl.solvers.nashconv import meta_nash_conv
for shape, seed in json.loads(sys.argv[2]):
    U = np.random.default_rng(seed).normal(size=tuple(shape) + (len(shape),))
    start = time.perf_counter()
    res = nash_equilibrium(U)
    t = time.perf_counter() - start
    print(json.dumps({"shape": shape, "seed": seed, "seconds": t, "nash_conv": float(meta_nash_conv(U, res.distributions)),
                      "converged": bool(res.info.get("converged", True))}), flush=True)
"""


def then_section(report: Report, seeds: int, first_seed: int) -> None:
    """Today's n-player default without pygambit beside the solver at `THEN_REV`, on the same tables."""
    import json
    import tarfile
    import tempfile

    from pbmarl.solvers.nash import nplayer_nash

    root = Path(__file__).resolve().parents[1]
    rev = subprocess.run(["git", "rev-parse", "--short", THEN_REV], capture_output=True, text=True, check=True,
                         cwd=root).stdout.strip()
    jobs = []
    for shape in THEN_SHAPES:
        chosen = _seeds_without_pure(shape, seeds, first_seed)
        jobs += [(list(shape), s) for s in chosen]
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "then.tar"
        subprocess.run(["git", "archive", "-o", str(archive), rev, "pbmarl"], check=True, cwd=root)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "then", filter="data")
        out = subprocess.run([sys.executable, "-c", _THEN_SCRIPT, str(Path(tmp) / "then"), json.dumps(jobs)],
                             capture_output=True, text=True, check=True)
    then = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    nplayer_nash(_table((3, 3, 3), 0), gambit=False)  # one-time imports paid before the first table
    totals = {"now": 0.0, "then": 0.0}
    for old in then:
        shape, seed = tuple(old["shape"]), old["seed"]
        U = _table(shape, seed)
        t, res = timed(lambda: nplayer_nash(U, gambit=False))
        nc = meta_nash_conv(U, res.distributions)  # type: ignore[attr-defined]
        totals["now"] += t
        totals["then"] += old["seconds"]
        label = f"{len(shape)}p {'x'.join(map(str, shape))} seed {seed}"
        report.row(f"then-vs-now {label}: default without pygambit", f"{t:.3f} s", ">= 5x",
                   f"NashConv {nc:.1e}, method {res.method}; at {rev}: {old['seconds']:.3f} s NashConv "  # type: ignore[attr-defined]
                   f"{old['nash_conv']:.1e} (converged {old['converged']}); {old['seconds'] / max(t, 1e-9):.1f}x",
                   "met" if old["seconds"] >= 5 * t else "not met")
    ratio = totals["then"] / max(totals["now"], 1e-9)
    report.row(f"then-vs-now, all {len(then)} tables: default without pygambit", f"{totals['now']:.2f} s", ">= 5x",
               f"the solver at {rev} {totals['then']:.2f} s ({ratio:.1f}x)", "met" if ratio >= 5 else "not met")


def _walk_subtree(args: tuple[str, int]) -> int:
    name, action = args
    game = pb.load_game(name)
    return walk_from(game.new_initial_state().child(action), game.num_players)


def routes_section(report: Report, names: list[str]) -> None:
    import multiprocessing

    import pyspiel

    for name in names:
        game = pb.load_game(name)
        nodes, t_bare, t_build, _, t_load = tree_timings(game, name)
        report.row(f"routes {name}: bare pyspiel walk ({nodes:,} histories)", f"{t_bare:.2f} s", "-", "the reference")
        root = game.new_initial_state()
        if root.current_player() == -1:
            workers = os.cpu_count() or 1
            outcomes = [a for a, _ in root.chance_outcomes()]
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                t_split, counts = timed(lambda: pool.map(_walk_subtree, [(name, a) for a in outcomes]))
            report.row(f"routes {name}: bare walk split over {workers} processes at the root's {len(outcomes)} chance "
                       "outcomes", f"{t_split:.2f} s", "-",
                       f"{t_bare / t_split:.2f}x the bare walk; counts only, {1 + sum(counts):,} histories")  # type: ignore[arg-type]
        t_cpp, cached = timed(lambda: pyspiel.load_game_as_cached_tree(str(game.pyspiel_game)))
        t_walk, n_cached = timed(lambda: walk_from(cached.new_initial_state(), game.num_players))
        report.row(f"routes {name}: pyspiel load_game_as_cached_tree, then the bare walk on it",
                   f"{t_cpp + t_walk:.2f} s", "-",
                   f"C++ enumeration {t_cpp:.2f} s + walk {t_walk:.2f} s ({n_cached:,} histories); "
                   f"{t_bare / (t_cpp + t_walk):.2f}x the bare walk")
        report.row(f"routes {name}: the engine's tree walk", f"{t_build:.2f} s", "-", f"{t_bare / t_build:.2f}x the bare walk")
        ok = t_load < 2.0 and t_bare / t_load >= 1.5
        report.row(f"routes {name}: the engine's disk cache (kept)", f"{t_load:.3f} s", "< 2 s, >= 1.5x bare",
                   f"{t_bare / t_load:.1f}x the bare walk", "met" if ok else "not met")


def _in_subprocess(fn: Callable[[], object], limit_s: float) -> tuple[float, object] | str:
    """(seconds, result) of `fn` run in a forked process, or why there is none (pygambit's lcp_solve ran for
    minutes without answering on some 200x200 tables, and a crash in it must not end the benchmark)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def target() -> None:
        try:
            queue.put(timed(fn))
        except Exception as exc:  # noqa: BLE001 - reported as the row's value
            queue.put(f"failed: {type(exc).__name__}: {exc}")

    proc = ctx.Process(target=target)
    proc.start()
    try:
        return queue.get(timeout=limit_s)  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - queue.Empty: no answer in time, or the process died
        return f"no answer in {limit_s:g} s" if proc.is_alive() else f"died with exit code {proc.exitcode}"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()


def lh_section(report: Report, seeds: int, limit_s: float = 120.0) -> None:
    from pbmarl.solvers.gambit import gambit_nash
    from pbmarl.solvers.nash import bimatrix_nash

    for m in (50, 200):
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            A, B = rng.normal(size=(m, m)), rng.normal(size=(m, m))
            U = np.stack([A, B], axis=-1)
            t_own, own = timed(lambda: bimatrix_nash(A, B).distributions)
            answer = _in_subprocess(lambda: gambit_nash(U, method="lcp").distributions, limit_s)
            if isinstance(answer, str):
                ref = f"pygambit lcp_solve {answer}"
            else:
                t_gb, sigma = answer
                ref = f"pygambit lcp_solve {t_gb:.3f} s NashConv {meta_nash_conv(U, sigma):.1e}"  # type: ignore[arg-type]
            report.row(f"bimatrix {m}x{m} seed {seed}: pbmarl Lemke-Howson", f"{t_own:.3f} s", "-",
                       f"NashConv {meta_nash_conv(U, own):.1e}; {ref}")  # type: ignore[arg-type]


def mixture_section(report: Report, members: int) -> None:
    game = pb.load_game("leduc_poker")
    pop = pb.Population(game)
    for p in range(2):
        for i in range(members):
            pop.add(p, pb.TabularPolicy.random(game, seed=1000 * p + i))
    sigma = [np.random.default_rng(p).dirichlet(np.ones(members)) for p in range(2)]
    ev = pb.ExactEvaluator(game)
    t_fresh, _ = timed(lambda: ev.exploitability(pop, sigma))
    cached = min(timed(lambda: ev.exploitability(pop, sigma))[0] for _ in range(5))
    report.row(f"leduc NashConv, {members}-member mixture per player, plans cached", f"{cached * 1e3:.1f} ms",
               "< 20 ms", f"from scratch (plans computed) {t_fresh * 1e3:.1f} ms", "met" if cached < 0.02 else "not met")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("games", "meta", "lh", "mixture", "then", "routes"), action="append")
    parser.add_argument("--games", default=GAMES, help="comma-separated game names for --only games")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--shapes", default=None, help="meta tables, e.g. '10x10x10x10,22x22x22' (default: all)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--skip-openspiel", action="store_true", help="games: leave OpenSpiel's nash_conv out (minutes)")
    args = parser.parse_args()
    report = Report()
    sections = args.only or ["mixture", "lh", "then", "meta", "games"]
    if "mixture" in sections:
        mixture_section(report, args.members)
    if "lh" in sections:
        lh_section(report, args.seeds)
    if "then" in sections:
        then_section(report, args.seeds, args.first_seed)
    if "meta" in sections:
        shapes = TABLES if args.shapes is None else [tuple(int(n) for n in t.split("x")) for t in args.shapes.split(",")]
        meta_section(report, args.seeds, shapes, args.first_seed)
    if "games" in sections or "routes" in sections:
        names = []
        depth = 0
        current = ""
        for ch in args.games:  # split on commas outside parentheses
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 0:
                names.append(current.strip())
                current = ""
            else:
                current += ch
        names.append(current.strip())
        names = [n for n in names if n]
        if "routes" in sections:
            routes_section(report, names)
        if "games" in sections:
            games_section(report, names, args.skip_openspiel)


if __name__ == "__main__":
    main()
