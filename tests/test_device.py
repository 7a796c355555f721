"""``device=`` on every run with torch networks (`pbmarl.config.check_device`, `DeviceOption`).

Checked on the CPU: ``device="cpu"`` builds, steps, saves and loads exactly as the default does; a device this
machine lacks ("cuda" here), an unknown one ("tpu") and a non-device (3) are refused at construction, naming the
value; the device is in ``config.to_dict()`` and in run.json; every parameter of a run's networks is on it; a folder
whose config names "cuda" is refused on this machine, naming the device and the override, and loads with
``device="cpu"``. Run types that run on the CPU only refuse another device (checked with the device check
patched to accept "cuda", as on a GPU machine).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from run_cases import CASES

import pbmarl as pb
from pbmarl.config import check_device
from pbmarl.learners.common import config as learner_config
from pbmarl.torchutil import on_cpu

SPREAD = "pettingzoo:simple_spread_v3(N=2, max_cycles=10)"
SPREAD_BOX = "pettingzoo:simple_spread_v3(N=2, max_cycles=5, continuous_actions=True)"
TIMING = ("wall_time", "time/")


def _marl(game: str, make: Callable[..., Any]) -> Callable[..., Any]:
    """A tiny `pb.MARL` whose one group learner is ``make(**options)`` (the device goes to the learner)."""
    def build(**options: Any) -> pb.MARL:
        g = pb.load_game(game)
        return pb.MARL(g, {"shared": make(**options)}, pb.AgentMapping.shared(g, agent_id=True), seed=0, num_envs=2)
    return build


def _case(name: str) -> Callable[..., Any]:
    case = CASES[name]
    return lambda **options: case.build(case.game, **options)


#: every run type with torch networks -> ``build(**options)``, tiny budgets (the contract's cases where they exist)
BUILDS: dict[str, Callable[..., Any]] = {
    **{name: _case(name) for name in ("DQN", "PPO", "A2C", "A3C", "IMPALA", "ApeX", "SAC", "TD3", "DDPG", "HDDPG",
                                      "Rainbow", "ApeXDDPG", "NFSP", "PPOSelfPlay", "DeepMMD")},
    "MAPPO": _marl(SPREAD, lambda **o: pb.MAPPO(seed=0, steps_per_round=40, epochs=2, hidden=(16,), **o)),
    "QMIX": _marl(SPREAD, lambda **o: pb.QMIX(seed=0, steps_per_round=40, hidden=(16,), batch_episodes=2,
                                              updates_per_round=2, target_update=2, **o)),
    "MADDPG": _marl(SPREAD_BOX, lambda **o: pb.MADDPG(seed=0, steps_per_round=20, hidden=(16,), batch_size=8,
                                                      learning_starts=10, updates_per_round=2, **o)),
    "Independent": _marl(SPREAD_BOX, lambda **o: pb.learners.Independent(
        algo="sac", seed=0, steps_per_round=20, hidden=(16,), batch_size=8, learning_starts=10, buffer_size=200, **o)),
}


def configs(run: Any) -> list[Any]:
    """The configs that carry the run's device: its own, or its group learners' (`pb.MARL`)."""
    if isinstance(run, pb.MARL):
        return [learner.config for learner in run.learners.values()]
    return [run.config]


def device_of_config(config: Any) -> str:
    return config.device if hasattr(config, "device") else config.options.get("device", "cpu")


def networks(obj: Any, depth: int = 4, seen: set[int] | None = None) -> list[torch.nn.Module]:
    """Every torch module reachable from `obj`'s attributes, lists and dicts (a few levels deep)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        return [obj]
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("pbmarl"):
        items = list(vars(obj).values())
    else:
        return []
    return [m for item in items for m in networks(item, depth - 1, seen)]


def fingerprint(run: Any) -> pd.DataFrame:
    h = run.history
    return h[[c for c in h.columns if not str(c).startswith(TIMING)]]


