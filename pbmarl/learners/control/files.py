"""A control learner's run folder: what `ControlLearner.state` writes and `ControlLearner.from_state` reads.

Networks and optimisers are ``<name>.pt``; the replay (``replay_*``), the exploration state
(``extra_*``), the torch generator and, with ``workers > 1``, the parameter server's rounds
(``rounds.*``: the jobs in flight and the workers' episodes, `pbmarl.learners.control.rounds.rounds_state`)
are arrays; counters, the numpy generator, the records and the rounds' other values are JSON.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.learners.control.base import ControlLearner
    from pbmarl.runs import SavedRun, State

__all__ = ["control_from_state", "control_state"]


def control_state(run: ControlLearner) -> State:
    """Everything the next round of `run` reads (see the module doc)."""
    from pbmarl.games.registry import game_spec
    from pbmarl.learners.control.rounds import split_state
    from pbmarl.runs import State

    arrays = {f"replay_{k}": v for k, v in run.replay.state_arrays().items()}
    extra = run._extra_arrays()
    arrays.update({f"extra_{k}": v for k, v in extra.items()})
    arrays["torch_generator"] = run.gen.get_state().numpy()
    rounds, rounds_arrays = split_state(run._rounds_state() or {})
    arrays.update({f"rounds.{k}": v for k, v in rounds_arrays.items()})
    data = {"env_steps": run.env_steps, "updates": run.updates, "episodes": run.episodes,
            "wall_time": run.wall_time, "responses": run.responses, "rng": run.rng.bit_generator.state,
            "extra": sorted(extra), "records": [dataclasses.asdict(r) for r in run.records], "rounds": rounds,
            "rounds_arrays": {k: v.dtype.kind for k, v in rounds_arrays.items()}}
    return State(data=data, arrays=arrays, modules={k: m.state_dict() for k, m in run._modules().items()},
                 config=run.config.to_dict(), seed=run.seed, game=game_spec(run.game))


def control_from_state(cls: type[ControlLearner], saved: SavedRun, overrides: dict[str, Any]) -> ControlLearner:
    """A fresh `cls` built from the saved config (with `overrides`), then filled with the saved state; a folder
    that does not fit is refused with a `RunFolderError` and nothing is built."""
    from pbmarl.learners.control.rounds import array_kinds
    from pbmarl.runs import RunFolderError

    game = overrides.pop("game", None)
    run = cls(game if game is not None else saved.game(), seed=saved.seed, **{**saved.config, **overrides})
    data = saved.data
    where = str(saved.state_dir)
    extra = data.get("extra", [])
    if not isinstance(extra, list) or not set(extra) <= set(run._extra_names()):
        raise RunFolderError(f"{where!r}: extra arrays {extra!r}; a {cls.__name__} with this "
                             f"config keeps some of {list(run._extra_names())}")
    try:
        kinds = array_kinds(data)
    except ValueError as exc:
        raise RunFolderError(f"{where!r}: {exc}") from None
    replay = {k: (None, "fiub") for k in run.replay.state_arrays()}
    arrays = saved.arrays({**{f"replay_{k}": s for k, s in replay.items()}, "torch_generator": (None, "u"),
                           **{f"extra_{k}": (None, "f") for k in extra},
                           **{f"rounds.{k}": (None, v) for k, v in kinds.items()}})
    try:
        for name, module in run._modules().items():
            module.load_state_dict(saved.module(name))
        run.replay.load_state_arrays({k: arrays[f"replay_{k}"] for k in replay})
        run._load_extra_arrays({k: arrays[f"extra_{k}"] for k in extra})
        run.gen.set_state(torch.from_numpy(arrays["torch_generator"].copy()))
        run.rng.bit_generator.state = data["rng"]
        run.env_steps, run.updates, run.episodes, run.responses = (
            int(data[k]) for k in ("env_steps", "updates", "episodes", "responses"))
        run.wall_time = float(data["wall_time"])
        run.records = [cls.record_class(**r) for r in data["records"]]
        rounds = data.get("rounds", {})
        if not isinstance(rounds, dict):
            raise TypeError(f"rounds must be a JSON object, got {type(rounds).__name__}")
        run._rounds_saved = {**rounds, **{k: arrays[f"rounds.{k}"] for k in kinds}} or None
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise RunFolderError(f"{where!r} does not fit a {cls.__name__} built from its config: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return run
