"""`ParallelOracle`: the best responses of a PSRO iteration trained side by side, one learner per player.

An RL oracle answers the players one after another, and its gradient updates keep one core busy
(``num_threads=1``: on networks this small a second torch thread buys nothing), so on a machine
with more cores than that a PSRO iteration leaves them idle. `ParallelOracle` keeps one copy of the
learner per player, built from the learner's spec and seeded ``seed + player``, each in its own Ray
actor; `PSRO` hands it every request of an iteration at once (``respond_all``, the `BatchOracle`
seam), so the players' best responses train at the same time. With ``backend="local"`` the same
copies answer in turn in this process: the same answers, record for record, without Ray.

The opponents reach an actor as tokens and weights (`pbmarl.hosting.shipping.TargetShipper`, as P2SRO's
levels get their targets): a policy travels once and stays while the opponents name it, so the growing population is
not sent again every iteration. Each copy warm-starts from its own previous best response, as a
single learner does per player.

Example:
    >>> oracle = pb.algorithms.ParallelOracle(pb.DQN(game, seed=0, budget=20_000))   # doctest: +SKIP
    >>> psro = pb.PSRO(game, learner=oracle, seed=0)                        # doctest: +SKIP
    >>> for record in psro.run(10): print(record)                          # doctest: +SKIP
    >>> oracle.close()                                                      # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd

from pbmarl.games.base import Game
from pbmarl.hosting.hosted import PLACEMENT_TIMEOUT_S, Hosted, check_actor_cpus
from pbmarl.hosting.shipping import Packed, Shipment, TargetShipper, unpack
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.protocols import BestResponse, Opponents, Oracle, Specified
from pbmarl.runs.transaction import covered, is_covered

#: where a copy's state lives inside the folder `ParallelOracle.save` writes
PLAYER_FOLDER = "player-{}"


class OracleWorker:
    """The body of one player's actor: a learner copy, the opponents' policies it holds, its last snapshot."""

    def __init__(self, game_spec: dict[str, Any], learner_spec: dict[str, Any]) -> None:
        from pbmarl.games.registry import game_from_spec
        from pbmarl.learners.common.registry import make_learner

        self.game = game_from_spec(game_spec)
        self.learner = make_learner(self.game, learner_spec)
        self.held: dict[str, Policy] = {}
        self.snapshots: dict[int, object] = {}

    def respond(self, player: int, shipments: list[Shipment], packed: list[Packed],
                seats: list[bool], snapshot_held: bool = False) -> BestResponse:
        """`snapshot_held`: the caller holds this actor's last snapshot and restores it on any error (the oracle
        is covered there), so the learner's rounds take no snapshot of their own."""
        mixtures = iter(unpack(self.held, self.game, shipments, packed))
        opponents = [next(mixtures) if present else None for present in seats]
        with covered(self.learner) if snapshot_held and self.snapshots else nullcontext():
            return self.learner.respond(player, opponents)

    def snapshot(self, token: int) -> None:
        self.snapshots = {token: self.learner.snapshot()}  # only the latest is ever restored

    def restore(self, token: int) -> None:
        if token not in self.snapshots:
            raise KeyError(f"the oracle actor holds no snapshot {token} (it holds {sorted(self.snapshots)})")
        self.learner.restore(self.snapshots[token])

    def save(self, folder: str) -> None:
        self.learner.save(folder)

    def load(self, folder: str) -> None:
        self.learner = _load_copy(self.learner, Path(folder))

    def records(self) -> pd.DataFrame:
        return self.learner.history


