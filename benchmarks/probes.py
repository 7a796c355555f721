"""The hardening probes, re-runnable: Ctrl-C, kill -9, tampered folders, bad input, the exact engine, 2-worker PPO.

    python benchmarks/probes.py                                  # every slice, modest counts
    python benchmarks/probes.py --only ctrlc --trials 10 --seed 0
    python benchmarks/probes.py --only kill --trials 5
    python benchmarks/probes.py --only tamper,badinput,exact,ppo2

Slices (the "Done when" of the second hardening issue, its probe list in
/work/shared/reference/probes-2026-11-29.md):

ctrlc     every run type of tests/run_cases_*.py: `--trials` KeyboardInterrupts, each at a random line of
          a step (sys.settrace counting pbmarl's lines, as the contract test does; the line count is
          that of an uninterrupted twin's same step). Then the run must be unchanged (its `state()`,
          history and torch's grad mode / thread count equal to before) and its next step equal to the
          twin's. Counted: ok, changed, broken (next step raises), diverged, error (not a Ctrl-C),
          swallowed (the interrupt did not reach the caller).
kill      PSRO, League (DQN agents), NFSP, SAC, PPO, MARL in child processes that step and save in a
          loop: `--trials` SIGKILLs at random times, then targeted kills after the k-th ``os.replace``
          of one save (each file of the state folder, the folder's rename, history.csv, run.json).
          Each folder is loaded: exact (equal to the last committed save or the one in progress, and
          its next step equal to an uninterrupted run's), refused (a RunFolderError), mixed (must be 0).
tamper    saved folders changed as a hostile folder would be (manifests recomputed, so the deeper
          checks are reached): state pointers and symlinks out of the folder, population `file`
          entries outside, `pbmarl resume` through a symlinked run dir, .npz bombs, oversized JSON
          sizes, corrupt .pt. Each load runs in a child whose peak RSS is measured (getrusage) and
          which is killed past 2.5 GB. Counted: refused, loaded, read outside, wrote outside, peak MB.
badinput  every call of the probe list, typed as the list gives it, classified: clear (a ValueError or
          TypeError raised by pbmarl whose message names the option or value), silent, unclear (a
          library's error, or another type), partial (pbmarl's, without the name). Also the encoded
          rows of tests/test_bad_input.py through the same classifier.
exact     pb.ExactEvaluator(pb.load_game("trade_comm")): refused or built, with its time and peak RSS;
          the size-estimate path (check_fits) of 2-dice liar's dice and goofspiel (no full walk).
ppo2      pb.PPO on CartPole, default settings, no workers / 1 BSP / 2 BSP / 2 ASP (local backend), and one
          learner on 2 workers' combined batch (2048 steps a round), each to `--ppo-steps` env steps or
          `--ppo-seconds`: best mean return.

Prints a count table; appends rows (date, commit, machine, command, probe, trials, ok, failed, details)
to benchmarks/results/probes.csv.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import datetime
import hashlib
import io
import json
import math
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
RESULTS = ROOT / "benchmarks" / "results" / "probes.csv"
HEADER = ["date", "commit", "machine", "command", "probe", "trials", "ok", "failed", "details"]
SLICES = ("ctrlc", "kill", "tamper", "badinput", "exact", "ppo2")
REFERENCE = Path("/work/shared/reference/probes-2026-11-29.md")
#: columns that measure time, which two equal runs never share
TIMING = ("wall_time", "time/")
#: a tampered load's child is killed past this resident size
RSS_KILL_MB = 2500.0
#: "no load above a few hundred MB from a small file": growth over an untampered load's peak
RSS_ALLOWED_MB = 300.0
#: the kill slice's run types, with options that give them room for a dozen steps
KILL_TYPES: dict[str, dict[str, Any]] = {"PSRO": {}, "League[dqn]": {}, "NFSP": {}, "SAC": {"budget": 10**6},
                                         "PPO": {"budget": 10**6}, "MARL": {}}

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@dataclasses.dataclass
class Row:
    """One line of the count table (and of the CSV)."""

    probe: str
    trials: int
    ok: int
    failed: int
    details: str


# -- shared helpers -------------------------------------------------------------------------------------
def pbmarl_dir() -> str:
    import pbmarl

    return str(Path(pbmarl.__file__).parent)


def fingerprint(run: Any) -> Any:
    """The run's history without the columns that measure time."""
    h = run.history
    return h[[c for c in h.columns if not str(c).startswith(TIMING)]]


def same_frame(a: Any, b: Any) -> bool:
    import pandas as pd

    try:
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
    except AssertionError:
        return False
    return True


def _hash_value(h: Any, value: Any) -> None:
    import numpy as np

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"tensor{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        h.update(f"array{a.shape}{a.dtype}".encode())
        h.update(a.tobytes() if a.dtype != object else repr(a.tolist()).encode())
    elif isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            _hash_value(h, value[k])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for v in value:
            _hash_value(h, v)
        h.update(b"]")
    else:
        h.update(repr(value).encode())


def state_digest(run: Any) -> str:
    """A digest of everything `run.state()` hands the folder module: data, arrays, modules and the files its
    sub-folders write (written into a scratch folder)."""
    st = run.state()
    h = hashlib.sha256()
    for part in (st.data, st.arrays, st.modules, st.config, st.seed, st.game):
        _hash_value(h, part)
    if st.folders:
        with tempfile.TemporaryDirectory(prefix="probe-digest-") as tmp:
            for name in sorted(st.folders):
                st.folders[name](Path(tmp) / name)
            for path in sorted(Path(tmp).rglob("*")):
                if path.is_file() and path.name != "history.csv":  # a learner folder's CSV carries wall times
                    h.update(str(path.relative_to(tmp)).encode())
                    data = path.read_bytes()
                    if path.name == "run.json":  # the same: only the version of pbmarl and the save differ
                        data = json.dumps({k: v for k, v in json.loads(data).items()}, sort_keys=True).encode()
                    h.update(data)
    return h.hexdigest()


def torch_settings() -> tuple[bool, int] | None:
    torch = sys.modules.get("torch")
    return None if torch is None else (bool(torch.is_grad_enabled()), int(torch.get_num_threads()))


def is_done(run: Any) -> bool:
    try:
        return bool(run.done)
    except (ValueError, NotImplementedError):
        return False


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=20)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "pbmarl"], capture_output=True,
                               text=True, timeout=20).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> str:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.node()} ({os.cpu_count()} cores, {platform.python_version()}, load {load})"


@dataclasses.dataclass
class ChildResult:
    rc: int | None
    stdout: str
    stderr: str
    max_rss_mb: float
    killed_for_memory: bool
    timed_out: bool
    lines: list[tuple[float, str]]


