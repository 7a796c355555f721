"""Issue 10, hardening: all-or-nothing steps, untrusted run folders, bad input, the CLI's rough edges.

One test (or one group) per numbered item of the issue; each can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb


def _state(run):
    return (run.population.sizes, run.table.values.copy(), len(run.records), run.rng.bit_generator.state,
            run._wall, run._env_steps, [list(d) for d in run.meta_strategy])


def _same(a, b):
    assert a[0] == b[0] and a[2:4] == b[2:4] and a[4:6] == b[4:6] and a[6] == b[6]
    np.testing.assert_array_equal(a[1], b[1])


# -- item 1: steps are all-or-nothing --------------------------------------------------------------
class _Boom(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("phase", ["oracle", "evaluate", "solve", "measure", "save"])
def test_item1_interrupted_step_leaves_run_as_before(phase, tmp_path, monkeypatch):
    run = pb.PSRO("kuhn_poker", solver="nash", save_dir=tmp_path / "run")
    run.step()
    before = _state(run)

    def boom(*args, **kwargs):
        raise _Boom(phase)

    target = {"oracle": (run.learner, "respond"), "evaluate": (run.evaluator, "fill"),
              "solve": (run, "solver"), "measure": (run.evaluator, "exploitability"),
              "save": (run, "save")}[phase]
    monkeypatch.setattr(*target, boom)
    with pytest.raises(_Boom):
        run.step()
    _same(_state(run), before)
    monkeypatch.undo()
    # the next step works, the saved folder loads, and the run goes on as if never interrupted
    record = run.step()
    twin = pb.PSRO("kuhn_poker", solver="nash")
    twin.step()
    expected = twin.step()
    assert record.meta_strategy == expected.meta_strategy and record.exploitability == pytest.approx(expected.exploitability)
    loaded = pb.PSRO.load(tmp_path / "run")
    assert loaded.iteration == 2 and loaded.population.sizes == (3, 3)


# -- items 2, 4, 5, 14, 16: run folders and the command line --------------------------------------
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from pbmarl.cli import main as cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_item2_unwritable_run_folder_is_found_before_the_work(tmp_path, monkeypatch):
    run = pb.PSRO("kuhn_poker", save_dir=tmp_path / "run")
    calls = []
    monkeypatch.setattr(run.learner, "respond", lambda *a, **k: calls.append(1))

    def refuse(path, *, what="folder"):
        raise OSError(f"cannot write the {what} {str(path)!r}: Read-only file system")

    monkeypatch.setattr("pbmarl.io.ensure_writable_folder", refuse)
    with pytest.raises(OSError, match="Read-only"):
        run.step()
    assert calls == [] and len(run.records) == 1  # no oracle call, no record appended
    # the command line checks before loading or computing anything
    monkeypatch.undo()
    out = tmp_path / "cli"
    assert cli(["psro", "--game", "kuhn_poker", "--iterations", "1", "--out", str(out), "--quiet"]) == 0
    monkeypatch.setattr("pbmarl.io.ensure_writable_folder", refuse)
    monkeypatch.setattr("pbmarl.algorithms.psro.psro.PSRO.load", lambda *a, **k: pytest.fail("loaded before the check"))
    assert cli(["resume", str(out), "--iterations", "1", "--quiet"]) == 2


def test_item4_stray_tmp_files_are_removed_at_save_and_resume(tmp_path):
    out = tmp_path / "run"
    run = pb.PSRO("kuhn_poker", save_dir=out)
    strays = [out / ".run.json.abc.tmp", out / ".state-000009.x.tmp"]
    for path in strays:
        path.write_text("partial")
    run.step()
    assert not any(p.exists() for p in strays)
    assert sorted(p.name for p in out.iterdir()) == ["history.csv", "run.json", "state-000002"]  # older saves go


def test_item5_and_14_resume_says_what_to_do(tmp_path, capsys):
    out = tmp_path / "never"
    out.mkdir()
    (out / "started.json").write_text(json.dumps({"argv": ["pbmarl", "psro", "--game", "kuhn_poker",
                                                            "--out", str(out)]}))
    assert cli(["resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no iteration" in err and f"pbmarl psro --game kuhn_poker --out {out}" in err
    done = tmp_path / "done"
    assert cli(["psro", "--game", "kuhn_poker", "--iterations", "1", "--out", str(done), "--quiet"]) == 0
    capsys.readouterr()
    assert cli(["resume", str(done)]) == 0
    text = capsys.readouterr().out
    assert "complete" in text and "--iterations" in text and "0it" not in text


def test_item16_output_lines(tmp_path):
    out = tmp_path / "kuhn"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "pbmarl.cli", "psro", "--game", "kuhn_poker", "--iterations", "3",
                             "--out", str(out), "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("PSRO on kuhn_poker: solver nash, oracle exact, evaluator exact") and str(out) in lines[0]
    assert len(lines) == 2  # --quiet: the first line (with the run folder) and the final line
    assert "run.json, history.csv, state-*/, exploitability.png" in lines[1]
    assert "\r" not in result.stderr  # no progress bar redraws when stderr is not a terminal
    loud = subprocess.run([sys.executable, "-m", "pbmarl.cli", "resume", str(out), "--iterations", "3", "--stop", "0"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert "e-17" not in loud.stdout and "e-16" not in loud.stdout and "\r" not in loud.stderr


# -- items 6, 7, 8: run folders are untrusted input ------------------------------------------------
@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("saved") / "run"
    run = pb.PSRO("kuhn_poker", save_dir=out)
    run.step()
    return out


def _copy(saved_run, tmp_path):
    import shutil

    dst = tmp_path / "copy"
    shutil.copytree(saved_run, dst, symlinks=True)
    return dst


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _resave_state(folder, change):
    """Change the saved state.json and write its manifest entry again: a save that is consistent but made
    by someone else (the manifest catches accidents, not an author of bad files)."""
    import hashlib

    meta = json.loads((folder / "run.json").read_text())
    state = folder / meta["state"]
    _edit_json(state / "state.json", change)
    manifest = json.loads((state / "manifest.json").read_text())
    data = (state / "state.json").read_bytes()
    manifest["files"]["state.json"] = [len(data), hashlib.sha256(data).hexdigest()]
    (state / "manifest.json").write_text(json.dumps(manifest))


def test_item6_names_that_leave_the_folder_are_refused(saved_run, tmp_path):
    folder = _copy(saved_run, tmp_path)
    _edit_json(folder / "run.json", lambda d: d.__setitem__("state", "../outside"))
    with pytest.raises(ValueError, match="must name a state-NNNNNN folder"):
        pb.PSRO.load(folder)


def test_item6_symlinks_out_of_the_folder_are_refused(saved_run, tmp_path):
    folder = _copy(saved_run, tmp_path)
    state = json.loads((folder / "run.json").read_text())["state"]
    outside = tmp_path / "outside"
    (folder / state / "table").rename(outside)
    (folder / state / "table").symlink_to(outside)
    with pytest.raises(ValueError, match="not a folder of this save"):
        pb.PSRO.load(folder)


def test_item7_arrays_are_checked_before_they_are_decompressed(saved_run, tmp_path):
    import zipfile

    folder = _copy(saved_run, tmp_path)
    table = folder / json.loads((folder / "run.json").read_text())["state"] / "table" / "table.npz"
    # a small file whose header declares a 1.6 GB array: refused from the header alone
    bomb = tmp_path / "bomb.npz"
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = (200_000_000,)
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("big.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            fh.write(bytes(2**20))  # the header is refused before any of this is decompressed
    assert bomb.stat().st_size < 3_000_000
    from pbmarl.io import read_npz

    with pytest.raises(ValueError, match="more than the"):
        read_npz(bomb)
    # arrays that pbmarl does not expect are never read; a wrong shape is refused by the recorded sizes
    arrays = read_npz(table)
    arrays["extra"] = np.zeros(10)
    arrays["count"] = np.zeros((5, 5), dtype=np.int64)
    np.savez(table, **arrays)
    with pytest.raises(ValueError, match=r"array 'mean'|array 'count'.*shape"):
        pb.PSRO.load(folder)
    # pickled content is refused with the file named
    np.savez(tmp_path / "pickled.npz", obj=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="pickled.npz.*Python objects"):
        read_npz(tmp_path / "pickled.npz")


@pytest.mark.parametrize("change, message", [
    (lambda d: d.__setitem__("records", []), "does not match the game's players or the last record"),
    (lambda d: d["records"][0].pop("sizes"), r"cannot rebuild the run's parts or records \(KeyError"),
    (lambda d: d["evaluator"].update({"kind": "rollout", "envs_per_worker": 10**12}), "envs_per_worker must be at most"),
    (lambda d: d.__setitem__("rng", {"state": 1}), "bad rng or counters"),
])
def test_item8_malformed_state_names_file_and_key(saved_run, tmp_path, change, message):
    folder = _copy(saved_run, tmp_path)
    _resave_state(folder, change)
    with pytest.raises(ValueError, match=message):
        pb.PSRO.load(folder)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.__setitem__("seed", "abc"), "seed must be"),
    (lambda d: d["config"].update({"eval_episodes": 10**13}), "eval_episodes must be an int in"),
    (lambda d: d.__setitem__("format", 1), "has folder format 1"),
])
def test_item8_malformed_run_json_is_refused(saved_run, tmp_path, change, message):
    folder = _copy(saved_run, tmp_path)
    _edit_json(folder / "run.json", change)
    with pytest.raises(ValueError, match=message):
        pb.PSRO.load(folder)


def test_item8_a_changed_file_is_refused_by_the_manifest(saved_run, tmp_path):
    folder = _copy(saved_run, tmp_path)
    state = folder / json.loads((folder / "run.json").read_text())["state"]
    _edit_json(state / "state.json", lambda d: d.__setitem__("wall_time", 0.0))
    with pytest.raises(ValueError, match="does not match its manifest"):
        pb.PSRO.load(folder)


def test_item8_invalid_json_names_the_file(saved_run, tmp_path):
    folder = _copy(saved_run, tmp_path)
    (folder / "run.json").write_text('{"format": 1,')
    with pytest.raises(ValueError, match=r"run.json' is not valid JSON .*line 1"):
        pb.PSRO.load(folder)
    assert cli(["resume", str(folder)]) == 2


def test_item8_saved_learner_options_are_checked_on_load(tmp_path):
    pytest.importorskip("torch")
    from pbmarl.learners import make_learner

    with pytest.raises(ValueError, match="buffer_size must be a positive int up to 10\\*\\*8"):
        make_learner(pb.load_game("kuhn_poker"), {"name": "dqn", "buffer_size": 10**13})


# -- items 9 and 10: Ray ----------------------------------------------------------------------------
def _python(code, env_changes, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    env.update({"PYTHONPATH": str(ROOT), **env_changes})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)


def test_item9_token_auth_and_a_private_token_file(tmp_path):
    """In a subprocess with its own environment (the test session's Ray runs with auth disabled)."""
    code = ("from pbmarl.hosting.security import prepare_embedded_auth as p, default_token_path as d\n"
            "import os, stat; m = p(); f = d()\n"
            "print(m, f.exists() and oct(stat.S_IMODE(os.stat(f).st_mode)), os.environ['RAY_AUTH_MODE'])")
    home = tmp_path / "home"
    home.mkdir()
    first = _python(code, {"HOME": str(home)})
    assert first.stdout.split() == ["token", "0o600", "token"], first.stderr
    token = (home / ".ray" / "auth_token").read_text()
    assert len(token) == 64 and _python(code, {"HOME": str(home)}).returncode == 0
    assert (home / ".ray" / "auth_token").read_text() == token  # never overwritten
    # the user's choice stands; a token given another way is not duplicated into a file
    other = tmp_path / "other"
    other.mkdir()
    assert _python(code, {"HOME": str(other), "RAY_AUTH_MODE": "disabled"}).stdout.split() == ["disabled", "False",
                                                                                                 "disabled"]
    assert _python(code, {"HOME": str(other), "RAY_AUTH_TOKEN": "ab" * 32}).stdout.split() == ["token", "False", "token"]


@pytest.mark.slow
def test_item9_embedded_ray_refuses_a_client_without_the_token(tmp_path):
    """Starts a real embedded Ray (in a subprocess, HOME in tmp_path) and joins it with a wrong token."""
    code = """
import json, os, subprocess, sys
import pbmarl as pb
try:
    pb.init_ray(num_cpus=1)
except RuntimeError as exc:
    print(json.dumps({"skip": str(exc)})); sys.exit(0)
import ray
gcs = ray.get_runtime_context().gcs_address
env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64,
       "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # the instance is on loopback: join it as a loopback node
r = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address={gcs!r}); print('JOINED')"],
                   capture_output=True, text=True, env=env, timeout=120)
print(json.dumps({"mode": os.environ["RAY_AUTH_MODE"], "joined": "JOINED" in r.stdout, "rc": r.returncode}))
ray.shutdown()
"""
    home = tmp_path / "home"
    home.mkdir()
    result = _python(code, {"HOME": str(home)}, timeout=400)
    data = json.loads(result.stdout.strip().splitlines()[-1])
    if "skip" in data:
        pytest.skip(f"Ray could not start on this loaded machine: {data['skip'][:200]}")
    assert data == {"mode": "token", "joined": False, "rc": data["rc"]} and data["rc"] != 0


def test_item10_startup_timeout_is_retried_then_explained(monkeypatch):
    from pbmarl.hosting import ray as hosting_ray
    from pbmarl.hosting import security as ray_security

    calls = []

    class FakeRay:
        def init(self, **kwargs):
            calls.append(kwargs)
            raise Exception("The current node timed out during startup. This could happen because ...")

        def shutdown(self):
            calls.append("shutdown")

    monkeypatch.setattr(ray_security, "prepare_embedded_auth", lambda: "token")
    with pytest.raises(RuntimeError, match="did not start .* twice.*ray start --head.*backend='local'"):
        hosting_ray._start_embedded(FakeRay(), 1, True)
    inits = [c for c in calls if c != "shutdown"]
    assert len(inits) == 2 and "_system_config" not in inits[0]
    assert inits[1]["_system_config"]["agent_register_timeout_ms"] > 10_000 and calls.count("shutdown") == 2


# -- items 11, 12, 13, 18: bad input that slipped through, README vs API ---------------------------
@pytest.mark.parametrize("make, message", [
    (lambda: pb.MetaSolver("rm", iterations=10**10), r"iterations must be an int in \[1, 10,000,000\]"),
    (lambda: pb.MetaSolver("prd", dt=float("nan")), "dt must be a finite number, got nan"),
    (lambda: pb.RolloutPool(pb.load_game("kuhn_poker"), backend="local").evaluate(
        [pb.RandomPolicy(pb.load_game("kuhn_poker"))] * 2, 10**12), "episodes must be at most"),
    (lambda: pb.PSRO("kuhn_poker", seed=1.7), "seed must be an int"),
    (lambda: pb.PSRO("kuhn_poker", seed=None), "got None"),
    (lambda: pb.PSRO("kuhn_poker", seed=-1), "got -1"),
    (lambda: pb.PSRO("kuhn_poker", seed="abc"), "got 'abc'"),
    (lambda: pb.PSRO("kuhn_poker", measure="no"), "measure must be None or True or False"),
    (lambda: pb.PSRO("kuhn_poker", learner="dqm"), "unknown learner 'dqm'"),
    (lambda: pb.PSRO("kuhn_poker", evaluator="sampled"), "unknown evaluator 'sampled'"),
    (lambda: pb.RolloutPool(pb.load_game("kuhn_poker"), worker_cpus=-1), "worker_cpus must be a number in"),
    (lambda: pb.RolloutPool(pb.load_game("kuhn_poker"), worker_cpus=float("nan")), "worker_cpus"),
    (lambda: pb.PayoffTable.from_array(np.array([[1.0, np.inf], [0.0, 0.0]])), "must be finite .* at index"),
    (lambda: pb.PayoffTable.from_array(np.array([[1 + 2j, 0], [0, 0]])), "complex payoffs"),
    (lambda: pb.load_game("goofspiel(num_cards=0)"), "has no actions"),
])
def test_items11_to_13_clear_errors(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_items12_13_more_refusals_and_names_that_build(tmp_path):
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        pb.MatrixGame([[1, -1], [-1, 1]], name=5)
    game = pb.load_game("kuhn_poker")
    pop = pb.Population(game)
    with pytest.raises(TypeError, match="blob=.*cannot be saved"):
        pop.add(0, pb.RandomPolicy(game), blob=object())
    assert pop.sizes == (0, 0)
    with pytest.raises(SystemExit):
        cli(["psro", "--game", "kuhn_poker", "--workers", "-3", "--out", str(tmp_path / "w")])
    run = pb.PSRO("kuhn_poker", evaluator="rollout", eval_episodes=50)
    assert isinstance(run.evaluator, pb.RolloutPool) and run.seed == 0
    run.step()
    assert run.records[-1].br_gain_stderr and all(s > 0 for s in run.records[-1].br_gain_stderr)


def test_item18_run_stops_at_convergence_like_the_cli_and_pettingzoo_extras_are_named():
    run = pb.PSRO("kuhn_poker", max_iterations=30)
    records = run.run(progress=False)
    assert run.converged and len(records) < 30 and records[-1].exploitability <= 1e-6
    import pbmarl.plots

    assert callable(pbmarl.plots.plot_exploitability)
    pytest.importorskip("pettingzoo")
    try:
        import pettingzoo.butterfly  # noqa: F401
        import pygame  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match=r"pip install 'pettingzoo\[butterfly\]'"):
            pb.load_game("pettingzoo:pistonball_v6")


# -- item 15: games the exact engine cannot walk, from the command line ------------------------------
def test_item15_pettingzoo_game_gets_a_sampled_evaluator_and_an_rl_oracle(tmp_path, capsys):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("torch")
    out = tmp_path / "rps"
    assert cli(["psro", "--game", "pettingzoo:rps_v2", "--iterations", "0", "--episodes", "20", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "oracle ppo, evaluator rollout" in lines[0] and "too large for the exact engine" in lines[0]
    assert "sampled: meta-game NashConv" in lines[-1] and "NashConv —" not in lines[-1]
    assert (out / "exploitability.png").stat().st_size > 1000
    data = json.loads((out / "run.json").read_text())
    state = json.loads((out / data["state"] / "state.json").read_text())
    assert state["evaluator"]["kind"] == "rollout" and state["learner"]["name"] == "ppo"


# -- item 19: the core without the extras --------------------------------------------------------------
LIGHT = """
import importlib.abc, pathlib, sys, tempfile
BLOCKED = ("ray", "torch", "pettingzoo", "mpe2", "ipywidgets", "IPython", "jupyter", "nbformat", "pygambit", "nashpy")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
import pbmarl as pb
run = pb.PSRO("kuhn_poker", solver="nash", max_iterations=10)
run.run(progress=False)
assert run.converged, run.records[-1]
from pbmarl.cli import main
out = pathlib.Path(tempfile.mkdtemp()) / "run"
assert main(["psro", "--game", "leduc_poker", "--iterations", "1", "--out", str(out), "--quiet"]) == 0
assert main(["resume", str(out), "--iterations", "1", "--quiet"]) == 0
assert main(["psro", "--game", "kuhn_poker", "--oracle", "dqn", "--out", str(out) + "2"]) == 2
print("LIGHT-OK", sorted(m for m in BLOCKED if m in sys.modules))
"""


def test_item19_core_runs_without_the_extras():
    """The light install (README: no Ray, torch, notebooks or PettingZoo), approximated honestly and cheaply:
    a fresh interpreter whose import system refuses every optional package (a meta-path finder raises
    ImportError for them, as if they were not installed) runs PSRO on Kuhn to convergence and the command
    line on Leduc, and an RL oracle is refused with the install hint. Not a separate venv: the core's own
    dependencies are the ones installed here (a venv would download them, minutes on every run)."""
    result = subprocess.run([sys.executable, "-c", LIGHT], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "LIGHT-OK []" in result.stdout
    assert "needs torch" in result.stderr and "pip install" in result.stderr


# -- item 17: plots ---------------------------------------------------------------------------------------
def test_item17_plots_mark_convergence_name_oracle_and_keep_labels_off_arrows(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import FancyArrowPatch

    from pbmarl.plots import plot_exploitability, plot_response_graph

    run = pb.PSRO("kuhn_poker")
    run.run(10, progress=False)
    fig = plot_exploitability(run.history)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "converged" in texts  # the 0 at the end is marked, not drawn as a measured 1e-12
    table = pb.PayoffTable.from_array(np.array([[0.0, -1, 1], [1, 0, -1], [-1, 1, 0]]))
    fig = plot_response_graph(table)
    ax = fig.axes[0]
    arrows = max((p.get_zorder() for p in ax.patches if isinstance(p, FancyArrowPatch)), default=0)
    for text in ax.texts:
        box = text.get_bbox_patch()
        assert box is not None and box.get_facecolor()[:3] == (1.0, 1.0, 1.0) and text.get_zorder() > arrows
        dx, dy = text.xyann
        assert dx != 0 and dy != 0  # diagonal: never on the row or column an arrow runs along
    out = tmp_path / "run"
    assert cli(["psro", "--game", "kuhn_poker", "--iterations", "2", "--out", str(out), "--quiet"]) == 0
    assert "oracle exact" in _describe_title(out)


def _describe_title(out):
    from pbmarl.cli.psro import describe

    return describe(pb.PSRO.load(out))


def test_item1_rl_learner_is_restored_too(monkeypatch):
    pytest.importorskip("torch")
    game = pb.load_game("kuhn_poker")
    learner = pb.DQN(game, seed=0, budget=64, steps_per_round=32, num_envs=8, hidden=(8,), learning_starts=0)
    run = pb.PSRO(game, learner=learner)
    rng, tasks, n_records = learner.rng.bit_generator.state, learner.tasks_done, len(learner.records)

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(learner, "_round", boom)  # interrupted mid-training: a task is open, networks built
    with pytest.raises(KeyboardInterrupt):
        run.step()
    assert learner.tasks_done == tasks and len(learner.records) == n_records and learner.task is None
    assert learner.rng.bit_generator.state == rng and run.population.sizes == (1, 1)



@pytest.mark.parametrize("name", ["PSRO-DQN", "XDO-DQN", "P2SRO", "League[dqn]"])
def test_item1_learner_rounds_inside_a_step_share_the_runs_snapshot(name, monkeypatch):
    """A run whose snapshot holds its learners' (PSRO, XDO, P2SRO, League) steps them without a snapshot of their
    own each round (each would copy the networks, Adam's moments and the replay); a round stepped outside the run
    takes its own again."""
    pytest.importorskip("torch")
    from run_cases import CASES

    run = CASES[name].build("kuhn_poker")
    learner = run.learners["main"] if name.startswith("League") else run.learner
    cls = type(learner)
    taken = []
    original = cls.snapshot
    monkeypatch.setattr(cls, "snapshot", lambda self: taken.append(self) or original(self))
    run.snapshot()
    held = len(taken)
    assert held >= 1
    rounds = len(learner.records)
    taken.clear()
    run.step()
    assert len(learner.records) > rounds + 1  # the learner trained several rounds in the step
    assert len(taken) == held  # and only the run's own snapshot copied it
    if learner.task is None:
        learner.start(0, [None, pb.RandomPolicy(learner.game)])
    taken.clear()
    learner.step()
    assert taken == [learner]
