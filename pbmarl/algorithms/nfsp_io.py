"""Saving and resuming an `NFSP` run: ``state-NNNN/`` (torch state dicts loaded with
``weights_only=True``, buffers as ``.npz``), then ``run.json`` last, atomically."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pbmarl.algorithms import driver_io as io
from pbmarl.games.registry import game_from_spec, game_spec
from pbmarl.io import ensure_writable_folder, read_npz, write_atomic, write_npz

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.nfsp import NFSP


def _save_state(path: Path, state: dict[str, Any]) -> None:
    write_atomic(path, lambda fh: torch.save(state, fh))


def save_nfsp(run: NFSP, folder: Path) -> Path:
    from pbmarl.algorithms.nfsp import _modules

    ensure_writable_folder(folder, what="run folder")
    state = f"state-{len(run.records):04d}"
    sdir = folder / state
    if sdir.exists():
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True)
    for name, module in _modules(run).items():
        _save_state(sdir / f"{name}.pt", module.state_dict())
    for p in range(run.game.num_players):
        write_npz(sdir / f"replay{p}.npz", run.replay[p].state_arrays())
        write_npz(sdir / f"reservoir{p}.npz", run.reservoir[p].state_arrays())
    io.write_run_json(folder, {
        "kind": "NFSP", "game": game_spec(run.game), "config": io.config_json(run.config), "seed": run.seed,
        "measure": run.measure, "state": state, "episodes": run.episodes, "decisions": run.decisions,
        "rl_updates": run.rl_updates, "rng": io.rng_state(run.rng), "wall_time": run._wall,
        "records": [r.__dict__ for r in run.records],
    })
    io.remove_stale(folder, ("state-*",), keep=(state,))
    return folder


def load_nfsp(cls: type[NFSP], folder: Path, *, save_dir: Any) -> NFSP:
    from pbmarl.algorithms.nfsp import NFSPConfig, NFSPRecord, _modules

    data = io.read_run_json(folder, "NFSP")
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data["config"].items()}
    config = NFSPConfig(**fields)
    run = cls(game_from_spec(data["game"]), config=config, seed=data["seed"], measure=data["measure"],
              save_dir=save_dir if save_dir is not None else folder)
    sdir = folder / data["state"]
    for name, module in _modules(run).items():
        module.load_state_dict(torch.load(sdir / f"{name}.pt", weights_only=True))
    for p in range(run.game.num_players):
        run.replay[p].load_state_arrays(read_npz(sdir / f"replay{p}.npz"))
        run.reservoir[p].load_state_arrays(read_npz(sdir / f"reservoir{p}.npz"))
    run.episodes, run.decisions, run.rl_updates = data["episodes"], list(data["decisions"]), list(data["rl_updates"])
    run.rng = io.rng_from_state(data["rng"])
    run._wall = float(data["wall_time"])
    run.records = [NFSPRecord(**r) for r in data["records"]]
    return run