@pytest.fixture(params=sorted(BUILDS))
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_cpu_is_the_default_and_the_same_run(name: str, tmp_path: Path) -> None:
    build = BUILDS[name]
    default = build()
    on_cpu_run = build(device="cpu")
    try:
        for run in (default, on_cpu_run):
            for config in configs(run):
                assert device_of_config(config) == "cpu"
            run.run(2, progress=False)
        pd.testing.assert_frame_equal(fingerprint(default), fingerprint(on_cpu_run), check_dtype=False)
        modules = networks(on_cpu_run)
        assert modules, f"{name}: no torch module found on the run"
        device = torch.device(device_of_config(configs(on_cpu_run)[0]))
        assert all(p.device == device for m in modules for p in m.parameters())
        on_cpu_run.save(tmp_path / "run")
        loaded = pb.load_run(tmp_path / "run")
        try:
            default.step()
            loaded.step()
            pd.testing.assert_frame_equal(fingerprint(default), fingerprint(loaded), check_dtype=False)
        finally:
            loaded.close()
    finally:
        default.close()
        on_cpu_run.close()


@pytest.mark.parametrize("bad", ["cuda", "tpu", 3, "cuda:x", None])
def test_a_device_that_is_not_here_is_refused_at_construction(name: str, bad: Any) -> None:
    if bad == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="device") as info:
        BUILDS[name](device=bad)
    assert repr(bad) in str(info.value)
    if bad == "cuda":
        assert "torch.cuda.is_available() is False" in str(info.value) and "'cpu' is the default" in str(info.value)
    else:
        assert "'cpu', 'cuda', 'cuda:N' or 'mps'" in str(info.value)


def _saved_config_devices(folder: Path) -> list[str]:
    """The devices a run folder records: run.json's config, or each group learner's (a MARL's state.json)."""
    meta = json.loads((folder / "run.json").read_text())
    if meta["type"] != "MARL":
        return [meta["config"]["device"]]
    state = json.loads((folder / meta["state"] / "state.json").read_text())
    return [e["config"].get("device", e["config"].get("options", {}).get("device", "cpu")) for e in state["learners"]]


