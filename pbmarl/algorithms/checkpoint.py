"""Saving and resuming a PSRO run folder.

Layout::

    run.json             what the run is and where it stands (written LAST, atomically)
    population/          one .npz per member + population.json (members are append-only)
    table-NNNN.npz       the payoff table after iteration NNNN (older ones removed)
    learner-NNNN/        the learner's state after iteration NNNN, when it has any
    history.csv          one row per iteration, for people and pandas

`run.json` names the iteration, the population sizes and the table file it belongs
to, so a process killed at any instant leaves a folder that resumes from its last
completed iteration: members written after it are ignored, older files are still there.
Nothing here unpickles: JSON, `.npz` with ``allow_pickle=False``, torch ``weights_only``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pbmarl.algorithms.driver_io import remove_stale
from pbmarl.algorithms.records import IterationRecord
from pbmarl.games.registry import game_from_spec, game_spec
from pbmarl.io import ensure_writable_folder, inside, read_json, remove_stray_tmp, write_atomic, write_json
from pbmarl.payoffs import PayoffTable
from pbmarl.population import Population
from pbmarl.protocols import Checkpointed, Specified

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.psro import PSRO

FORMAT = 1


def _solver_spec(solver: Any) -> dict[str, Any]:
    name = getattr(solver, "name", None)
    if not isinstance(name, str):
        raise ValueError(f"cannot save a run whose solver {solver!r} has no name; use pb.MetaSolver(name)")
    return {"name": name, "options": dict(getattr(solver, "options", {}) or {})}


def learner_spec(learner: Any) -> dict[str, Any]:
    if isinstance(learner, Specified):
        return dict(learner.spec())
    return {"name": getattr(learner, "name", type(learner).__name__)}


def _evaluator_spec(evaluator: Any) -> dict[str, Any]:
    if isinstance(evaluator, Specified):
        return dict(evaluator.spec())
    return {"kind": type(evaluator).__name__}


def save_run(run: PSRO, folder: Path) -> Path:
    """Write `run` into `folder`; see the module doc for the layout and the write order."""
    ensure_writable_folder(folder, what="run folder")
    remove_stray_tmp(folder)  # left by a process killed mid-write
    iteration = run.iteration
    run.population.save(folder / "population")
    table_file = f"table-{iteration:04d}.npz"
    run.table.save(folder / table_file)
    learner_dir = None
    if isinstance(run.learner, Checkpointed):
        learner_dir = f"learner-{iteration:04d}"
        run.learner.save(folder / learner_dir)
    history = run.history
    write_atomic(folder / "history.csv", lambda fh: history.to_csv(fh), "w")
    write_json(folder / "run.json", {
        "format": FORMAT,
        "kind": type(run).__name__,
        "game": game_spec(run.game),
        "solver": _solver_spec(run.solver),
        "learner": learner_spec(run.learner),
        "evaluator": _evaluator_spec(run.evaluator),
        "options": {"stop_exploitability": run.stop_exploitability, "max_iterations": run.max_iterations,
                    "eval_episodes": run.eval_episodes,
                    "measure": run.measure, "seed": run.seed},
        "iteration": iteration,
        "sizes": list(run.population.sizes),
        "table": table_file,
        "learner_state": learner_dir,
        "rng": run.rng.bit_generator.state,
        "wall_time": run._wall,
        "env_steps": run._env_steps,
        "records": [r.to_json() for r in run.records],
    })
    remove_stale(folder, ("table-*.npz", "learner-*"), keep=(table_file, learner_dir))
    return folder


def load_run(cls: type[PSRO], folder: Path, **overrides: Any) -> PSRO:
    """Rebuild a run from `folder` at its last completed iteration.

    `overrides` replace saved options (e.g. ``learner=``, ``evaluator=``, ``save_dir=``,
    ``stop_exploitability=``); a learner or evaluator that cannot be rebuilt from its
    saved spec must be passed here.
    """
    if not (folder / "run.json").exists():
        raise FileNotFoundError(f"{str(folder)!r} is not a pbmarl run folder (no run.json)")
    data = read_run_json(folder)
    game = overrides.pop("game", None) or game_from_spec(data["game"])
    if game.name != data["game"]["name"]:
        raise ValueError(f"run folder {str(folder)!r} is for game {data['game']['name']!r}, not {game.name!r}")
    from pbmarl.solvers import MetaSolver

    options = dict(data["options"])
    options.update({k: overrides.pop(k) for k in list(overrides) if k in options})
    solver = overrides.pop("solver", None) or MetaSolver(data["solver"]["name"], **data["solver"]["options"])
    learner = overrides.pop("learner", None) or rebuild_learner(game, data["learner"])
    evaluator = overrides.pop("evaluator", None) or _rebuild_evaluator(game, data["evaluator"])
    save_dir = overrides.pop("save_dir", folder)
    if overrides:
        raise TypeError(f"unknown overrides {sorted(overrides)}; accepted: game, solver, learner, evaluator, "
                        f"save_dir, {', '.join(sorted(options))}")
    if run_dir_is(save_dir, folder):
        remove_stray_tmp(folder)
    run = cls.__new__(cls)
    run._configure(game, solver, learner, evaluator, save_dir=save_dir, **options)
    if len(data["sizes"]) != game.num_players:
        raise ValueError(f"run.json in {str(folder)!r}: 'sizes' has {len(data['sizes'])} entries for a "
                         f"{game.num_players}-player game")
    run.population = Population.load(inside(folder, "population", entry="the population folder"), game,
                                     sizes=data["sizes"])
    run.table = PayoffTable.load(inside(folder, data["table"], entry="run.json 'table'"), run.population,
                                 sizes=data["sizes"])
    if data["learner_state"] is not None:
        state_dir = inside(folder, data["learner_state"], entry="run.json 'learner_state'")
        if not isinstance(run.learner, Checkpointed):
            raise ValueError(f"run.json in {str(folder)!r} has learner state but the learner {run.learner!r} "
                             "cannot load state")
        run.learner.load(state_dir)
    run.records = data["records"]
    run.rng = np.random.default_rng()
    try:
        run.rng.bit_generator.state = data["rng"]
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"run.json in {str(folder)!r}: 'rng' is not a {type(run.rng.bit_generator).__name__} "
                         f"state ({exc})") from None
    run._wall = float(data["wall_time"])
    run._env_steps = int(data["env_steps"])
    saved = run.records[-1].meta_strategy
    prime = getattr(run.solver, "prime", None)
    if callable(prime):  # warm-started solvers (n-player Nash) re-solve from the answer the run had
        prime(run.table, saved)
    run.meta_strategy = run.solver(run.table)
    for p, dist in enumerate(saved):
        if not np.allclose(run.meta_strategy[p], dist, atol=1e-9):
            raise ValueError(f"re-solving the saved table in {str(folder)!r} gave a different meta-strategy for "
                             f"player {p}: {np.round(run.meta_strategy[p], 6).tolist()} vs saved {list(dist)}")
    return run


def read_run_json(folder: Path) -> dict[str, Any]:
    """`run.json`, checked key by key: a malformed file is a ValueError naming the file and the key.

    Records are parsed (`IterationRecord`); options are checked later by the constructors.
    """
    where = f"run.json in {str(folder)!r}"
    data = read_json(folder / "run.json")
    if not isinstance(data, dict):
        raise ValueError(f"{where} must hold a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ValueError(f"run folder {str(folder)!r} has format {data.get('format')!r}; this pbmarl reads {FORMAT}")
    kinds: dict[str, tuple[type, ...]] = {
        "game": (dict,), "solver": (dict,), "learner": (dict,), "evaluator": (dict,), "options": (dict,),
        "iteration": (int,), "sizes": (list,), "table": (str,), "learner_state": (str, type(None)), "rng": (dict,),
        "wall_time": (int, float), "env_steps": (int,), "records": (list,)}
    for key, types in kinds.items():
        if key not in data:
            raise ValueError(f"{where} has no {key!r} entry")
        if not isinstance(data[key], types) or isinstance(data[key], bool):
            raise ValueError(f"{where}: {key!r} must be {' or '.join(t.__name__ for t in types)}, "
                             f"got {type(data[key]).__name__}")
    for key, inner in (("game", "name"), ("solver", "name"), ("solver", "options")):
        if inner not in data[key]:
            raise ValueError(f"{where}: {key!r} has no {inner!r} entry")
    if not isinstance(data["solver"]["options"], dict):
        raise ValueError(f"{where}: 'solver' 'options' must be an object")
    if not data["sizes"] or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10**6
                                    for n in data["sizes"]):
        raise ValueError(f"{where}: 'sizes' must be a list of positive ints, got {data['sizes']!r}")
    if not data["records"]:
        raise ValueError(f"{where}: 'records' is empty; a saved run has at least iteration 0")
    records = []
    for i, entry in enumerate(data["records"]):
        try:
            records.append(IterationRecord.from_json(entry))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{where}: records[{i}] is malformed ({type(exc).__name__}: {exc})") from None
    last = records[-1]
    if last.iteration != data["iteration"] or list(last.sizes) != data["sizes"]:
        raise ValueError(f"{where}: the last record (iteration {last.iteration}, sizes {list(last.sizes)}) does not "
                         f"match 'iteration' {data['iteration']} and 'sizes' {data['sizes']}")
    if data["env_steps"] < 0 or not np.isfinite(data["wall_time"]):
        raise ValueError(f"{where}: 'env_steps' and 'wall_time' must be non-negative and finite")
    return {**data, "records": records}


def run_dir_is(save_dir: Any, folder: Path) -> bool:
    """Whether the resumed run will write into `folder` itself (then its stray temporary files may go)."""
    return save_dir is not None and Path(save_dir).resolve() == folder.resolve()


def rebuild_learner(game: Any, spec: dict[str, Any]) -> Any:
    if spec.get("name") == "exact":
        from pbmarl.learners.exact import ExactBestResponse

        return ExactBestResponse(game)
    if spec.get("name") == "parallel":
        from pbmarl.algorithms.parallel_oracle import ParallelOracle

        return ParallelOracle.from_spec(game, spec)
    try:
        from pbmarl.learners import make_learner
    except ImportError:
        make_learner = None
    if make_learner is None:
        raise ValueError(f"cannot rebuild learner {spec!r}; pass learner= to PSRO.load")
    return make_learner(game, spec)


def _rebuild_evaluator(game: Any, spec: dict[str, Any]) -> Any:
    if spec.get("kind") in ("exact", "ExactEvaluator"):
        from pbmarl.evaluation import ExactEvaluator

        return ExactEvaluator(game)
    if spec.get("kind") == "rollout":
        from pbmarl.rollout import RolloutPool, init_ray

        if spec.get("backend") == "ray":
            init_ray()
        return RolloutPool(game, **{k: v for k, v in spec.items() if k != "kind"})
    raise ValueError(f"cannot rebuild evaluator {spec!r}; pass evaluator= to PSRO.load")
