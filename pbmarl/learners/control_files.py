"""Saving and loading a `ControlLearner`: one folder holds everything a resumed run needs.

``state.pt`` (networks, optimisers, the torch generator), ``buffer.npz`` (the replay buffer and any
arrays the algorithm keeps beside it) and ``learner.json`` (format, spec, numpy generator, counters,
records), each written atomically, ``learner.json`` last. `ControlLearner.save` and `.load` call these.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pbmarl.learners.critics import Critics, EnsembleMLP, stack_adam_state

if TYPE_CHECKING:
    from pbmarl.learners.control import ControlLearner

#: the save format `save_learner` writes; `load_learner` also reads format 1, whose twin critics were
#: separate networks
FORMAT = 2


def save_learner(learner: ControlLearner, folder: str | Path) -> Path:
    """Write `learner`'s whole state into `folder`; see the module doc."""
    from pbmarl.io import write_atomic, write_json, write_npz

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: m.state_dict() for name, m in learner._modules().items()}
    state["__generator__"] = {"state": learner.gen.get_state()}
    write_atomic(folder / "state.pt", lambda fh: torch.save(state, fh))
    write_npz(folder / "buffer.npz", {**learner.replay.state_arrays(),
                                      **{f"extra_{k}": v for k, v in learner._extra_arrays().items()}})
    write_json(folder / "learner.json", {
        "format": FORMAT, "spec": learner.spec(), "game": learner.game.name,
        "rng": learner.rng.bit_generator.state, "env_steps": learner.env_steps, "updates": learner.updates,
        "episodes": learner.episodes, "records": [dataclasses.asdict(r) for r in learner.records],
    })
    return folder


def load_learner(learner: ControlLearner, folder: str | Path) -> None:
    """Restore into `learner` (built with the same spec) what `save_learner` wrote into `folder`."""
    from pbmarl.io import read_json, read_npz

    folder = Path(folder)
    if not (folder / "learner.json").exists():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved learner (no learner.json)")
    data = read_json(folder / "learner.json")
    if data.get("format") not in (1, FORMAT) or data["spec"]["name"] != learner.name:
        raise ValueError(f"{str(folder)!r} holds a {data['spec'].get('name')!r} learner (format "
                         f"{data.get('format')!r}), not a {learner.name!r} one (format {FORMAT})")
    saved_hidden = tuple(data["spec"]["config"]["hidden"])
    if saved_hidden != learner.config.hidden:
        raise ValueError(f"{str(folder)!r} holds networks with hidden={saved_hidden}, "
                         f"but this learner has hidden={learner.config.hidden}")
    state = torch.load(folder / "state.pt", weights_only=True)
    modules = learner._modules()
    critics = modules.get("critics")
    if data["format"] == 1 and isinstance(critics, (Critics, EnsembleMLP)):
        # format 1 kept one network per critic: the modules stack their weights as they load (their load
        # hooks), and the critics' Adam moments are stacked here
        state = {**state, "critic_opt": stack_adam_state(state["critic_opt"], len(critics))}
    for name, module in modules.items():
        module.load_state_dict(state[name])
    learner.gen.set_state(state["__generator__"]["state"])
    arrays = read_npz(folder / "buffer.npz")
    learner.replay.load_state_arrays({k: v for k, v in arrays.items() if not k.startswith("extra_")})
    learner._load_extra_arrays({k[len("extra_"):]: v for k, v in arrays.items() if k.startswith("extra_")})
    learner.rng.bit_generator.state = data["rng"]
    learner.env_steps, learner.updates = int(data["env_steps"]), int(data["updates"])
    learner.episodes = int(data["episodes"])
    learner.records = [learner.record_class(**r) for r in data["records"]]
