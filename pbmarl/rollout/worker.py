"""`RolloutWorker`: runs work units with its own copy of the game and cached policies.

The same class runs in-process (the local backend holds one) and as a Ray actor
(the Ray backend wraps it). Policies reach a worker as shipments (`pbmarl.hosting.shipping`:
``(token, version, arrays, meta)``) and are rebuilt once per version; the local backend may
hand over the policy objects themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.hosting.shipping import Shipment, unship
from pbmarl.policies.base import Policy
from pbmarl.rollout.records import Seat
from pbmarl.rollout.runner import run_episodes
from pbmarl.rollout.units import UnitResult, WorkUnit


def game_for_worker(game: Game) -> Any:
    """What to send a worker so it can rebuild `game`: a JSON spec where one exists, else the game."""
    from pbmarl.games.matrix import MatrixGame
    from pbmarl.games.openspiel import OpenSpielGame
    from pbmarl.games.pettingzoo import PettingZooGame
    from pbmarl.games.registry import game_spec

    if isinstance(game, (MatrixGame, OpenSpielGame, PettingZooGame)):
        return game_spec(game)
    return game


class RolloutWorker:
    """Plays work units; see the module doc.

    Args:
        game: a `Game`, or a spec from `game_for_worker`.
        envs: game instances stepped together.
        engine: the runner's engine ("auto", "tree" or "states").
    """

    def __init__(self, game: Game | dict[str, Any], *, envs: int = 256, engine: str = "auto") -> None:
        if isinstance(game, dict):
            from pbmarl.games.registry import game_from_spec

            game = game_from_spec(game)
        self.game = game
        self.envs = int(envs)
        self.engine = engine
        self.policies: dict[str, Policy] = {}
        self.versions: dict[str, int] = {}
        self._tables: dict[Any, Any] = {}
        self._call = -1
        self._crash_after: int | None = None
        self._mappings: dict[Any, Any] = {}
        self._instances: list[Any] = []  # environment instances kept between multi-agent units
        self._batches: dict[tuple[str, int], Any] = {}  # batched environments by (route, copies), kept likewise
        self._routes: dict[str, str] = {}  # stepper asked for -> the route that steps this game

    # -- policies -------------------------------------------------------------
    def load(self, shipments: Sequence[Shipment], games: Mapping[str, Game] | None = None) -> None:
        """Rebuild shipped policies (replacing older versions of the same token).

        `games` names, per token, the game a group's policy was made for (`AgentMapping.group_game`).
        """
        for shipment in shipments:
            token = shipment[0]
            self.policies[token] = unship(shipment, (games or {}).get(token, self.game))
            self.versions[token] = int(shipment[1])

    def bind(self, token: str, policy: Policy) -> None:
        """Use `policy` itself for `token` (in-process workers)."""
        self.policies[token] = policy
        self.versions[token] = policy.version

    def forget(self, tokens: Sequence[str]) -> None:
        for token in tokens:
            self.policies.pop(token, None)
            self.versions.pop(token, None)

    # -- work -----------------------------------------------------------------
    def run(self, unit: WorkUnit, shipments: Sequence[Shipment] = ()) -> UnitResult:
        """Load `shipments` (if any), then play `unit`."""
        if unit.groups is not None:
            return self._run_groups(unit, shipments)
        if shipments:
            self.load(shipments)
        if unit.call != self._call:  # probability tables live for one pool call
            self._tables = {}
            self._call = unit.call
        seats = []
        for ref in unit.seats:
            missing = [t for t in ref.tokens if t not in self.policies]
            if missing:
                raise RuntimeError(f"worker has no policy for tokens {missing}; they were never shipped")
            seats.append(Seat(tuple(self.policies[t] for t in ref.tokens), np.asarray(ref.weights, dtype=float)))
        out = run_episodes(
            self.game, seats, unit.rng(), episodes=unit.episodes, learner=unit.learner,
            min_learner_steps=unit.min_learner_steps, num_envs=self.envs, engine=self.engine, tables=self._tables,
        )
        if self._crash_after is not None:
            self._crash_after -= 1
            if self._crash_after <= 0:
                os._exit(1)  # test hook: die like a lost node, without a goodbye
        return UnitResult(unit.key, out.returns, out.lengths, out.steps, out.trajectories, os.getpid())

    def _run_groups(self, unit: WorkUnit, shipments: Sequence[Shipment]) -> UnitResult:
        """A multi-agent unit: agents dispatched to their groups' policies by the unit's mapping."""
        from pbmarl.envs.batch import make_batch, resolve_stepper
        from pbmarl.rollout.batch_engine import run_batched
        from pbmarl.rollout.mapping import AgentMapping
        from pbmarl.rollout.parallel_engine import run_parallel

        ref = unit.groups
        assert ref is not None
        key = (ref.assignment, ref.agent_id, ref.pad)
        mapping = self._mappings.get(key)
        if mapping is None:
            mapping = self._mappings[key] = AgentMapping.from_spec(self.game, ref.mapping_spec())
        games = {t: mapping.group_game(g) for g, seat in ref.seats for t in seat.tokens}
        if shipments:
            self.load(shipments, games)
        seats = {}
        for group, seat in ref.seats:
            missing = [t for t in seat.tokens if t not in self.policies]
            if missing:
                raise RuntimeError(f"worker has no policy for tokens {missing}; they were never shipped")
            seats[group] = Seat(tuple(self.policies[t] for t in seat.tokens), np.asarray(seat.weights, dtype=float))
        route = self._routes.get(ref.stepper)
        if route is None:
            route = self._routes[ref.stepper] = resolve_stepper(self.game, ref.stepper)
        if route == "instances":
            out = run_parallel(self.game, mapping, seats, set(ref.learning), unit.rng(), num_envs=self.envs,
                               min_steps=unit.min_learner_steps, episodes=unit.episodes, instances=self._instances,
                               whole_episodes=ref.whole_episodes)
        else:
            wanted = unit.episodes if unit.episodes is not None else unit.min_learner_steps or 1
            n = int(max(1, min(self.envs, wanted)))
            batch = self._batches.get((route, n))
            if batch is None:
                batch = self._batches[(route, n)] = make_batch(self.game, route, n)
            out = run_batched(self.game, mapping, seats, set(ref.learning), unit.rng(), batch=batch,
                              min_steps=unit.min_learner_steps, episodes=unit.episodes, whole_episodes=ref.whole_episodes)
        return UnitResult(unit.key, out.returns, out.lengths, out.steps, None, os.getpid(), out.groups)

    def crash_after(self, units: int) -> None:
        """Test hook: end this worker's process abruptly after `units` more units."""
        self._crash_after = int(units)

    def ping(self) -> int:
        return os.getpid()
