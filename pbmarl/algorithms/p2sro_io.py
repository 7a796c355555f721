"""The active levels of a `P2SRO` run folder: ``levels-NNNN/`` beside PSRO's files, plus
``p2sro.json``; both are written before PSRO's ``run.json``, which names the iteration."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pbmarl.algorithms import driver_io as io
from pbmarl.io import ensure_writable_folder, read_json, write_json

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.p2sro import P2SRO


def save_levels(run: P2SRO, folder: Path) -> None:
    ensure_writable_folder(folder, what="run folder")
    name = f"levels-{run.iteration:04d}"
    ldir = folder / name
    if ldir.exists():
        shutil.rmtree(ldir)
    ldir.mkdir(parents=True)
    levels = []
    for j, lv in enumerate(run.levels):
        main = getattr(lv, "learner", None) is run.learner  # saved with the run by PSRO.save
        saved = None if main else lv.save_learner(ldir / f"learner-{j}")
        levels.append({"index": lv.index, "policies": io.save_policies(ldir, f"level{j}", lv.policies),
                       "values": lv.values, "trained": lv.trained, "player": lv.player, "cycles": lv.cycles,
                       "learner": saved, "main_learner": main, "offset": j})
    write_json(folder / "p2sro.json", {"active": run.active, "refresh_every": run.refresh_every,
                                       "backend": run.backend, "level_cpus": run.level_cpus, "levels_dir": name, "levels": levels,
                                       "level_records": run.level_records})
    io.remove_stale(folder, ("levels-*",), keep=(name,))


def read_options(folder: Path) -> tuple[int, int, str, float]:
    """active, refresh_every, backend and level_cpus (1 in folders written before it existed)."""
    data = read_json(folder / "p2sro.json")
    return int(data["active"]), int(data["refresh_every"]), str(data["backend"]), float(data.get("level_cpus", 1.0))


def load_levels(run: P2SRO, folder: Path) -> None:
    data = read_json(folder / "p2sro.json")
    ldir = folder / data["levels_dir"]
    run.levels = []
    for entry in data["levels"]:
        learner = run.learner if entry["main_learner"] else io.learner_copy(run.learner, int(entry["offset"]))
        policies = io.load_policies(run.game, ldir, entry["policies"])
        level = run._level(int(entry["index"]), learner, policies)
        if not entry["main_learner"]:
            level.load_learner(ldir, entry["learner"])
        level.set_state({**entry, "policies": policies})
        run.levels.append(level)
    run.level_records = list(data["level_records"])