class ParallelOracle:
    """Every player's best response trained at the same time, by one copy of `learner` per player.

    Args:
        learner: the RL oracle to copy (e.g. ``pb.DQN(game, seed=0, budget=20_000)``), or its spec
            (``{"name": "dqn", "seed": 0, ...}``) with `game`. Each copy is built untrained from the
            spec, player p's seeded ``seed + p``.
        backend: ``"ray"``: each copy in its own Ray actor, all players' requests at once;
            ``"local"``: the copies answer in turn in this process (the same answers).
        num_cpus: CPUs each actor asks Ray for; below 1 lets more players than cores share them.
        game: the game, when `learner` is a spec.

    Raises:
        ValueError: an unknown backend, a non-positive or non-finite `num_cpus`, the exact oracle
            (deterministic and fast: nothing to gain), or a spec without a game.
        TypeError: `learner` is not an oracle with a spec.
    """

    def __init__(self, learner: Any, *, backend: str = "ray", num_cpus: float = 1.0, game: Game | None = None) -> None:
        if backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
        cpus = check_actor_cpus(num_cpus, "num_cpus", "player")
        if getattr(learner, "name", None) == "exact" or (isinstance(learner, Mapping) and learner.get("name") == "exact"):
            raise ValueError("the exact oracle is deterministic and fast: there is nothing to parallelise; "
                             "give ParallelOracle an RL learner (pb.DQN, pb.PPO, ...)")
        if isinstance(learner, Mapping):
            if game is None:
                raise ValueError("a learner spec needs the game: ParallelOracle(spec, game=game)")
            spec = dict(learner)
        elif isinstance(learner, Oracle) and isinstance(learner, Specified):
            game = getattr(learner, "game", game)
            spec = dict(learner.spec())
        else:
            raise TypeError(f"learner must be an RL oracle with spec() (pb.DQN, pb.PPO, ...) or a learner spec, "
                            f"got {type(learner).__name__}: {learner!r}")
        if not isinstance(game, Game):
            raise TypeError(f"game must be a pbmarl Game, got {type(game).__name__}: {game!r}")
        self.game, self.backend, self.num_cpus = game, backend, cpus
        self.learner_spec = spec
        seed = int(spec.get("seed", 0))
        self.copy_specs = [{**spec, "seed": seed + p} for p in range(game.num_players)]
        self._local: list[Any] = []
        self._actors: list[Hosted] = []
        self._shippers: list[TargetShipper] = []
        self._token = 0
        if backend == "local":
            from pbmarl.learners.common.registry import make_learner

            self._local = [make_learner(game, s) for s in self.copy_specs]
        else:
            self._start_actors()

    def _start_actors(self) -> None:
        from pbmarl.games.registry import game_spec

        where = game_spec(self.game)
        for p, spec in enumerate(self.copy_specs):
            self._actors.append(Hosted(
                OracleWorker, (where, spec), backend="ray", num_cpus=self.num_cpus, name=f"oracle of player {p}",
                placement_timeout_s=PLACEMENT_TIMEOUT_S, quiet=True,
                fix=f"Each player's copy needs num_cpus={self.num_cpus:g}; close other oracles (oracle.close()), "
                    f"lower num_cpus=, or use backend='local'."))
            self._shippers.append(TargetShipper())

    def _on_all(self, method: str, *args: Sequence[Any]) -> list[Any]:
        """``actor.method(*args)`` on every actor at once (argument i of actor p: ``args[i][p]``), waited for."""
        futures = [actor.send(method, *(a[p] for a in args)) for p, actor in enumerate(self._actors)]
        return [actor.get(future) for actor, future in zip(self._actors, futures)]

    # -- the Oracle and BatchOracle seams -----------------------------------------
    @property
    def name(self) -> str:
        """The copied learner's name (``"dqn"``): the origin recorded for the policies it makes."""
        return str(self.learner_spec.get("name", "learner"))

    def respond(self, player: int, opponents: Opponents) -> BestResponse:
        """Player `player`'s copy answers `opponents` (one request: nothing runs beside it)."""
        return self.respond_all([(player, opponents)])[0]

    def respond_all(self, requests: Sequence[tuple[int, Opponents]]) -> list[BestResponse]:
        """The answers to every ``(player, opponents)`` request, in order; each player's copy takes its
        requests in order, and different players' copies train at the same time (``backend="ray"``)."""
        requests = [(self.game.check_player(p), opps) for p, opps in requests]
        snapshot_held = is_covered(self)  # the caller's snapshot holds the copies': none of their own each round
        if self.backend == "local":
            with covered(*self._local) if snapshot_held else nullcontext():
                return [self._local[p].respond(p, opps) for p, opps in requests]
        self._check_open()
        refs = []
        try:
            for p, opps in requests:
                seats = [o is not None and s != p for s, o in enumerate(opps)]  # the own seat is ignored
                mixtures = [o if isinstance(o, Mixture) else Mixture([o]) for s, o in enumerate(opps)
                            if o is not None and s != p]
                shipments, packed = self._shippers[p].pack(mixtures)
                refs.append((self._actors[p], self._actors[p].send("respond", p, shipments, packed, seats,
                                                                      snapshot_held)))
            return [actor.get(ref) for actor, ref in refs]
        except BaseException:
            for shipper in self._shippers:  # a failed call may have left an actor without what was sent
                shipper.forget()
            raise

    def _check_open(self) -> None:
        if self.backend == "ray" and not self._actors:
            raise RuntimeError(f"{self!r} was closed: its actors are gone; build a new one, or load a saved one")

    # -- all-or-nothing (`Restorable`) -------------------------------------------------
    def snapshot(self) -> object:
        """What `restore` needs to undo every best response begun after this call."""
        if self.backend == "local":
            return [learner.snapshot() for learner in self._local]
        self._check_open()
        self._token += 1
        self._on_all("snapshot", [self._token] * len(self._actors))
        return self._token

    def restore(self, state: object) -> None:
        """Undo every best response begun since `snapshot()` returned `state` (the actors' last snapshot)."""
        if self.backend == "local":
            for learner, saved in zip(self._local, state):  # type: ignore[call-overload]
                learner.restore(saved)
            return
        self._on_all("restore", [state] * len(self._actors))

    # -- views and files ---------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        """What rebuilds an equal oracle (`from_spec`): the copied learner's spec, the backend, the CPUs."""
        return {"name": "parallel", "learner": dict(self.learner_spec), "backend": self.backend,
                "num_cpus": self.num_cpus}

    @classmethod
    def from_spec(cls, game: Game, spec: Mapping[str, Any]) -> ParallelOracle:
        """The oracle `spec()` describes, untrained (`load` then restores its state)."""
        try:
            return cls(dict(spec["learner"]), backend=spec.get("backend", "ray"),
                       num_cpus=spec.get("num_cpus", 1.0), game=game)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a parallel oracle spec needs a 'learner' spec, got {dict(spec)!r} ({exc})") from None

    @property
    def history(self) -> pd.DataFrame:
        """Every copy's learner records, with the player whose copy made them."""
        self._check_open()
        frames = ([learner.history for learner in self._local] if self.backend == "local"
                  else self._on_all("records"))
        return pd.concat([f.assign(player_copy=p) for p, f in enumerate(frames)], ignore_index=True)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Each copy's state into ``folder/player-P`` (the actors write it: on a cluster, a shared path)."""
        self._check_open()
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = [str(folder / PLAYER_FOLDER.format(p)) for p in range(self.game.num_players)]
        if self.backend == "local":
            for learner, path in zip(self._local, paths):
                learner.save(path)
        else:
            self._on_all("save", paths)
        return folder

    def load(self, folder: str | os.PathLike[str]) -> ParallelOracle:
        """Restore the state `save` wrote into the copies; returns self.

        Raises:
            ValueError: a player's folder is missing (nothing is loaded then).
        """
        self._check_open()
        folder = Path(folder)
        paths = [folder / PLAYER_FOLDER.format(p) for p in range(self.game.num_players)]
        missing = [str(p) for p in paths if not p.is_dir()]
        if missing:
            raise ValueError(f"{str(folder)!r} is not a parallel oracle's folder: {missing} missing")
        if self.backend == "local":
            self._local = [_load_copy(learner, path) for learner, path in zip(self._local, paths)]
        else:
            self._on_all("load", [str(path) for path in paths])
        return self

    def close(self) -> None:
        """End the actors (``backend="ray"``) so their CPUs are free; their state is lost unless saved."""
        for actor in self._actors:
            actor.close()
        self._actors, self._shippers = [], []

    def __repr__(self) -> str:
        return (f"ParallelOracle({self.name!r} x {self.game.num_players} on {self.game.name!r}, backend={self.backend!r}"
                f"{f', num_cpus={self.num_cpus:g}' if self.backend == 'ray' else ''})")


def _load_copy(learner: Any, folder: Path) -> Any:
    """A copy's saved state: a learner that is a run is loaded anew from its run folder (sharing the copy's pool)."""
    from pbmarl.learners.oracles.base import Learner
    from pbmarl.runs import load_run

    if isinstance(learner, Learner):
        return load_run(folder, pool=learner.pool)
    learner.load(folder)
    return learner


__all__ = ["OracleWorker", "ParallelOracle"]
