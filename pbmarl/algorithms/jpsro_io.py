"""`JPSRO`'s run folder.

Layout (the same habits as PSRO's, `pbmarl.algorithms.checkpoint`)::

    run.json          options, the records, the table and pending files (written LAST, atomically)
    population/       the members (append-only; members after run.json's sizes are ignored)
    table-NNNN.npz    the payoff table after iteration NNNN
    pending-NNNN.npz  the best responses found by the last measurement, to add at the next step
    history.csv       one row per iteration, for people and pandas

The joint meta-distribution is solved again from the table on load and checked against
the saved marginals (the maximum-Gini solvers' answer is unique).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.algorithms.driver_io import check_overrides, read_run_json, remove_stale, write_history
from pbmarl.games.registry import game_from_spec, game_spec
from pbmarl.io import ensure_writable_folder, inside, read_npz, write_json, write_npz
from pbmarl.payoffs import PayoffTable
from pbmarl.population import Population

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.jpsro import JPSRO, JPSRORecord

FORMAT = 1


def save_jpsro(run: JPSRO, folder: Path) -> Path:
    ensure_writable_folder(folder, what="run folder")
    it = run.iteration
    run.population.save(folder / "population")
    table, pending = f"table-{it:04d}.npz", f"pending-{it:04d}.npz"
    run.table.save(folder / table)
    write_npz(folder / pending, {"players": np.array([p for p, _ in run._pending], dtype=np.int64),
                                 **{f"table_{i}": t for i, (_, t) in enumerate(run._pending)}})
    write_history(folder, run.history)
    write_json(folder / "run.json", {
        "format": FORMAT, "kind": "JPSRO", "game": game_spec(run.game),
        "solver": {"name": run.solver.name, "options": dict(run.solver.options)},
        "options": {"stop_gap": run.stop_gap, "max_iterations": run.max_iterations, "tie_tol": run.tie_tol},
        "iteration": it, "sizes": list(run.population.sizes), "table": table, "pending": pending,
        "wall_time": run._wall, "records": [r.to_json() for r in run.records],
        "marginals": [list(map(float, m)) for m in (run.meta_strategy or ())],
    })
    remove_stale(folder, ("table-*.npz", "pending-*.npz"), keep=(table, pending))
    return folder


def load_jpsro(cls: type[JPSRO], folder: Path, **overrides: Any) -> JPSRO:
    from pbmarl.algorithms.jpsro import JPSRORecord
    from pbmarl.solvers.metasolver import MetaSolver

    data = read_run_json(folder, "JPSRO", format=FORMAT)
    check_overrides(overrides, ("save_dir", "stop_gap", "max_iterations", "tie_tol"))
    run = cls.__new__(cls)
    solver = MetaSolver(data["solver"]["name"], **data["solver"]["options"])
    run._configure(game_from_spec(data["game"]), solver, **{**data["options"], "save_dir": folder, **overrides})
    run.population = Population.load(folder / "population", run.game, sizes=data["sizes"])
    run.table = PayoffTable.load(inside(folder, data["table"], entry="run.json 'table'"), run.population)
    pending = inside(folder, data["pending"], entry="run.json 'pending'")
    players = read_npz(pending, {"players": (None, "iu")})["players"]
    if players.ndim != 1 or not np.all((players >= 0) & (players < run.game.num_players)):
        raise ValueError(f"{str(pending)!r}: 'players' must list player indices 0..{run.game.num_players - 1}")
    shapes = {f"table_{i}": ((run.tree.infosets[p].size, run.game.num_actions), "f") for i, p in enumerate(players)}
    arrays = read_npz(pending, shapes)
    run._pending = [(int(p), arrays[f"table_{i}"]) for i, p in enumerate(players)]
    run.records = [_record(JPSRORecord, r) for r in data["records"]]
    run._wall = float(data["wall_time"])
    run.meta_strategy = run.solver(run.table)
    for p, saved in enumerate(data["marginals"]):
        if not np.allclose(run.meta_strategy[p], saved, atol=1e-6):
            raise ValueError(f"re-solving the saved table in {str(folder)!r} gave a different meta-strategy for "
                             f"player {p}: {np.round(run.meta_strategy[p], 6).tolist()} vs saved {saved}")
    return run


def _record(cls: type[JPSRORecord], data: dict[str, Any]) -> JPSRORecord:
    return cls(**{**data, "sizes": tuple(data["sizes"]), "gaps": tuple(data["gaps"]),
                  "new_ids": tuple(data["new_ids"])})
