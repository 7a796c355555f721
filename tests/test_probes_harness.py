"""benchmarks/probes.py, the hardening probes' harness: its bad-input classifier, its Ctrl-C slice (which
must find a step that is not all-or-nothing, and pass one that is), and one Ctrl-C trial on PSRO."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.runs import Record, Run, State, shared_row
from pbmarl.runs.transaction import all_or_nothing

HERE = Path(__file__).resolve()


def _load_probes() -> Any:
    spec = importlib.util.spec_from_file_location("probes", HERE.parent.parent / "benchmarks" / "probes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["probes"] = module
    spec.loader.exec_module(module)
    return module


probes = _load_probes()


def _raised(call: Any) -> BaseException:
    try:
        call()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no exception")


def test_classify_tells_clear_partial_unclear_and_silent() -> None:
    refused = _raised(lambda: pb.load_game("pettingzoo:simple_spread_v3", N=0))
    assert probes.classify(refused, probes.case_hints("pettingzoo:simple_spread_v3 N=0")) == "clear"
    assert probes.classify(refused, ["num_envs"]) == "partial"  # pbmarl's error, but not naming the option
    deep = _raised(lambda: np.zeros(3).max(axis=5))  # raised by numpy, not pbmarl
    assert probes.classify(deep, ["axis"]) == "unclear"
    assert probes.classify(KeyError("argv"), ["argv"]) == "unclear"
    assert probes.classify(None, ["N"]) == "silent"


def test_case_hints_take_the_option_and_a_value() -> None:
    assert probes.case_hints("pettingzoo:simple_spread_v3 N=0") == ["N"]
    assert probes.case_hints("MARL seed='x'") == ["seed"]
    assert probes.case_hints("noise.Normal(sigma=None)") == ["sigma", "None"]
    assert probes.case_hints("ApeX on Pendulum (Box)") == ["Box", "Discrete"]
    # an option is matched as a word: 'N' does not match inside 'Nash'
    assert not probes._names("Nash needs two players", "N") and probes._names("N must be an int", "N")


def test_probe_list_parses_every_row(tmp_path: Path) -> None:
    listing = tmp_path / "probes.md"
    listing.write_text("#### unclear (1)\n\n| entry point | case | reproduction | observed |\n|---|---|---|---|\n"
                       "| MARL | MARL seed=-1 | `marl(seed=-1)` | ValueError |\n\n#### silent (1)\n\n"
                       "| entry point | case | reproduction | observed |\n|---|---|---|---|\n"
                       "| load_game | g=nan | `pb.load_game(\"gym:Pendulum-v1\", g=NAN).name)` | a \\| b |\n")
    rows = probes.probe_rows(listing)
    assert [(r["section"], r["case"], r["call"]) for r in rows] == [
        ("unclear", "MARL seed=-1", "marl(seed=-1)"), ("silent", "g=nan", 'pb.load_game("gym:Pendulum-v1", g=NAN).name)')]
    assert probes._compile(rows[1]["call"]) is not None  # the stray closing parenthesis is dropped


@dataclass(frozen=True)
class _Tick(Record):
    iteration: int
    total: int

    def as_row(self) -> dict[str, Any]:
        return shared_row(iteration=self.iteration, env_steps=self.total, episodes=0, wall_time=0.0)


class _Unguarded(Run):
    """A toy run whose step changes it in two places: not all-or-nothing."""

    def __init__(self) -> None:
        self.records: list[_Tick] = []
        self.total = 0

    def step(self) -> _Tick:
        self.total += 1
        self.total += 1
        self.records.append(_Tick(len(self.records) + 1, self.total))
        return self.records[-1]

    def state(self) -> State:
        return State(data={"total": self.total, "n": len(self.records)})


class _Guarded(_Unguarded):
    def snapshot(self) -> Any:
        return self.total, list(self.records)

    def restore(self, saved: Any) -> None:
        self.total, self.records = saved[0], list(saved[1])

    @all_or_nothing
    def step(self) -> _Tick:
        return super().step()


@dataclass
class _Case:
    game: str
    build: Any


@pytest.mark.parametrize(("cls", "all_ok"), [(_Unguarded, False), (_Guarded, True)])
def test_ctrlc_slice_finds_a_step_that_is_not_all_or_nothing(cls: type, all_ok: bool) -> None:
    counts = probes.ctrlc_case(_Case("toy", lambda game: cls()), 6, np.random.default_rng(0), log=lambda _: None,
                               root=str(HERE))
    assert sum(counts.values()) == 6
    if all_ok:
        assert counts == {"ok": 6}
    else:
        assert counts["changed"] >= 1 and counts["changed"] + counts["ok"] == 6


def test_one_ctrl_c_trial_on_psro_kuhn() -> None:
    from run_cases import CASES

    counts = probes.ctrlc_case(CASES["PSRO"], 1, np.random.default_rng(0), log=lambda _: None)
    assert counts == {"ok": 1}


def test_saves_reads_the_last_committed_and_in_progress_save() -> None:
    lines = [(0.0, "saving 1"), (0.1, "saved 1 replaces 0"), (0.2, "saving 2")]
    assert probes._saves(lines) == (1, 2)
    assert probes._saves([]) == (None, None)


@pytest.mark.parametrize("marker", ["train.json", "marl.json"])
@pytest.mark.parametrize("content", ["{}", "[]", '{"argv": 3}'])
def test_resume_of_a_folder_whose_marker_lacks_the_command_says_so(tmp_path: Path, capsys: Any, marker: str,
                                                                   content: str) -> None:
    """The probe list's row "resume of train folder with empty train.json" (a KeyError traceback before)."""
    from pbmarl.cli import main

    (tmp_path / marker).write_text(content)
    assert main(["resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert marker in err and ("records none" in err or "must hold a JSON object" in err), err


def test_resume_of_a_marl_folder_never_writes_through_a_symlink(tmp_path: Path, capsys: Any) -> None:
    """The tamper probes: `pbmarl resume DIR` followed a symlinked DIR/run (loading, then saving, outside the
    folder) and wrote its history.csv through a symlink."""
    import shutil

    from pbmarl.cli import main

    out, outside = tmp_path / "marl", tmp_path / "outside"
    outside.mkdir()
    assert main(["marl", "--game", "pettingzoo:simple_spread_v3(N=2, max_cycles=10)", "--algo", "mappo", "--out", str(out),
                 "--steps", "100", "--num-envs", "2", "--steps-per-round", "50", "--eval-episodes", "1", "--quiet"]) == 0
    linked = tmp_path / "linked"
    shutil.copytree(out, linked)
    shutil.move(str(linked / "run"), str(outside / "run"))
    (linked / "run").symlink_to(outside / "run", target_is_directory=True)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in outside.rglob("*"))
    capsys.readouterr()
    assert main(["resume", str(linked), "--steps", "50", "--quiet"]) == 2
    assert "is a symlink; a run folder holds none" in capsys.readouterr().err
    (out / "history.csv").unlink()
    (outside / "history.csv").write_text("mine\n")
    (out / "history.csv").symlink_to(outside / "history.csv")
    assert main(["resume", str(out), "--steps", "50", "--quiet"]) == 0
    assert (outside / "history.csv").read_text() == "mine\n"
    assert not (out / "history.csv").is_symlink() and (out / "history.csv").read_text().startswith("iteration,")
    assert sorted((str(p), p.stat().st_mtime_ns) for p in outside.rglob("*") if p != outside / "history.csv") == before
