"""The parts a PSRO-family run is built from: its meta-solver, oracle and evaluator.

Each part is given as an object, built from a name (``"nash"``, ``"dqn"``, ``"rollout"``), or
rebuilt from the spec a run folder saved (`part_specs` / `rebuild_learner` / `rebuild_evaluator`).
The exact oracle and evaluator are the defaults where the game's tree fits in memory; elsewhere
the error says which part to pass instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pbmarl.games.base import Game
from pbmarl.protocols import Checkpointed, Evaluator, MetaSolverLike, Oracle, Specified

__all__ = ["evaluator_spec", "exact_capable", "exact_refusal", "learner_reader", "learner_copy", "learner_spec", "learner_writer",
           "make_evaluator", "make_factory", "make_oracle", "make_solver", "rebuild_evaluator", "rebuild_learner", "rebuild_solver",
           "solver_name", "solver_spec"]


def make_solver(solver: str | MetaSolverLike) -> MetaSolverLike:
    """A `MetaSolver` by name, or `solver` itself when it is one (any callable table -> meta-strategy)."""
    if isinstance(solver, str):
        from pbmarl.solvers import MetaSolver

        return MetaSolver(solver)
    if not callable(solver):
        raise TypeError(f"solver must be a solver name or a MetaSolver, got {solver!r}")
    return solver


def solver_name(solver: MetaSolverLike) -> str:
    """The solver's name (a `MetaSolver`'s), else its class name."""
    name = getattr(solver, "name", None)
    return name if isinstance(name, str) else type(solver).__name__


def exact_capable(game: Game) -> bool:
    """Whether the exact engine (best responses, evaluation, NashConv) can take `game`."""
    return exact_refusal(game) is None


def exact_refusal(game: Game) -> str | None:
    """Why the exact engine cannot take `game` (the tree builder's own message), or None."""
    try:
        game.tree()
    except ValueError as exc:
        return str(exc)
    return None


def make_oracle(game: Game, learner: Oracle | str | None, evaluator: Evaluator, seed: int) -> Oracle:
    """The oracle: the one given, one built by name (``"exact"``, ``"dqn"``, ``"ppo"``, ``"a2c"``), or the default."""
    if learner is None or learner == "exact":
        return _default_learner(game, evaluator)
    if isinstance(learner, str):
        from pbmarl.learners.common.registry import LEARNERS, make_learner

        if learner not in LEARNERS:
            raise ValueError(f"unknown learner {learner!r}; pass one of {', '.join(map(repr, LEARNERS))} "
                             "or an object with respond(player, opponents) (a pbmarl.protocols.Oracle)")
        built = make_learner(game, {"name": learner, "seed": seed})
        assert isinstance(built, Oracle)
        return built
    if not isinstance(learner, Oracle):
        raise TypeError(f"learner must be a learner name or an Oracle (with name and respond(player, opponents)), "
                        f"got {type(learner).__name__}: {learner!r}")
    return learner


def make_evaluator(game: Game, evaluator: Evaluator | str | None, seed: int) -> Evaluator:
    """The evaluator: the one given, one built by name (``"exact"``, ``"rollout"``: a local `RolloutPool`), or the default."""
    if evaluator is None or evaluator == "exact":
        return _default_evaluator(game)
    if evaluator == "rollout":
        from pbmarl.rollout import RolloutPool

        return RolloutPool(game, seed=seed)
    if isinstance(evaluator, str):
        raise ValueError(f"unknown evaluator {evaluator!r}; pass 'exact', 'rollout' or an object with "
                         "fill(table, episodes, *, seed) (a pbmarl.protocols.Evaluator)")
    if not isinstance(evaluator, Evaluator):
        raise TypeError(f"evaluator must be 'exact', 'rollout' or an Evaluator (with fill(table, episodes, *, seed)), "
                        f"got {type(evaluator).__name__}: {evaluator!r}")
    return evaluator


def _default_learner(game: Game, evaluator: Evaluator) -> Oracle:
    refusal = exact_refusal(game)
    if refusal is not None:
        raise ValueError(
            f"the exact best-response oracle cannot take {game.name!r} ({refusal}); "
            "pass learner=pb.DQN(game) or pb.PPO(game) (command line: --oracle dqn or ppo)"
        )
    from pbmarl.evaluation import ExactEvaluator
    from pbmarl.learners.oracles.exact import ExactBestResponse

    # sharing the evaluator shares its cache of realisation plans with the oracle
    return ExactBestResponse(game, evaluator=evaluator if isinstance(evaluator, ExactEvaluator) else None)


def _default_evaluator(game: Game) -> Evaluator:
    refusal = exact_refusal(game)
    if refusal is not None:
        raise ValueError(
            f"the exact evaluator cannot take {game.name!r} ({refusal}); "
            "pass evaluator=pb.RolloutPool(game) to sample payoffs (command line: --evaluator rollout)"
        )
    from pbmarl.evaluation import ExactEvaluator

    return ExactEvaluator(game)


# -- copies: one learner per level or league agent, each with its own random stream ---------------
def learner_copy(learner: Any, offset: int) -> Any:
    """A learner like `learner` with its own random stream: an RL `Learner` is rebuilt from its
    config with ``seed + offset`` (sharing its pool); a stateless oracle (exact BR) is shared."""
    from pbmarl.learners.oracles.base import Learner

    if isinstance(learner, Learner):
        return type(learner)(learner.game, config=learner.config, seed=learner.seed + offset, pool=learner.pool)
    return learner


def make_factory(learner: Any) -> Callable[[int], Any]:
    """``offset -> learner``: `learner` itself if it is a callable factory, else copies of it."""
    if isinstance(learner, Oracle):
        return lambda offset: learner_copy(learner, offset)
    if callable(learner):
        return learner
    raise TypeError(f"learner must be an Oracle (with respond(player, opponents)) or a factory offset -> Oracle, "
                    f"got {type(learner).__name__}: {learner!r}")


# -- specs: what a run folder says about its parts --------------------------------------------
def solver_spec(solver: Any) -> dict[str, Any]:
    """``{"name", "options"}`` of a `MetaSolver`; a solver without a name cannot be saved."""
    name = getattr(solver, "name", None)
    if not isinstance(name, str):
        raise ValueError(f"cannot save a run whose solver {solver!r} has no name; use pb.MetaSolver(name)")
    return {"name": name, "options": dict(getattr(solver, "options", {}) or {})}


def learner_spec(learner: Any) -> dict[str, Any]:
    """The oracle's spec (its `spec()`), else its name."""
    if isinstance(learner, Specified):
        return dict(learner.spec())
    return {"name": getattr(learner, "name", type(learner).__name__)}


def evaluator_spec(evaluator: Any) -> dict[str, Any]:
    """The evaluator's spec (its `spec()`), else its class name."""
    if isinstance(evaluator, Specified):
        return dict(evaluator.spec())
    return {"kind": type(evaluator).__name__}


def rebuild_solver(spec: Any) -> MetaSolverLike:
    """The `MetaSolver` a saved `solver_spec` describes."""
    from pbmarl.solvers import MetaSolver

    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) \
            or not isinstance(spec.get("options", {}), Mapping):
        raise ValueError(f"a saved solver must be {{'name': str, 'options': {{...}}}}, got {spec!r}")
    return MetaSolver(spec["name"], **dict(spec.get("options", {})))