def run_child(args: Sequence[str], *, timeout: float, rss_limit_mb: float = RSS_KILL_MB, env: dict[str, str] | None = None,
              kill_after: Callable[[list[tuple[float, str]]], float | None] | None = None) -> ChildResult:
    """Run a child process, reading its stdout lines as they come (with the time each arrived) and its
    resident size every 50 ms; it is killed past `rss_limit_mb`, after `timeout`, or with SIGKILL when
    ``kill_after(lines)`` returns a time (``time.monotonic()``) that has passed."""
    proc = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, cwd=str(ROOT))
    lines: list[tuple[float, str]] = []
    err: list[str] = []

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))

    def read_err() -> None:
        assert proc.stderr is not None
        err.append(proc.stderr.read())

    threads = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for t in threads:
        t.start()
    start, peak, memory, timed_out, kill_at = time.monotonic(), 0.0, False, False, None
    while proc.poll() is None:
        rss = _rss_mb(proc.pid)
        peak = max(peak, rss)
        if rss > rss_limit_mb:
            memory = True
            proc.kill()
            break
        if time.monotonic() - start > timeout:
            timed_out = True
            proc.kill()
            break
        if kill_after is not None and kill_at is None:
            kill_at = kill_after(lines)
        if kill_at is not None and time.monotonic() >= kill_at:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    for t in threads:
        t.join(timeout=10)
    return ChildResult(proc.returncode, "\n".join(line for _, line in lines), "".join(err), peak, memory, timed_out,
                       lines)


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def child_command(kind: str, payload: dict[str, Any]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", kind, json.dumps(payload)]


def peak_mb() -> float:
    """This process's peak resident size (VmHWM; since `reset_peak`, where the kernel allows the reset)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> float:
    """Start measuring the peak resident size afresh (importing torch peaks above what a load then needs);
    returns the resident size now."""
    with contextlib.suppress(OSError):
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    return _rss_mb(os.getpid())


def cases() -> dict[str, Any]:
    from run_cases import CASES

    return CASES


# -- ctrlc ----------------------------------------------------------------------------------------------
def line_tracer(limit: int | None, root: str) -> tuple[Callable[..., Any], list[int]]:
    """A trace function counting the lines pbmarl runs; with `limit`, it raises KeyboardInterrupt at that line."""
    seen = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(root):
            return None
        if event == "line":
            seen[0] += 1
            if limit is not None and seen[0] == limit:
                raise KeyboardInterrupt
        return trace

    return trace, seen


def traced_step(run: Any, limit: int | None, root: str) -> tuple[BaseException | None, int]:
    trace, seen = line_tracer(limit, root)
    sys.settrace(trace)
    try:
        run.step()
    except BaseException as exc:  # noqa: BLE001 - the probe classifies whatever came out
        return exc, seen[0]
    finally:
        sys.settrace(None)
    return None, seen[0]


def ctrlc_case(case: Any, trials: int, rng: Any, *, log: Callable[[str], None] = print,
               root: str | None = None) -> Counter[str]:
    """`trials` Ctrl-Cs at random lines of a step of `case`'s run (lines of files under `root`, default
    pbmarl's); see the module doc for the outcomes."""
    root = root or pbmarl_dir()
    counts: Counter[str] = Counter()
    a = twin = None
    try:
        for _ in range(trials):
            if a is None or is_done(a) or is_done(twin):
                for r in (a, twin):
                    if r is not None:
                        r.close()
                a, twin = case.build(case.game), case.build(case.game)
                a.step(), twin.step()
            before, torch_before, fp_before = state_digest(a), torch_settings(), fingerprint(a)
            exc, total = traced_step(twin, None, root)
            if exc is not None:
                raise exc
            n = int(rng.integers(1, total + 1))
            exc, seen = traced_step(a, n, root)
            if not isinstance(exc, KeyboardInterrupt):
                outcome = "error" if exc is not None else ("swallowed" if seen >= n else "missed")
                counts[outcome] += 1
                log(f"    line {n}/{total}: {outcome} {type(exc).__name__ if exc else ''} {exc or ''}")
                a = None
                continue
            changed = (state_digest(a) != before or torch_settings() != torch_before
                       or not same_frame(fingerprint(a), fp_before))
            try:
                a.step()
                same = same_frame(fingerprint(a), fingerprint(twin))
            except Exception as err:  # noqa: BLE001
                counts["broken"] += 1
                log(f"    line {n}/{total}: broken, next step raised {type(err).__name__}: {err}")
                a = None
                continue
            outcome = "changed" if changed else "diverged" if not same else "ok"
            counts[outcome] += 1
            if outcome != "ok":
                log(f"    line {n}/{total}: {outcome}")
                a = None
    finally:
        sys.settrace(None)
        for r in (a, twin):
            if r is not None:
                r.close()
    return counts


def slice_ctrlc(args: argparse.Namespace) -> list[Row]:
    import numpy as np

    rows = []
    all_cases = cases()
    names = sorted(all_cases) if not args.types else [t for t in args.types.split(",") if t in all_cases]
    total: Counter[str] = Counter()
    for i, name in enumerate(names):
        rng = np.random.default_rng([args.seed, i])
        t0 = time.time()
        counts = ctrlc_case(all_cases[name], args.trials or 10, rng)
        total.update(counts)
        bad = sum(v for k, v in counts.items() if k not in ("ok", "missed"))
        print(f"  ctrlc {name}: {dict(counts)} ({time.time() - t0:.0f} s)", flush=True)
        rows.append(Row(f"ctrlc {name}", sum(counts.values()), counts["ok"], bad, _counts(counts)))
    bad = sum(v for k, v in total.items() if k not in ("ok", "missed"))
    rows.append(Row("ctrlc (all run types)", sum(total.values()), total["ok"], bad,
                    f"{len(names)} run types; {_counts(total)}"))
    return rows


def _counts(counts: Counter[str] | dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


# -- kill -----------------------------------------------------------------------------------------------
def child_kill(payload: dict[str, Any]) -> None:
    """Step and save `case` in a loop; with ``kill_replace`` K, SIGKILL this process right after the K-th
    ``os.replace`` of the second save."""
    case = cases()[payload["case"]]
    run = case.build(case.game, **payload.get("options", {}))
    folder = Path(payload["folder"])
    armed = {"on": False, "n": 0}
    real_replace = os.replace
    k = int(payload.get("kill_replace") or 0)

    def replace(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
        real_replace(src, dst, *a, **kw)
        if armed["on"]:
            armed["n"] += 1
            if armed["n"] == k:
                os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace  # type: ignore[assignment]
    for i in range(int(payload["steps"])):
        run.step()
        print(f"saving {run.iteration}", flush=True)
        armed["on"], armed["n"] = i == 1, 0
        run.save(folder)
        armed["on"] = False
        print(f"saved {run.iteration} replaces {armed['n']}", flush=True)
    run.close()


class Reference:
    """An uninterrupted run of one case, its fingerprint after every step (extended as asked)."""

    def __init__(self, case: Any, options: dict[str, Any]) -> None:
        self.run = case.build(case.game, **options)
        self.fps: dict[int, Any] = {0: fingerprint(self.run)}

    def at(self, k: int) -> Any:
        while max(self.fps) < k:
            self.run.step()
            self.fps[self.run.iteration] = fingerprint(self.run)
        return self.fps[k]


def classify_resume(folder: Path, ref: Reference, allowed: set[int]) -> tuple[str, str]:
    """Load a killed run's folder: exact / refused / mixed / stale / error, and why."""
    import pbmarl as pb
    from pbmarl.runs.folder import RunFolderError

    try:
        loaded = pb.load_run(folder)
    except RunFolderError as exc:
        return "refused", str(exc)[:160]
    except Exception as exc:  # noqa: BLE001
        return "error", f"{type(exc).__name__}: {str(exc)[:160]}"
    try:
        k = loaded.iteration
        ok_now = same_frame(fingerprint(loaded), ref.at(k))
        loaded.step()
        ok_next = same_frame(fingerprint(loaded), ref.at(k + 1))
    except Exception as exc:  # noqa: BLE001
        return "mixed", f"iteration {loaded.iteration}: the loaded run fails: {type(exc).__name__}: {exc}"
    finally:
        loaded.close()
    if not (ok_now and ok_next):
        return "mixed", f"iteration {k}: history {'equal' if ok_now else 'differs'}, next step " \
                        f"{'equal' if ok_next else 'differs'}"
    if k not in allowed:
        return "stale", f"iteration {k}, committed saves {sorted(allowed)}"
    return "exact", f"iteration {k}"


def _saves(lines: Iterable[tuple[float, str]]) -> tuple[int | None, int | None]:
    saved = saving = None
    for _, line in lines:
        if line.startswith("saved "):
            saved = int(line.split()[1])
        elif line.startswith("saving "):
            saving = int(line.split()[1])
    return saved, saving


def slice_kill(args: argparse.Namespace) -> list[Row]:
    import numpy as np

    rows = []
    total: Counter[str] = Counter()
    types = list(KILL_TYPES) if not args.types else [t for t in args.types.split(",") if t in KILL_TYPES]
    work = Path(tempfile.mkdtemp(prefix="probes-kill-"))
    try:
        for ti, name in enumerate(types):
            rng = np.random.default_rng([args.seed, 100 + ti])
            options = KILL_TYPES[name]
            ref = Reference(cases()[name], options)
            steps = 8
            t0 = time.time()
            # one run to its end: how long a save cycle takes and how many replaces one save makes
            folder = work / f"{name}-calibrate"
            calib = run_child(child_command("kill", {"case": name, "folder": str(folder), "steps": steps,
                                                     "options": options}), timeout=600)
            saved_lines = [(t, line) for t, line in calib.lines if line.startswith("saved ")]
            if calib.rc != 0 or len(saved_lines) < 2:
                rows.append(Row(f"kill {name}", 0, 0, 1, f"calibration failed rc={calib.rc}: {calib.stderr[-300:]}"))
                continue
            span = saved_lines[-1][0] - saved_lines[0][0]
            replaces = int(saved_lines[1][1].split()[3])
            counts: Counter[str] = Counter()
            notes: list[str] = []
            kinds: list[tuple[str, int]] = [("random", 0)] * (args.trials or 5)
            targeted = list(range(1, replaces + 1))
            if len(targeted) > 9:  # the first and last few, and some between
                targeted = sorted(set(targeted[:3] + targeted[-4:] + [int(x) for x in rng.choice(targeted[3:-4], 2, replace=False)]))
            kinds += [("targeted", k) for k in targeted]
            for j, (kind, k) in enumerate(kinds):
                folder = work / f"{name}-{j}"
                payload = {"case": name, "folder": str(folder), "steps": steps, "options": options, "kill_replace": k}
                if kind == "random":
                    delay = float(rng.uniform(0, span))

                    def kill_after(lines: list[tuple[float, str]], delay: float = delay) -> float | None:
                        first = next((t for t, line in lines if line.startswith("saved ")), None)
                        return None if first is None else first + delay

                    res = run_child(child_command("kill", payload), timeout=600, kill_after=kill_after)
                else:
                    res = run_child(child_command("kill", payload), timeout=600)
                if res.rc != -signal.SIGKILL:
                    notes.append(f"{kind} kill {k or ''}: the child was not killed (rc {res.rc})")
                saved, saving = _saves(res.lines)
                allowed = {x for x in (saved, saving) if x is not None}
                if not (folder / "run.json").exists() and saved is None:
                    outcome, why = "no save yet", ""
                else:
                    outcome, why = classify_resume(folder, ref, allowed)
                counts[outcome] += 1
                where = f"after replace {k} of {replaces} in save 2" if kind == "targeted" else \
                    f"at {delay:.2f} s (rc {res.rc}, last saved {saved})"
                if outcome not in ("exact",):
                    notes.append(f"{kind} {where}: {outcome} {why}")
                shutil.rmtree(folder, ignore_errors=True)
            ref.run.close()
            total.update(counts)
            n = sum(counts.values())
            bad = counts["mixed"] + counts["error"] + counts["stale"]
            print(f"  kill {name}: {dict(counts)} ({args.trials or 5} random + {len(targeted)} targeted of "
                  f"{replaces} replaces a save; {time.time() - t0:.0f} s)", flush=True)
            for note in notes:
                print(f"    {note}", flush=True)
            rows.append(Row(f"kill {name}", n, counts["exact"] + counts["refused"] + counts["no save yet"], bad,
                            f"{args.trials or 5} random + {len(targeted)} targeted (of {replaces} replaces a save); "
                            f"{_counts(counts)}"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bad = total["mixed"] + total["error"] + total["stale"]
    rows.append(Row("kill (all types)", sum(total.values()), sum(total.values()) - bad, bad,
                    f"silently mixed {total['mixed']}; {_counts(total)}"))
    return rows


# -- tamper ---------------------------------------------------------------------------------------------
def reseal(folder: Path) -> None:
    """Recompute the current state folder's manifest, as a hostile folder would after changing its files."""
    from pbmarl.runs import folder as fm

    meta = json.loads((folder / "run.json").read_text())
    state = folder / meta["state"]
    manifest = json.loads((state / "manifest.json").read_text())
    files = {}
    for entry in sorted(state.iterdir()):
        if entry.name != "manifest.json" and entry.is_file():
            files[entry.name] = [entry.stat().st_size, fm._sha256(entry)]
    manifest["files"] = files
    (state / "manifest.json").write_text(json.dumps(manifest))


def _meta(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "run.json").read_text())


def _state(folder: Path) -> Path:
    return folder / _meta(folder)["state"]


def _edit_json(path: Path, edit: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _add_bomb(npz: Path, members: int = 16, mb: int = 256) -> None:
    """Append `members` arrays of `mb` MB of zeros each (a few hundred kB each once deflated)."""
    from numpy.lib import format as npy_format

    n = mb * 2**20 // 4
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (n,)})
    chunk = bytes(16 * 2**20)
    with zipfile.ZipFile(npz, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            with zf.open(f"junk{i}.npy", "w", force_zip64=True) as fh:
                fh.write(header.getvalue())
                left = n * 4
                while left:
                    fh.write(chunk[:min(left, len(chunk))])
                    left -= min(left, len(chunk))


def _swell(npz: Path, mb: int = 2048) -> None:
    """Replace the first member of `npz` by `mb` MB of zeros under the same name (a header that asks for it)."""
    from numpy.lib import format as npy_format

    with zipfile.ZipFile(npz) as zf:
        names = zf.namelist()
        keep = {name: zf.read(name) for name in names[1:]}
    n = mb * 2**20 // 4
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (n,)})
    chunk = bytes(16 * 2**20)
    with zipfile.ZipFile(npz, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open(names[0], "w", force_zip64=True) as fh:
            fh.write(header.getvalue())
            left = n * 4
            while left:
                fh.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
        for name, data in keep.items():
            zf.writestr(name, data)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            st = p.lstat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out


def child_load(payload: dict[str, Any]) -> None:
    """Load a folder (or `pbmarl resume` it) and print one JSON line: outcome, message, peak MB."""
    import torch  # noqa: F401

    import pbmarl as pb  # noqa: F401 - imported before the baseline is read
    from pbmarl.runs.folder import RunFolderError

    base = reset_peak()
    out: dict[str, Any] = {"base_mb": base}
    try:
        if payload.get("cli"):
            from pbmarl.cli import main

            buf_err = io.StringIO()
            with contextlib.redirect_stderr(buf_err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc = main(payload["cli"])
                except SystemExit as exc:
                    rc = exc.code
            out.update(outcome="loaded" if rc == 0 else "refused", message=buf_err.getvalue().strip()[-300:], rc=rc)
        else:
            run = pb.load_run(payload["folder"])
            out.update(outcome="loaded", message=f"{type(run).__name__} at iteration {run.iteration}",
                       iteration=run.iteration)
    except (RunFolderError, ValueError, TypeError, OSError) as exc:
        out.update(outcome="refused", message=f"{type(exc).__name__}: {str(exc)[:300]}")
    except BaseException as exc:  # noqa: BLE001
        out.update(outcome="error", message=f"{type(exc).__name__}: {str(exc)[:300]}",
                   where=traceback.format_exc().splitlines()[-3:])
    out["peak_mb"] = peak_mb()
    print(json.dumps(out), flush=True)


def _tamper_fixtures(work: Path) -> dict[str, tuple[Path, Path]]:
    """Saved folders (2 steps) and an outside copy of each (3 steps) for the tampering."""
    import pbmarl as pb

    all_cases = cases()
    out = {}
    builds: dict[str, Callable[[], Any]] = {
        name: (lambda n=name: all_cases[n].build(all_cases[n].game, **KILL_TYPES.get(n, {})))
        for name in ("PSRO", "League[dqn]", "NFSP", "SAC", "MARL")}

    def marl_fixed() -> Any:
        game = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=5)
        mapping = pb.AgentMapping(game, {"adversary_0": "red", "agent_0": "blue", "agent_1": "blue"})
        blue = pb.MLPPolicy(mapping.group_game("blue"), hidden=(8,), seed=3)
        return pb.MARL(game, {"red": pb.learners.IPPO(seed=0, steps_per_round=10, epochs=1)}, mapping,
                       fixed={"blue": blue}, seed=0, num_envs=2)

    builds["MARL-fixed"] = marl_fixed
    for name, build in builds.items():
        base, outside = work / "runs" / name, work / "outside" / name
        for folder, steps in ((base, 2), (outside, 3)):
            run = build()
            for _ in range(steps):
                run.step()
            run.save(folder)
            run.close()
        out[name] = (base, outside)
    return out


def _tampers() -> list[tuple[str, str, Callable[[Path, Path], None], bool]]:
    """(name, run types ('*' for all), change(folder, outside), points outside the folder)."""

    def pointer_abs(f: Path, o: Path) -> None:
        _edit_json(f / "run.json", lambda m: m.update(state=str(_state(o).resolve())))

    def pointer_rel(f: Path, o: Path) -> None:
        rel = os.path.relpath(_state(o), f)
        _edit_json(f / "run.json", lambda m: m.update(state=rel))

    def state_symlink(f: Path, o: Path) -> None:
        s = _state(f)
        shutil.rmtree(s)
        s.symlink_to(_state(o).resolve(), target_is_directory=True)

    def file_symlink(f: Path, o: Path) -> None:
        s = _state(f) / "state.json"
        s.unlink()
        s.symlink_to((_state(o) / "state.json").resolve())
        reseal(f)

    def subfolder_symlink(f: Path, o: Path) -> None:
        folders = json.loads((_state(f) / "manifest.json").read_text())["folders"]
        s = _state(f) / folders[0]
        shutil.rmtree(s)
        s.symlink_to((_state(o) / folders[0]).resolve(), target_is_directory=True)

    def inner_symlink(f: Path, o: Path) -> None:  # a file inside a sub-folder
        folders = json.loads((_state(f) / "manifest.json").read_text())["folders"]
        inner = next(p for p in sorted((_state(f) / folders[-1]).rglob("*")) if p.is_file())
        rel = inner.relative_to(_state(f))
        inner.unlink()
        inner.symlink_to((_state(o) / rel).resolve())

    def population_file(absolute: bool) -> Callable[[Path, Path], None]:
        def change(f: Path, o: Path) -> None:
            pop = next(_state(f).rglob("population.json"))
            other = next(_state(o).rglob("population.json")).parent
            member = json.loads(pop.read_text())["members"][0]["file"]
            target = (other / member).resolve()
            name = str(target) if absolute else os.path.relpath(target, pop.parent)
            _edit_json(pop, lambda d: d["members"][0].update(file=name))
        return change

    def fixed_names(f: Path, o: Path) -> None:
        def edit(d: Any) -> None:
            for entry in d["fixed"].values():
                entry["members"][0]["arrays"][0][1] = os.path.relpath(_state(o) / "arrays.npz", _state(f))
        _edit_json(_state(f) / "state.json", edit)
        reseal(f)

    def bomb(f: Path, o: Path) -> None:
        _add_bomb(_state(f) / "arrays.npz")
        reseal(f)

    def bomb_population(f: Path, o: Path) -> None:
        target = next(p for p in sorted(_state(f).rglob("*.npz")) if p.parent != _state(f))
        _add_bomb(target)

    def swell(f: Path, o: Path) -> None:
        _swell(_state(f) / "arrays.npz")
        reseal(f)

    def config(**changes: Any) -> Callable[[Path, Path], None]:
        def change(f: Path, o: Path) -> None:
            _edit_json(f / "run.json", lambda m: m["config"].update(changes))
        return change

    def marl_learner_config(**changes: Any) -> Callable[[Path, Path], None]:
        def change(f: Path, o: Path) -> None:
            _edit_json(_state(f) / "state.json", lambda d: d["learners"][0]["config"].update(changes))
            reseal(f)
        return change

    def game_name(f: Path, o: Path) -> None:
        _edit_json(f / "run.json", lambda m: m["game"].update(name="pettingzoo:simple_spread_v3(N=4000, max_cycles=10)"))

    def corrupt_pt(truncate: bool) -> Callable[[Path, Path], None]:
        def change(f: Path, o: Path) -> None:
            pt = next(iter(sorted(_state(f).glob("*.pt"))))
            data = pt.read_bytes()
            pt.write_bytes(data[: len(data) // 2] if truncate else os.urandom(len(data)))
            reseal(f)
        return change

    return [
        ("state pointer, absolute path outside", "*", pointer_abs, True),
        ("state pointer, relative path outside", "*", pointer_rel, True),
        ("state-NNNNNN/ a symlink outside", "*", state_symlink, True),
        ("state.json a symlink outside (manifest resealed)", "*", file_symlink, True),
        ("sub-folder a symlink outside", "PSRO,League[dqn]", subfolder_symlink, True),
        ("file inside a sub-folder a symlink outside", "PSRO,League[dqn]", inner_symlink, True),
        ("population 'file' entry, absolute path outside", "PSRO,League[dqn]", population_file(True), True),
        ("population 'file' entry, relative path outside", "PSRO,League[dqn]", population_file(False), True),
        ("MARL fixed-group array name pointing outside", "MARL-fixed", fixed_names, True),
        ("arrays.npz + 16 members of 256 MB (zip bomb)", "League[dqn],NFSP,SAC,MARL,MARL-fixed", bomb, False),
        ("population .npz + 16 members of 256 MB", "PSRO,League[dqn]", bomb_population, False),
        ("arrays.npz first member swollen to 2 GB", "NFSP,SAC,MARL-fixed", swell, False),
        ("config hidden [60000, 60000]", "NFSP,SAC", config(hidden=[60000, 60000]), False),
        ("config hidden [16384, 16384] (the cap)", "SAC", config(hidden=[16384, 16384]), False),
        ("learner config hidden [60000, 60000]", "MARL", marl_learner_config(hidden=[60000, 60000]), False),
        ("config replay_capacity 10**12", "NFSP", config(replay_capacity=10**12), False),
        ("config buffer_size 10**12", "SAC", config(buffer_size=10**12), False),
        ("game simple_spread_v3(N=4000)", "MARL", game_name, False),
        ("corrupt .pt (random bytes)", "SAC,MARL,NFSP", corrupt_pt(False), False),
        ("truncated .pt", "SAC,MARL", corrupt_pt(True), False),
        ("untampered (baseline)", "*", lambda f, o: None, False),
    ]


def _cli_fixtures(work: Path, outside: Path) -> list[tuple[str, Path, list[str], bool]]:
    """`pbmarl marl` and `pbmarl train` folders whose run dir / state dir / history.csv is a symlink outside
    (name, folder, argv, whether a load that succeeds has read outside)."""
    made = []
    marl = work / "cli-marl"
    cmd = [sys.executable, "-m", "pbmarl.cli", "marl", "--game", "pettingzoo:simple_spread_v3(N=2, max_cycles=10)",
           "--algo", "mappo", "--out", str(marl), "--steps", "200", "--num-envs", "2", "--steps-per-round", "100",
           "--eval-episodes", "1", "--quiet"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    if res.returncode == 0:
        history = work / "cli-marl-history"
        shutil.copytree(marl, history)
        (history / "history.csv").unlink()
        (outside / "cli-history.csv").write_text("not the run's\n")
        (history / "history.csv").symlink_to((outside / "cli-history.csv").resolve())
        made.append(("pbmarl resume, marl folder whose history.csv is a symlink outside", history,
                     ["resume", str(history), "--steps", "100", "--quiet"], False))
        shutil.move(str(marl / "run"), str(outside / "cli-marl-run"))
        (marl / "run").symlink_to((outside / "cli-marl-run").resolve(), target_is_directory=True)
        made.append(("pbmarl resume, marl folder whose run/ is a symlink outside", marl,
                     ["resume", str(marl), "--steps", "100", "--quiet"], True))
    else:
        print(f"  (pbmarl marl failed: {res.stderr[-300:]})")
    train = work / "cli-train"
    cmd = [sys.executable, "-m", "pbmarl.cli", "train", "--game", "gym:Pendulum-v1", "--algo", "sac", "--out", str(train),
           "--steps", "400", "--eval-episodes", "1", "--quiet"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    if res.returncode == 0:
        state = _state(train)
        shutil.move(str(state), str(outside / "cli-train-state"))
        state.symlink_to((outside / "cli-train-state").resolve(), target_is_directory=True)
        made.append(("pbmarl resume, train folder whose state dir is a symlink outside", train,
                     ["resume", str(train), "--steps", "200", "--quiet"], True))
    else:
        print(f"  (pbmarl train failed: {res.stderr[-300:]})")
    return made


def slice_tamper(args: argparse.Namespace) -> list[Row]:
    work = Path(tempfile.mkdtemp(prefix="probes-tamper-"))
    counts: Counter[str] = Counter()
    growth: list[tuple[float, str]] = []  # (MB a load grew by, what), tampered loads
    baseline: list[float] = []  # the same for untampered loads
    notes: list[str] = []
    try:
        fixtures = _tamper_fixtures(work)
        outside = work / "outside"
        probes: list[tuple[str, str, dict[str, Any], bool]] = []
        tampers = _tampers()
        for tname, kinds, change, points_out in [tampers[-1]] + tampers[:-1]:  # the untampered loads first
            for kind, (base, out) in fixtures.items():
                if kinds != "*" and kind not in kinds.split(","):
                    continue
                folder = work / "probe" / f"{kind}-{len(probes)}"
                shutil.copytree(base, folder, symlinks=True)
                change(folder, out)
                probes.append((tname, kind, {"folder": str(folder)}, points_out))
        for tname, _folder, argv, reads_out in _cli_fixtures(work, outside):
            probes.append((tname, "CLI", {"cli": argv}, reads_out))
        for tname, kind, payload, points_out in probes:
            before = _snapshot(outside)
            res = run_child(child_command("load", payload), timeout=300)
            after = _snapshot(outside)
            try:
                out = json.loads(res.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                out = {"outcome": "error", "message": f"rc {res.rc}: {res.stderr.strip()[-300:]}",
                       "peak_mb": res.max_rss_mb, "base_mb": 0.0}
            if res.killed_for_memory:
                out = {"outcome": "over memory", "message": f"killed at {res.max_rss_mb:.0f} MB resident",
                       "peak_mb": res.max_rss_mb, "base_mb": 0.0}
            outcome = out["outcome"]
            grown = float(out["peak_mb"]) - float(out.get("base_mb") or 0.0)
            untampered = tname.startswith("untampered")
            (baseline.append(grown) if untampered else growth.append((grown, f"{kind}: {tname}")))
            if before != after:
                outcome = "wrote outside"
            elif outcome == "loaded" and points_out:
                outcome = "read outside"
            elif outcome == "loaded" and not untampered and grown > RSS_ALLOWED_MB:
                outcome = "over memory"
            counts[outcome] += 1
            print(f"  {kind:12s} {tname:55s} {outcome:13s} +{grown:5.0f} MB  {out['message'][:150]}", flush=True)
            if outcome not in ("refused", "loaded") or (outcome == "loaded" and not untampered and "16 members" not in tname):
                notes.append(f"{kind} {tname}: {outcome} (+{grown:.0f} MB)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = sum(counts.values())
    bad = counts["read outside"] + counts["wrote outside"] + counts["over memory"] + counts["error"]
    top = max(growth) if growth else (0.0, "")
    return [Row("tamper", n, n - bad, bad,
                f"{_counts(counts)}; largest growth of a tampered load +{top[0]:.0f} MB ({top[1]}), of an untampered "
                f"one +{max(baseline, default=0.0):.0f} MB (resident, over the process after imports)"
                + (f"; besides refusals and the bombs loaded without their extra members: {'; '.join(notes)}"
                   if notes else ""))]


# -- badinput -------------------------------------------------------------------------------------------
def classify(exc: BaseException | None, hints: Sequence[str], *, root: str | None = None) -> str:
    """clear / partial / unclear / silent for the answer to one bad call (see the module doc).

    >>> classify(None, ["N"])
    'silent'
    """
    if exc is None:
        return "silent"
    root = root or pbmarl_dir()
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    from_pbmarl = last is not None and last.startswith(root)
    if not isinstance(exc, (ValueError, TypeError)) or not from_pbmarl:
        return "unclear"
    message = str(exc)
    return "clear" if any(_names(message, h) for h in hints) else "partial"


def _names(message: str, hint: str) -> bool:
    if re.fullmatch(r"\w+", hint):
        return re.search(rf"(?<![\w]){re.escape(hint)}(?![\w])", message) is not None
    return hint.lower() in message.lower()


#: hints for probe rows whose case names no option=value
HINTS = {
    "ApeX on Pendulum (Box)": ["Box", "Discrete"],
    "AgentMapping.from_spec(garbage)": ["garbage"],
    "GaussianPolicy.act obs with NaN": ["NaN", "nan"],
    "collect Pendulum policy acts 5.0 outside Box(-2,2)": ["5.0"],
    "collect Pendulum policy acts NaN": ["nan", "NaN"],
    "collect Pendulum policy acts 5.0": ["5.0"],  # the same two rows as tests/test_bad_input.py names them
    "same MAPPO in 2 MARLs (spread, adversary), step the first again": ["already", "MAPPO"],
    "NFSP('gym:CartPole-v1').step()": ["CartPole-v1", "two-player", "2-player", "players"],
    "PSRO.run(True)": ["True"],
    "PSRO(kuhn, learner=DQN(CartPole)) game mismatch": ["CartPole-v1"],
    "resume of train folder with empty train.json": ["train.json"],
    "league.main_policy('nobody') then step": ["nobody"],
    "AgentMapping bogus kw": ["bogus"],
    "MAPPO bogus option": ["bogus"],
    "IPPO bogus=1": ["bogus"],
    "QMIX buffer_episodes < batch_episodes": ["buffer_episodes"],
    "NFSP min_buffer > replay_capacity": ["min_buffer"],
}


def case_hints(case: str) -> list[str]:
    if case in HINTS:
        return HINTS[case]
    m = re.search(r"([A-Za-z_]\w*)\s*=\s*([^\s)]+)", case)
    if not m:
        return [case]
    key, value = m.group(1), m.group(2).strip("'\"")
    return [key] + ([value] if len(value) > 1 else [])


def probe_rows(path: Path = REFERENCE) -> list[dict[str, str]]:
    """The rows of the reference probe list: section (unclear / silent / partial), entry point, case, call."""
    rows, section = [], ""
    for line in path.read_text().splitlines():
        m = re.match(r"#### (\w+)", line)
        if m:
            section = m.group(1)
            continue
        if not line.startswith("| ") or line.startswith("| entry point") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) < 4:
            continue
        call = cells[2].strip("`").replace("\\|", "|")
        rows.append({"section": section, "entry": cells[0], "case": cells[1], "call": call})
    return rows


class _Pb:
    """`pb` as the probe list writes it: a name not at pbmarl's top level is looked up in pb.policies, then pb.learners
    (the list predates the moves of `GaussianPolicy`, `DeterministicPolicy` and `noise` to pbmarl.policies)."""

    def __getattr__(self, name: str) -> Any:
        import pbmarl as pb

        for where in (pb, pb.policies):
            try:
                return getattr(where, name)
            except AttributeError:
                pass
        return getattr(pb.learners, name)


class PostCheckFailed(Exception):
    """A refused call changed its object or left it unusable."""


def probe_namespace() -> dict[str, Any]:
    """The helpers the probe list's calls use (its preamble describes each)."""
    import functools

    import numpy as np
    import test_bad_input as tbi

    import pbmarl as pb

    pend = functools.cache(lambda: pb.load_game("gym:Pendulum-v1"))
    cart = functools.cache(lambda: pb.load_game("gym:CartPole-v1"))
    kuhn = functools.cache(lambda: pb.load_game("kuhn_poker"))
    spread = functools.cache(lambda: pb.load_game("pettingzoo:simple_spread_v3", N=2, max_cycles=10))
    spread_c = functools.cache(lambda: pb.load_game("pettingzoo:simple_spread_v3", N=2, max_cycles=10,
                                                    continuous_actions=True))
    mappo_small = {"steps_per_round": 100, "hidden": (16, 16)}

    def ctrl(cls: Any, game: Callable[[], Any], **kw: Any) -> Any:
        options = {"seed": 0, "budget": 400, "steps_per_round": 200, "learning_starts": 50, "hidden": (16, 16),
                   "batch_size": 16, "buffer_size": 1000, **kw}
        run = cls(game(), **options)
        return str(run.step())

    def marl(learners: Any = None, mapping: Any = None, game: Any = None, **kw: Any) -> Any:
        game = game or spread()
        learners = learners or {"shared": pb.MAPPO(**mappo_small)}
        run = pb.MARL(game, learners, mapping or pb.AgentMapping.shared(game, agent_id=True), **{"num_envs": 4, **kw})
        return str(run.step())

    def marl_fixture() -> Any:
        run = pb.MARL(spread(), {"shared": pb.MAPPO(**mappo_small)}, pb.AgentMapping.shared(spread(), agent_id=True),
                      num_envs=4)
        run.step()
        return run

    def league_fixture() -> Any:
        run = pb.League("kuhn_poker", seed=0, snapshot_min_steps=1, snapshot_max_steps=2)
        run.step()
        return run

    def fp(run: Any) -> str:
        return state_digest(run) + fingerprint(run).to_csv()

    def usable_after(obj: Any, call: Callable[[Any], Any], fp_: Callable[[Any], str]) -> Any:
        before = fp_(obj)
        try:
            result = call(obj)
        except Exception as exc:  # noqa: BLE001
            unchanged = fp_(obj) == before
            try:
                obj.step()
                usable = True
            except Exception:  # noqa: BLE001
                usable = False
            if not (unchanged and usable):
                raise PostCheckFailed(f"refused with {exc!r}, then unchanged={unchanged}, usable={usable}") from exc
            raise
        return result

    return {"pb": _Pb(), "np": np, "math": math, "NAN": math.nan, "INF": math.inf, "N_": pb.policies.noise,
            "pend": pend, "cart": cart, "kuhn": kuhn, "spread": spread, "spread_c": spread_c, "ctrl": ctrl,
            "marl": marl,
            "MAPPO_SMALL": mappo_small, "marl_fixture": marl_fixture, "league_fixture": league_fixture,
            "fp_marl": fp, "fp_league": fp, "usable_after": usable_after, "oob_collect": tbi.oob_collect,
            "OutOfBox": tbi._ActsOutside, "NaNAct": tbi._ActsNaN}


def _compile(call: str) -> Any:
    for cut in range(4):  # the list's calls sometimes carry the closing parentheses of a print around them
        text = call[: len(call) - cut] if cut else call
        try:
            return compile(text, "<probe>", "eval")
        except SyntaxError:
            continue
    raise SyntaxError(call)


def run_cli_probe(row: dict[str, str]) -> tuple[str, str]:
    """A command-line row: run it, clear when it fails without a traceback and names the value."""
    with tempfile.TemporaryDirectory(prefix="probe-cli-") as tmp:
        call = row["call"]
        argv = shlex.split(call.replace("DIR", tmp + "/run"))[1:]
        if "empty train.json" in row["case"]:
            Path(tmp, "run").mkdir()
            Path(tmp, "run", "train.json").write_text("{}")
        res = subprocess.run([sys.executable, "-m", "pbmarl.cli", *argv], capture_output=True, text=True, timeout=600,
                             cwd=str(ROOT))
        err = res.stderr.strip()
        if res.returncode == 0:
            return "silent", f"exit 0: {res.stdout.strip()[-150:]}"
        if "Traceback" in err:
            return "unclear", err.splitlines()[-1][:200]
        hints = case_hints(row["case"].split("'")[1] if "'" in row["case"] else row["case"])
        hints = hints + case_hints(row["case"])
        return ("clear" if any(_names(err, h) for h in hints) else "partial"), err[-200:]


def child_badinput(payload: dict[str, Any]) -> None:
    """Run the probe list's calls one by one, printing one JSON line each (the parent tallies them)."""
    import warnings

    warnings.simplefilter("ignore")
    ns = probe_namespace()
    root = pbmarl_dir()

    def two_marls_same_learner() -> Any:
        import pbmarl as pb

        learner = pb.MAPPO(**ns["MAPPO_SMALL"])
        first = pb.MARL(ns["spread"](), {"shared": learner}, pb.AgentMapping.shared(ns["spread"](), agent_id=True),
                        num_envs=4)
        first.step()
        adv = pb.load_game("pettingzoo:simple_adversary_v3", max_cycles=10)
        pb.MARL(adv, {"shared": learner}, pb.AgentMapping.shared(adv, agent_id=True, pad=True), num_envs=4)
        return str(first.step())

    which = payload.get("rows", "list")
    if which == "list":
        for i, row in enumerate(probe_rows()):
            t0 = time.time()
            if row["entry"] == "CLI":
                outcome, message = run_cli_probe(row)
            else:
                exc: BaseException | None = None
                try:
                    if row["call"].startswith("def two_marls_same_learner"):
                        two_marls_same_learner()
                    else:
                        eval(_compile(row["call"]), dict(ns))  # noqa: S307 - the probe list's own calls
                except PostCheckFailed as err:
                    exc = err
                except Exception as err:  # noqa: BLE001
                    exc = err
                if isinstance(exc, PostCheckFailed):
                    outcome, message = "partial", str(exc)
                else:
                    outcome = classify(exc, case_hints(row["case"]), root=root)
                    message = "" if exc is None else f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            print(json.dumps({"i": i, **row, "outcome": outcome, "message": message,
                              "seconds": round(time.time() - t0, 2)}), flush=True)
    else:
        import test_bad_input as tbi

        for i, (name, call, _error, _fragment) in enumerate(tbi.ROWS):
            exc = None
            try:
                call()
            except Exception as err:  # noqa: BLE001
                exc = err
            hints = case_hints(name)
            outcome = classify(exc, hints, root=root)
            message = "" if exc is None else f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            print(json.dumps({"i": i, "section": "encoded", "case": name, "outcome": outcome, "message": message}),
                  flush=True)


def slice_badinput(args: argparse.Namespace) -> list[Row]:
    rows = []
    for which, label in (("list", "badinput (reference list)"), ("encoded", "badinput (test_bad_input rows)")):
        res = run_child(child_command("badinput", {"rows": which}), timeout=1800, rss_limit_mb=6000)
        counts: Counter[str] = Counter()
        notes = []
        for line in res.stdout.splitlines():
            try:
                out = json.loads(line)
            except ValueError:
                continue
            counts[out["outcome"]] += 1
            mark = "" if out["outcome"] == "clear" else "  <--"
            print(f"  [{out['section']:8s}] {out['case'][:60]:60s} {out['outcome']:8s} {out['message'][:140]}{mark}",
                  flush=True)
            if out["outcome"] != "clear":
                notes.append(f"{out['case']}: {out['outcome']}")
        if res.rc != 0:
            notes.append(f"child stopped rc={res.rc}{' (memory)' if res.killed_for_memory else ''}: "
                         f"{res.stderr.strip()[-300:]}")
        n = sum(counts.values())
        expected = len(probe_rows()) if which == "list" else None
        rows.append(Row(label, n, counts["clear"], n - counts["clear"],
                        f"{_counts(counts)}" + (f" of {expected} rows" if expected else "")
                        + (f"; {'; '.join(notes)}" if notes else "")))
    return rows


# -- exact ----------------------------------------------------------------------------------------------
def child_exact(payload: dict[str, Any]) -> None:
    import pbmarl as pb
    from pbmarl.games.tree import check_fits
    from pbmarl.games.tree_size import estimate_memory

    if payload["what"] == "trade_comm":
        base = reset_peak()
        t0 = time.time()
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                pb.ExactEvaluator(pb.load_game("trade_comm"))
            outcome, message = "built", ""
        except Exception as exc:  # noqa: BLE001
            outcome, message = f"refused ({type(exc).__name__})", str(exc)
        print(json.dumps({"outcome": outcome, "message": message, "seconds": time.time() - t0,
                          "peak_mb": peak_mb(), "base_mb": base, "progress": err.getvalue()[-200:]}), flush=True)
    else:
        for name in payload["games"]:
            game = pb.load_game(name)
            t0 = time.time()
            try:
                size = check_fits(game)
                outcome = "fits"
                message = f"{size.describe()}; upper estimate {estimate_memory(game, size.high) / 2**30:.1f} GB"
            except Exception as exc:  # noqa: BLE001
                outcome, message = f"refused ({type(exc).__name__})", str(exc)
            print(json.dumps({"game": name, "outcome": outcome, "message": message, "seconds": time.time() - t0}),
                  flush=True)


def slice_exact(args: argparse.Namespace) -> list[Row]:
    rows = []
    res = run_child(child_command("exact", {"what": "trade_comm"}), timeout=600, rss_limit_mb=4000)
    try:
        out = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = {"outcome": "error", "message": f"rc {res.rc} {'memory' if res.killed_for_memory else ''} "
                                              f"{res.stderr[-300:]}", "seconds": math.nan, "peak_mb": res.max_rss_mb}
    ok = out["outcome"].startswith(("refused (NotExact", "refused (WalkOverBudget", "built"))
    print(f"  trade_comm: {out['outcome']} in {out['seconds']:.1f} s, peak {out['peak_mb']:.0f} MB: {out['message']}",
          flush=True)
    rows.append(Row("exact trade_comm", 1, int(ok), int(not ok),
                    f"{out['outcome']} in {out['seconds']:.1f} s, peak RSS {out['peak_mb']:.0f} MB: {out['message'][:220]}"))
    games = ["liars_dice(numdice=2,dice_sides=4)", "goofspiel(num_cards=5)", "liars_dice", "leduc_poker(players=3)"]
    res = run_child(child_command("exact", {"what": "fits", "games": games}), timeout=600, rss_limit_mb=4000)
    outs = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    for out in outs:
        print(f"  {out['game']}: {out['outcome']} ({out['seconds']:.1f} s): {out['message']}", flush=True)
    fits = sum(o["outcome"] == "fits" for o in outs)
    rows.append(Row("exact trees that fit (size-estimate path, no walk)", len(games), fits, len(games) - fits,
                    "; ".join(f"{o['game']}: {o['outcome']}, {o['message'][:90]}" for o in outs)))
    return rows


# -- ppo2 -----------------------------------------------------------------------------------------------
PPO_SETTINGS = [("no workers", {}), ("1 worker, bsp", {"workers": 1, "sync": "bsp", "backend": "local"}),
                ("2 workers, bsp", {"workers": 2, "sync": "bsp", "backend": "local"}),
                ("2 workers, asp", {"workers": 2, "sync": "asp", "backend": "local"}),
                # what BSP with 2 workers equals update by update: one learner on the combined batch
                ("no workers, 2048 steps a round", {"steps_per_round": 2048})]


def child_ppo(payload: dict[str, Any]) -> None:
    import pbmarl as pb

    learner = pb.PPO("gym:CartPole-v1", seed=payload["seed"], **payload["options"])
    learner.start(0, [None])
    t0, best, task = time.time(), -math.inf, learner.task
    while task.env_steps < payload["steps"] and time.time() - t0 < payload["seconds"]:
        rec = learner.step()
        value = getattr(rec, "mean_return", None)
        value = getattr(rec, "episode_return", None) if value is None else value
        if value is not None and math.isfinite(float(value)):
            best = max(best, float(value))
    learner.finish()
    print(json.dumps({"best": best, "env_steps": int(task.env_steps), "seconds": time.time() - t0}), flush=True)


def slice_ppo2(args: argparse.Namespace) -> list[Row]:
    outs = {}
    chosen = args.ppo_settings.split(",") if args.ppo_settings else None
    for i, (label, options) in enumerate(PPO_SETTINGS):
        if chosen is not None and str(i) not in chosen:
            continue
        res = run_child(child_command("ppo", {"options": options, "steps": args.ppo_steps, "seconds": args.ppo_seconds,
                                              "seed": args.seed}), timeout=args.ppo_seconds + 300)
        try:
            outs[label] = json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            outs[label] = {"best": math.nan, "env_steps": 0, "seconds": 0.0, "error": res.stderr[-300:]}
        o = outs[label]
        print(f"  PPO CartPole {label}: best mean return {o['best']:.1f} at {o['env_steps']:,} env steps, "
              f"{o['seconds']:.0f} s {o.get('error', '')}", flush=True)
    one = outs.get("1 worker, bsp", {}).get("best", math.nan)
    two = [outs[k]["best"] for k in ("2 workers, bsp", "2 workers, asp") if k in outs]
    ok = sum(b > 100 and b >= 0.5 * one for b in two)
    return [Row("ppo2 (2 workers learn like 1)", len(two), ok, len(two) - ok,
                f"{args.ppo_steps:,} env steps or {args.ppo_seconds:.0f} s each, default settings, seed {args.seed}; "
                + "; ".join(f"{k}: best {v['best']:.1f} ({v['env_steps']:,} steps, {v['seconds']:.0f} s)"
                            for k, v in outs.items())
                + "; ok = above 100 (random play ~22) and at least half of one worker's")]


# -- the table ------------------------------------------------------------------------------------------
def print_table(rows: list[Row]) -> None:
    width = max(len(r.probe) for r in rows)
    print(f"\n{'probe':{width}s} {'trials':>6s} {'ok':>5s} {'failed':>6s}  details")
    for r in rows:
        print(f"{r.probe:{width}s} {r.trials:6d} {r.ok:5d} {r.failed:6d}  {r.details}")


def append_rows(rows: list[Row], command: str, rev: str, path: Path = RESULTS) -> None:
    """Append `rows` with the date and machine now and `rev`, the commit the slice started at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    where = machine()
    with open(path, "a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(HEADER)
        for r in rows:
            w.writerow([date, rev, where, command, r.probe, r.trials, r.ok, r.failed, r.details])


CHILDREN: dict[str, Callable[[dict[str, Any]], None]] = {"kill": child_kill, "load": child_load,
                                                         "badinput": child_badinput, "exact": child_exact,
                                                         "ppo": child_ppo}
RUNNERS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "ctrlc": slice_ctrlc, "kill": slice_kill, "tamper": slice_tamper, "badinput": slice_badinput,
    "exact": slice_exact, "ppo2": slice_ppo2}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SLICES), help=f"comma-separated slices of {list(SLICES)}")
    parser.add_argument("--trials", type=int, default=None,
                        help="Ctrl-C trials per run type (default 10); random kills per type (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--types", default=None, help="only these run types (ctrlc, kill), comma-separated")
    parser.add_argument("--ppo-steps", type=int, default=2_500_000, help="ppo2: env steps per setting")
    parser.add_argument("--ppo-seconds", type=float, default=90.0, help="ppo2: wall-time cap per setting")
    parser.add_argument("--ppo-settings", default=None,
                        help="ppo2: comma-separated indices of the settings to run (default: all; "
                             + "; ".join(f"{i} {label}" for i, (label, _) in enumerate(PPO_SETTINGS)) + ")")
    parser.add_argument("--no-csv", action="store_true", help="print only")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("payload", nargs="?", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("MPLBACKEND", "Agg")
    if args.child:
        CHILDREN[args.child](json.loads(args.payload))
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in SLICES]
    if unknown:
        parser.error(f"unknown slice(s) {unknown}; accepted: {list(SLICES)}")
    command = "python benchmarks/probes.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    rows: list[Row] = []
    for name in only:
        rev = commit()
        t0 = time.time()
        print(f"== {name}", flush=True)
        got = RUNNERS[name](args)
        print(f"== {name}: {time.time() - t0:.0f} s", flush=True)
        rows += got
        if not args.no_csv:
            append_rows(got, command.strip(), rev)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
