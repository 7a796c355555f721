"""`MARL` run folders: ``run.json`` (game, mapping, learner configs, random state, history),
one ``learner-{i}.pt`` per learning group (networks, optimisers, replay, normalisers; torch
state dicts read back with ``weights_only=True``) and ``.npz`` files for fixed policies.
Every file is written atomically; nothing in the folder executes code when loaded.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pbmarl.algorithms.driver_io import load_policies, read_run_json, rng_from_state, rng_state, save_policies
from pbmarl.io import ensure_writable_folder, inside, write_atomic, write_json
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.marl import MARL
    from pbmarl.learners.group import GroupLearner


def learner_classes() -> dict[str, Any]:
    """Registry name -> (learner class, config class), for loading and the command line."""
    from pbmarl.learners.independent import Independent, IndependentConfig
    from pbmarl.learners.maddpg import MADDPG, MADDPGConfig
    from pbmarl.learners.mappo import IPPO, MAPPO, RMAPPO, MAPPOConfig
    from pbmarl.learners.qmix import IQL, QMIX, QMIXConfig, VDNLearner

    return {"mappo": (MAPPO, MAPPOConfig), "rmappo": (RMAPPO, MAPPOConfig), "ippo": (IPPO, MAPPOConfig), "qmix": (QMIX, QMIXConfig),
            "iql": (IQL, QMIXConfig), "vdn": (VDNLearner, QMIXConfig), "maddpg": (MADDPG, MADDPGConfig),
            "independent": (Independent, IndependentConfig)}


def make_group_learner(name: str, *, seed: int = 0, **options: Any) -> GroupLearner:
    """``"mappo"`` -> ``pb.MAPPO(seed=seed, **options)`` and so on; unknown names raise, listing the known."""
    known = learner_classes()
    if name not in known:
        raise ValueError(f"unknown multi-agent learner {name!r}; accepted are {sorted(known)}")
    cls, _ = known[name]
    learner: GroupLearner = cls(seed=seed, **options)
    return learner


def _config_from_json(config_cls: Any, data: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"saved config has unknown field(s) {unknown} for {config_cls.__name__}")
    return config_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def save_marl(run: MARL, folder: Path) -> Path:
    from pbmarl.games.registry import game_spec

    folder = ensure_writable_folder(folder, what="run folder")
    learners = []
    for i, (group, learner) in enumerate(run.learners.items()):
        file = f"learner-{i}.pt"
        state = learner.state_dict()

        def write(fh: Any, state: dict[str, Any] = state) -> None:
            torch.save(state, fh)

        write_atomic(folder / file, write)
        learners.append({"group": group, "file": file, "name": learner.name, "seed": learner.seed,
                         "config": {k: list(v) if isinstance(v, tuple) else v
                                    for k, v in dataclasses.asdict(learner.config).items()},
                         "rng": rng_state(learner.rng)})
    fixed = {}
    for i, (group, entry) in enumerate(run.fixed.items()):
        members, weights = ([entry], [1.0]) if isinstance(entry, Policy) else (list(entry.policies), list(entry.weights))
        fixed[group] = {"policies": save_policies(folder, f"fixed-{i}", members), "weights": [float(w) for w in weights]}
    write_json(folder / "run.json", {
        "kind": "marl", "game": game_spec(run.game), "mapping": run.mapping.spec(), "seed": run.seed,
        "num_envs": run.num_envs, "rng": rng_state(run.rng), "total_env_steps": run.total_env_steps,
        "learners": learners, "fixed": fixed, "records": [dataclasses.asdict(r) for r in run.records],
    })
    return folder


def load_marl(folder: Path) -> MARL:
    from pbmarl.algorithms.marl import MARL, MARLRecord
    from pbmarl.games.registry import game_from_spec
    from pbmarl.rollout.mapping import AgentMapping

    data = read_run_json(folder, "marl")
    game = game_from_spec(data["game"])
    mapping = AgentMapping.from_spec(game, data["mapping"])
    known = learner_classes()
    learners: dict[str, GroupLearner] = {}
    for entry in data["learners"]:
        if entry["name"] not in known:
            raise ValueError(f"run.json names learner {entry['name']!r}; known are {sorted(known)}")
        cls, config_cls = known[entry["name"]]
        learners[entry["group"]] = cls(_config_from_json(config_cls, entry["config"]), seed=int(entry["seed"]))
    fixed: dict[str, Policy | Mixture] = {}
    for group, entry in data["fixed"].items():
        members = load_policies(game, folder, entry["policies"])
        fixed[group] = members[0] if len(members) == 1 else Mixture(members, entry["weights"])
    run = MARL(game, learners, mapping, fixed=fixed, seed=int(data["seed"]), num_envs=int(data["num_envs"]))
    for entry in data["learners"]:
        learner = learners[entry["group"]]
        path = inside(folder, entry["file"], entry="run.json learner file")
        learner.load_state_dict(torch.load(path, weights_only=True))
        learner.rng = rng_from_state(entry["rng"])
    run.rng = rng_from_state(data["rng"])
    run.total_env_steps = int(data["total_env_steps"])
    run.records = [MARLRecord(**r) for r in data["records"]]
    return run