def rebuild_learner(game: Game, spec: Any) -> Oracle:
    """The oracle a saved `learner_spec` describes, untrained (its saved state is loaded after)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"a saved learner must be a spec object, got {spec!r}")
    if spec.get("name") == "exact":
        from pbmarl.learners.oracles.exact import ExactBestResponse

        return ExactBestResponse(game)
    if spec.get("name") == "parallel":
        from pbmarl.algorithms.psro.parallel_oracle import ParallelOracle

        return ParallelOracle.from_spec(game, spec)
    try:
        from pbmarl.learners import make_learner
    except ImportError:
        raise ValueError(f"cannot rebuild learner {dict(spec)!r} without torch; pass learner= to load it") from None
    built = make_learner(game, dict(spec))
    assert isinstance(built, Oracle)
    return built


def rebuild_evaluator(game: Game, spec: Any) -> Evaluator:
    """The evaluator a saved `evaluator_spec` describes."""
    kind = spec.get("kind") if isinstance(spec, Mapping) else None
    if kind in ("exact", "ExactEvaluator"):
        from pbmarl.evaluation import ExactEvaluator

        return ExactEvaluator(game)
    if kind == "rollout":
        from pbmarl.rollout import RolloutPool

        return RolloutPool(game, **{k: v for k, v in spec.items() if k != "kind"})
    raise ValueError(f"cannot rebuild evaluator {spec!r}; pass evaluator= to load it")


# -- the learner's own state in a run folder ---------------------------------------------------
def learner_writer(learner: Any) -> tuple[str, Callable[[Path], Any]] | None:
    """How a run folder keeps `learner`'s state: ``("run", write)`` for a learner that is a run (its own
    run folder, read back with `pb.load_run`), ``("folder", write)`` for an oracle with ``save`` / ``load``
    of a folder (a `ParallelOracle`), None for one without state (the exact oracle)."""
    from pbmarl.runs import Run

    if isinstance(learner, Run):
        return "run", learner.save
    if isinstance(learner, Checkpointed):
        return "folder", learner.save
    return None


def learner_reader(kind: Any, folder: Path, learner: Any) -> Any:
    """The learner a folder that `learner_writer` wrote holds: a run is loaded (a new object), an oracle's
    folder is read into `learner` (which is returned)."""
    from pbmarl.runs import RunFolderError, load_run

    if kind == "run":
        return load_run(folder)
    if kind == "folder" and isinstance(learner, Checkpointed):
        learner.load(folder)
        return learner
    raise RunFolderError(f"{str(folder)!r} holds learner state ({kind!r}) that the learner {learner!r} cannot load")


def oracle_episodes(learner: Any) -> int:
    """Episodes a learner that is a run has played so far (its records' cumulative ``episodes``); 0 for others."""
    from pbmarl.runs import Run

    if isinstance(learner, Run) and learner.records:
        return int(learner.records[-1].episodes)
    return 0