def _mark_saved_on(folder: Path, device: str) -> None:
    """Edit a run folder as if it had been saved by a run on `device` (the manifest made to match)."""
    meta_path = folder / "run.json"
    meta = json.loads(meta_path.read_text())
    if meta["type"] != "MARL":
        meta["config"]["device"] = device
        meta_path.write_text(json.dumps(meta))
        return
    state_dir = folder / meta["state"]
    state = json.loads((state_dir / "state.json").read_text())
    for entry in state["learners"]:
        if "device" in entry["config"]:
            entry["config"]["device"] = device
        else:
            entry["config"]["options"] = {**entry["config"]["options"], "device": device}
    (state_dir / "state.json").write_text(json.dumps(state))
    manifest = json.loads((state_dir / "manifest.json").read_text())
    data = (state_dir / "state.json").read_bytes()
    manifest["files"]["state.json"] = [len(data), hashlib.sha256(data).hexdigest()]
    (state_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("kind", ["PPO", "SAC", "NFSP", "PPOSelfPlay", "MAPPO", "Independent"])
def test_a_folder_saved_on_cuda_is_refused_here_and_loads_with_device_cpu(kind: str, tmp_path: Path) -> None:
    run = BUILDS[kind]()
    try:
        run.run(2, progress=False)
        folder = run.save(tmp_path / "run")
        assert _saved_config_devices(folder) == ["cpu"] * len(configs(run))
        _mark_saved_on(folder, "cuda")
        with pytest.raises(ValueError, match=r"device='cuda' is not available on this machine") as info:
            pb.load_run(folder)
        assert "load(path, device='cpu')" in str(info.value)
        loaded = pb.load_run(folder, device="cpu")
        try:
            assert [device_of_config(c) for c in configs(loaded)] == ["cpu"] * len(configs(run))
            run.step()
            loaded.step()
            pd.testing.assert_frame_equal(fingerprint(run), fingerprint(loaded), check_dtype=False)
        finally:
            loaded.close()
    finally:
        run.close()


#: the run types that honour ``device=``, and those that run on the CPU only (with why, in part)
HONOURED = ("DQN", "PPO", "A2C", "MAPPO", "NFSP", "PPOSelfPlay", "DeepMMD")
CPU_ONLY = {"A3C": "workers > 1", "IMPALA": "actors", "ApeX": "actors", "SAC": "CPU torch generator",
            "TD3": "CPU torch generator", "DDPG": "CPU torch generator", "HDDPG": "CPU torch generator",
            "Rainbow": "CPU torch generator", "ApeXDDPG": "CPU torch generator", "QMIX": "not placed",
            "MADDPG": "not placed", "Independent": "control learner"}


@pytest.fixture
def cuda_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device check as on a machine with CUDA: "cuda" accepted (nothing is built on it)."""
    monkeypatch.setattr(learner_config, "check_device", lambda v, name="device": v if v == "cuda" else check_device(v))
    monkeypatch.setattr("pbmarl.learners.multiagent.independent.check_device",
                        lambda v, name="device": v if v == "cuda" else check_device(v))


def test_every_torch_run_type_is_either_honoured_or_refused() -> None:
    assert sorted(HONOURED + tuple(CPU_ONLY)) == sorted(BUILDS)


@pytest.mark.parametrize("kind", sorted(CPU_ONLY))
def test_a_cpu_only_run_refuses_another_device(kind: str, cuda_accepted: None) -> None:
    with pytest.raises(ValueError, match="runs on the CPU only, got device='cuda'") as info:
        BUILDS[kind](device="cuda")
    assert CPU_ONLY[kind] in str(info.value) and "device='cpu'" in str(info.value)


@pytest.mark.parametrize("kind", ["DQN", "PPO", "A2C"])
def test_a_device_run_records_the_device(kind: str, cuda_accepted: None) -> None:
    """With "cuda" accepted the config is built and records it (these learners build networks on their first step)."""
    run = BUILDS[kind](device="cuda")
    try:
        assert run.config.device == "cuda" and run.config.to_dict()["device"] == "cuda" and run.device == "cuda"
    finally:
        run.close()


def test_recurrent_mappo_and_parallel_learners_refuse_another_device(cuda_accepted: None) -> None:
    with pytest.raises(ValueError, match=r"recurrent=True"):
        pb.MAPPO(recurrent=True, device="cuda")
    with pytest.raises(ValueError, match=r"workers > 1"):
        pb.MAPPO(workers=2, device="cuda")
    with pytest.raises(ValueError, match=r"workers > 1"):
        pb.PPO("gym:CartPole-v1", workers=2, device="cuda")
    assert pb.MAPPO(device="cuda").config.device == "cuda"


def test_the_device_rule() -> None:
    assert check_device("cpu") == "cpu"
    assert check_device(torch.device("cpu")) == "cpu"
    assert check_device("cpu:0") == check_device(torch.device("cpu", 0)) == "cpu"
    for bad in ("CPU", "cpu:1", "mps:0", "cuda:", " cuda", 0, 1.5, b"cpu", ["cpu"]):
        with pytest.raises(ValueError, match=r"device must be 'cpu', 'cuda', 'cuda:N' or 'mps'") as info:
            check_device(bad)
        assert repr(bad) in str(info.value)
    with pytest.raises(ValueError, match=r"^dev must be"):
        check_device("tpu", name="dev")


def test_device_is_in_every_config_and_in_run_json(tmp_path: Path) -> None:
    for kind in ("PPO", "SAC", "NFSP", "DeepMMD"):
        run = BUILDS[kind]()
        try:
            assert run.config.to_dict()["device"] == "cpu"
            run.step()
            assert _saved_config_devices(run.save(tmp_path / kind)) == ["cpu"]
        finally:
            run.close()
    for kind in ("MAPPO", "QMIX", "MADDPG"):
        run = BUILDS[kind]()
        learner = next(iter(run.learners.values()))
        assert learner.config.to_dict()["device"] == "cpu" and learner.spec()["config"]["device"] == "cpu"


def test_state_dicts_are_written_from_cpu_tensors() -> None:
    state = {"w": torch.ones(2), "opt": {"state": {0: {"step": torch.tensor(3.0)}}, "groups": [{"lr": 0.1}]},
             "t": (torch.zeros(1), 2)}
    out = on_cpu(state)
    assert out["w"] is state["w"] and out["opt"]["groups"] == [{"lr": 0.1}] and out["t"][1] == 2
    meta = torch.ones(2, device="meta")  # a tensor off the CPU: copied to it
    with pytest.raises(NotImplementedError):  # meta tensors hold no data; .cpu() is what is called
        on_cpu({"m": meta})
