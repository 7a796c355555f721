"""The run folder module (pbmarl/runs/folder.py): one commit per save, and a folder is untrusted input."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.config import Config, build_config
from pbmarl.io import read_npz
from pbmarl.runs import Record, Run, RunFolderError, SavedRun, State, registry, shared_row
from pbmarl.runs import folder as folder_module


@dataclass(frozen=True)
class CountConfig(Config):
    width: int = 3


@dataclass(frozen=True)
class CountRecord(Record):
    iteration: int
    env_steps: int
    episodes: int
    wall_time: float
    total: float

    def as_row(self):
        return shared_row(iteration=self.iteration, env_steps=self.env_steps, episodes=self.episodes,
                          wall_time=self.wall_time, returns={0: self.total})


class Counter(Run):
    """A toy run: adds a random vector each step; saves arrays, JSON and a sub-folder."""

    def __init__(self, *, seed=0, config=None, **options):
        self.seed = seed
        self.config = build_config(CountConfig, config, options, owner="Counter")
        self.rng = np.random.default_rng(seed)
        self.values = np.zeros(self.config.width)
        self.records = []

    def step(self):
        self.values = self.values + self.rng.random(self.config.width)
        n = len(self.records) + 1
        self.records.append(CountRecord(n, 10 * n, n, 0.0, float(self.values.sum())))
        return self.records[-1]

    def state(self):
        def notes(path: Path) -> None:
            path.mkdir()
            (path / "note.txt").write_text("hello")

        return State(data={"rng": self.rng.bit_generator.state, "n": len(self.records)},
                     arrays={"values": self.values}, folders={"notes": notes},
                     config=self.config.to_dict(), seed=self.seed)

    @classmethod
    def from_state(cls, saved: SavedRun, **overrides):
        run = cls(seed=saved.seed, **saved.config)
        run.values = saved.arrays({"values": ((run.config.width,), "f")})["values"]
        run.rng.bit_generator.state = saved.data["rng"]
        for _ in range(saved.data["n"]):
            run.records.append(CountRecord(len(run.records) + 1, 0, 0, 0.0, 0.0))
        assert (saved.subfolder("notes") / "note.txt").read_text() == "hello"
        return run


@pytest.fixture(autouse=True)
def _registered(monkeypatch):
    monkeypatch.setitem(registry.RUN_TYPES, "Counter", __name__)


def _saved(tmp_path: Path, steps: int = 2) -> tuple[Counter, Path]:
    run = Counter(seed=1, width=4)
    run.run(steps, progress=False)
    return run, run.save(tmp_path / "run")


def test_save_and_load_run_round_trip_and_continue(tmp_path):
    run, path = _saved(tmp_path)
    meta = json.loads((path / "run.json").read_text())
    assert meta["type"] == "Counter" and meta["format"] == folder_module.FORMAT and meta["config"] == {"width": 4}
    assert meta["pbmarl"] == pb.__version__ and meta["state"] == "state-000001"
    loaded = pb.load_run(path)
    np.testing.assert_array_equal(loaded.values, run.values)
    assert loaded.step().total == run.step().total
    assert (path / "history.csv").read_text().splitlines()[0] == "iteration,env_steps,episodes,wall_time,return/0"


def test_each_save_is_a_fresh_state_folder_and_the_old_one_goes(tmp_path):
    run, path = _saved(tmp_path)
    run.step()
    run.save(path)
    assert sorted(p.name for p in path.iterdir()) == ["history.csv", "run.json", "state-000002"]


def test_a_save_killed_part_way_leaves_the_previous_save(tmp_path, monkeypatch):
    run, path = _saved(tmp_path)
    before = pb.load_run(path).values.copy()
    run.step()

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(folder_module, "write_npz", killed)
    with pytest.raises(KeyboardInterrupt):
        run.save(path)
    monkeypatch.undo()
    monkeypatch.setitem(registry.RUN_TYPES, "Counter", __name__)
    np.testing.assert_array_equal(pb.load_run(path).values, before)
    assert not [p for p in path.iterdir() if p.name.endswith(".tmp")]


def test_a_mixed_or_changed_save_is_refused_naming_the_file(tmp_path):
    _, path = _saved(tmp_path)
    arrays = path / "state-000001" / "arrays.npz"
    data = arrays.read_bytes()
    arrays.write_bytes(data[:-8] + b"\0" * 8)
    with pytest.raises(RunFolderError, match=r"arrays\.npz \(size or checksum differs"):
        pb.load_run(path)


@pytest.mark.parametrize("state", ["../elsewhere", "/tmp", "state-1", None, "state-000001/../x"])
def test_run_json_cannot_point_outside(tmp_path, state):
    _, path = _saved(tmp_path)
    meta = json.loads((path / "run.json").read_text())
    meta["state"] = state
    (path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunFolderError, match="'state' must name a state-NNNNNN folder"):
        pb.load_run(path)


def test_symlinks_are_refused(tmp_path):
    _, path = _saved(tmp_path)
    outside = tmp_path / "outside"
    (path / "state-000001").rename(outside)
    os.symlink(outside, path / "state-000001")
    with pytest.raises(RunFolderError, match="missing or a symlink"):
        pb.load_run(path)
    os.unlink(path / "state-000001")
    outside.rename(path / "state-000001")
    note = path / "state-000001" / "notes" / "note.txt"
    note.unlink()
    os.symlink(tmp_path / "secret", note)
    with pytest.raises(RunFolderError, match="is a symlink"):
        pb.load_run(path)


def test_arrays_are_bounded_before_anything_is_decompressed(tmp_path):
    _, path = _saved(tmp_path)
    bomb = path / "state-000001" / "arrays.npz"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(16):
            with z.open(f"extra{i}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (2**24,)})
                fh.write(b"\0" * 8 * 2**24)
    with pytest.raises(ValueError, match="would take"):
        read_npz(bomb)


@pytest.mark.parametrize("where", ["run.json", "state.json"])
def test_widths_changed_after_the_save_are_refused_before_any_network_is_built(tmp_path, monkeypatch, where):
    """Issue 48's probes: a saved config's ``hidden`` raised to [16384, 16384] in a folder of a few kB made SAC
    build networks of gigabytes (and NFSP's [60000, 60000] 14 GB) before any check; the folder is refused."""
    _, path = _saved(tmp_path)
    built = []
    monkeypatch.setattr(Counter, "from_state", classmethod(lambda cls, saved, **kw: built.append(saved)))
    state = path / "state-000001"

    def widths(hidden):
        if where == "run.json":
            meta = json.loads((path / "run.json").read_text())
            meta["config"]["hidden"] = hidden
            (path / "run.json").write_text(json.dumps(meta))
        else:  # a learner's config inside the state, as MARL keeps them; the manifest recomputed as a forger would
            data = json.loads((state / "state.json").read_text())
            data["learners"] = [{"group": "a", "config": {"rnn_hidden": 32, "hidden": hidden}}]
            (state / "state.json").write_text(json.dumps(data))
            manifest = json.loads((state / "manifest.json").read_text())
            manifest["files"]["state.json"] = [(state / "state.json").stat().st_size,
                                               folder_module._sha256(state / "state.json")]
            (state / "manifest.json").write_text(json.dumps(manifest))

    widths([16384, 16384])
    with pytest.raises(RunFolderError, match=rf"{'config' if where == 'run.json' else 'state.json'} 'hidden' is "
                                             r"\[16384, 16384\], layers whose weights alone take at least 0.50 GB, "
                                             r"but every file of the save together holds [\d,]+ bytes"):
        pb.load_run(path)
    assert not built
    widths([64, 64])  # widths a save of any size may name
    pb.load_run(path)
    assert len(built) == 1


def test_a_corrupt_torch_file_names_the_file(tmp_path):
    torch = pytest.importorskip("torch")

    class WithNet(Counter):
        def state(self):
            st = super().state()
            st.modules["net"] = torch.nn.Linear(2, 2).state_dict()
            return st

        @classmethod
        def from_state(cls, saved, **overrides):
            saved.module("net")
            return super().from_state(saved, **overrides)

    run = WithNet(seed=0)
    run.step()
    path = folder_module.save_run(run, tmp_path / "run")
    assert sorted(saved.name for saved in (path / "state-000001").iterdir()) == [
        "arrays.npz", "manifest.json", "net.pt", "notes", "state.json"]
    saved = folder_module.open_run(path)
    assert set(saved.module("net")) == {"weight", "bias"}
    (path / "state-000001" / "net.pt").write_bytes(b"not a torch file")
    with pytest.raises(RunFolderError, match=r"net\.pt"):
        folder_module.open_run(path)  # the manifest catches the change first
    manifest = json.loads((path / "state-000001" / "manifest.json").read_text())
    manifest["files"]["net.pt"] = [16, folder_module._sha256(path / "state-000001" / "net.pt")]
    (path / "state-000001" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunFolderError, match=r"cannot read .*net\.pt.* as a torch state dict"):
        folder_module.open_run(path).module("net")


def test_old_formats_unknown_types_and_other_types_are_refused(tmp_path):
    _, path = _saved(tmp_path)
    meta = json.loads((path / "run.json").read_text())
    (path / "run.json").write_text(json.dumps({**meta, "format": 1}))
    with pytest.raises(RunFolderError, match="format 1; .* reads format 2"):
        pb.load_run(path)
    (path / "run.json").write_text(json.dumps({**meta, "type": "Countr"}))
    with pytest.raises(ValueError, match="unknown run type 'Countr'; did you mean 'Counter'"):
        pb.load_run(path)
    (path / "run.json").write_text(json.dumps(meta))

    class Other(Run):
        pass

    with pytest.raises(RunFolderError, match="holds a Counter run, not a Other"):
        Other.load(path)
    with pytest.raises(RunFolderError, match="no run.json"):
        pb.load_run(tmp_path)


def test_stop_and_run_refuse_bad_input():
    run = Counter()
    with pytest.raises(ValueError, match="steps must be a non-negative int or None, got True"):
        run.run(True)
    with pytest.raises(TypeError, match="until must be a pb.Stop"):
        run.run(until={"iterations": 3})
    with pytest.raises(ValueError, match="no budget of its own"):
        run.run()
    with pytest.raises(ValueError, match=r"Stop\(seconds=...\) must be a non-negative number or None, got nan"):
        pb.Stop(seconds=float("nan"))
    with pytest.raises(ValueError, match="unknown stop condition 'iteration'; did you mean 'iterations'"):
        pb.Stop.from_dict({"iteration": 3})
    with pytest.raises(TypeError, match="unknown option 'widht' for Counter; did you mean 'width'"):
        Counter(widht=3)
    assert len(run.run(until=pb.Stop(mean_return=1.0), progress=False)) >= 1
