"""P2SRO's Ray backend: every active level is a learner actor, advancing at the same time.

`RemoteLevel` has the interface of `Level` that `P2SRO` uses, and mirrors the actor's state
(policies, values, progress) after every call, so the driver (the single writer of the
payoff table: claiming and freezing stay atomic) reads it without a round trip. The actor
rebuilds the game and the learner from their specs, so nothing but specs, policies and
numbers travel. A level's targets reach its actor as tokens and weights (`TargetShipper`, the
rollout workers' shipping): each policy travels once, as arrays and meta, and stays there while
the targets name it, so the fixed population is not sent again every refresh period. Ray is imported through `pbmarl.rollout.ray_backend`,
lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.rollout.worker import PolicyTokens, Shipment, ship, unship

#: seconds to wait for a level actor to be placed before saying why it is not
SCHEDULE_TIMEOUT_S = 60


#: a target mixture as it travels: the members' tokens and the weights
Packed = tuple[list[str], np.ndarray]


class TargetShipper:
    """The driver's side of a level's targets: the rollout workers' shipping (`PolicyTokens`, `ship`) for one actor.

    `pack` turns the targets into tokens and weights and ships only the policies the actor does not hold
    at their current version; both sides then drop every policy the targets no longer name. After a
    failed call, `forget` makes the next `pack` ship every policy again.
    """

    def __init__(self) -> None:
        self.token = PolicyTokens()
        self.sent: dict[str, int] = {}  # token -> version the actor holds

    def pack(self, targets: Sequence[Mixture]) -> tuple[list[Shipment], list[Packed]]:
        """``(shipments, packed)``: the policies to send, and every target as tokens and weights."""
        policies: dict[str, Policy] = {}
        packed: list[Packed] = []
        for mixture in targets:
            tokens = [self.token(policy) for policy in mixture.policies]
            policies.update(zip(tokens, mixture.policies))
            packed.append((tokens, mixture.weights))
        for token in [t for t in self.sent if t not in policies]:
            del self.sent[token]
        return ship(self.sent, policies, policies), packed

    def forget(self) -> None:
        """Assume the actor holds nothing (its call failed): the next `pack` ships every policy."""
        self.sent.clear()


def unpack(held: dict[str, Policy], game: Game, shipments: Sequence[Shipment], packed: list[Packed]) -> list[Mixture]:
    """The actor's side of `TargetShipper.pack`: drop what `packed` no longer names, rebuild `shipments` for
    `game` into `held`, and return the mixtures.

    Raises:
        KeyError: a token the actor holds no policy for (the two sides disagree), naming it.
    """
    keep = {t for tokens, _ in packed for t in tokens}
    for token in [t for t in held if t not in keep]:
        del held[token]
    held.update((shipment[0], unship(shipment, game)) for shipment in shipments)
    missing = sorted(keep - held.keys())
    if missing:
        raise KeyError(f"the level actor holds no policy under token(s) {missing}: the driver's record of what it "
                       f"sent and the actor's disagree")
    return [Mixture([held[t] for t in tokens], weights) for tokens, weights in packed]


def check_actor_cpus(value: Any, name: str, per: str) -> float:
    """`value` as a float number of CPUs for each actor, or raise naming it: positive and finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of CPUs per {per} actor, got {value!r}")
    return float(value)


def place_actor(ray: Any, body: type, args: tuple[Any, ...], *, num_cpus: float, what: str, fix: str) -> tuple[Any, Any]:
    """``(actor, state)``: a Ray actor running ``body(*args)`` with `num_cpus`, and the answer of its
    ``state()``, which proves it was placed.

    Raises:
        RuntimeError: no free CPU hosted it within `SCHEDULE_TIMEOUT_S` (it would otherwise wait for
            ever); the message says `what` waited, how many CPUs are free, and `fix`.
    """
    actor = ray.remote(num_cpus=num_cpus)(body).remote(*args)
    try:
        return actor, ray.get(actor.state.remote(), timeout=SCHEDULE_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        ray.kill(actor)
        free = ray.available_resources().get("CPU", 0.0)
        raise RuntimeError(f"{what} ({num_cpus:g} CPU) was not scheduled within {SCHEDULE_TIMEOUT_S} s: the Ray "
                           f"cluster has {free:g} CPU(s) free. {fix}") from None


class LevelWorker:
    """The body of a level actor: one `Level` and its learner, and the policies its targets name."""

    def __init__(self, game_spec: dict[str, Any], learner_spec: dict[str, Any], index: int,
                 initial: Sequence[Policy]) -> None:
        from pbmarl.algorithms.p2sro import Level
        from pbmarl.games.registry import game_from_spec
        from pbmarl.learners.common.registry import make_learner

        self.game = game_from_spec(game_spec)
        self.level = Level(index, make_learner(self.game, learner_spec), initial)
        self.held: dict[str, Policy] = {}

    def reset(self, index: int, initial: Sequence[Policy]) -> dict[str, Any]:
        self.level = self.level.reset(index, initial)
        return self.state()

    def advance(self, shipments: list[Shipment], packed: list[Packed], rounds: int) -> tuple[int, dict[str, Any]]:
        self.level.retarget(unpack(self.held, self.game, shipments, packed))
        spent = self.level.advance(rounds)
        return spent, self.state()

    def state(self) -> dict[str, Any]:
        lv = self.level
        return {"index": lv.index, "policies": lv.policies, "values": lv.values, "trained": lv.trained,
                "player": lv.player, "cycles": lv.cycles, "current": [lv.current(p) for p in range(len(lv.policies))]}

    def set_state(self, state: dict[str, Any]) -> None:
        lv = self.level
        lv.index, lv.policies, lv.values = state["index"], list(state["policies"]), list(state["values"])
        lv.trained, lv.player, lv.cycles = list(state["trained"]), state["player"], state["cycles"]

    def save_learner(self, folder: str) -> None:
        self.level.save_learner(Path(folder))

    def load_learner(self, folder: str) -> None:
        self.level.load_learner(Path(folder))


class RemoteLevel:
    """A `Level` whose learner lives in a Ray actor; see the module doc."""

    def __init__(self, game: Game, learner: Any, index: int, initial: Sequence[Policy], *,
                 num_cpus: float = 1.0) -> None:
        from pbmarl.games.registry import game_spec
        from pbmarl.rollout.ray_backend import _import_ray, init_ray

        init_ray(quiet=True)
        ray = _import_ray()
        self._ray = ray
        self.learner_spec = learner.spec()
        self.actor, first = place_actor(
            ray, LevelWorker, (game_spec(game), self.learner_spec, index, initial), num_cpus=num_cpus,
            what=f"P2SRO level {index}'s learner actor",
            fix=f"Each active level needs level_cpus={num_cpus:g}; close other runs' levels (run.close()), "
                f"lower active= or level_cpus=, or add CPUs / nodes.")
        self.targets: list[Mixture] = []
        self.shipper = TargetShipper()
        self._mirror(first)

    def close(self) -> None:
        """End the level's actor (its state is lost unless the run was saved)."""
        self._ray.kill(self.actor)

    def _mirror(self, state: dict[str, Any]) -> None:
        self.index = int(state["index"])
        self.policies, self.values = list(state["policies"]), list(state["values"])
        self.trained, self.player, self.cycles = list(state["trained"]), state["player"], state["cycles"]
        self._current = list(state["current"])

    @property
    def done(self) -> bool:
        return all(self.trained) or self.cycles > 0  # as `Level.done`

    def retarget(self, targets: list[Mixture]) -> None:
        self.targets = targets

    def start(self, rounds: int) -> Any:
        """Begin `rounds` learner rounds in the actor; `finish` with the returned reference."""
        shipments, packed = self.shipper.pack(self.targets)
        try:
            return self.actor.advance.remote(shipments, packed, rounds)
        except BaseException:
            self.shipper.forget()
            raise

    def finish(self, ref: Any) -> int:
        try:
            spent, state = self._ray.get(ref)
        except BaseException:
            self.shipper.forget()
            raise
        self._mirror(state)
        return int(spent)

    def advance(self, rounds: int) -> int:
        return self.finish(self.start(rounds))

    def current(self, player: int) -> Policy:
        return self._current[player]

    def reset(self, index: int, initial: Sequence[Policy]) -> RemoteLevel:
        self._mirror(self._ray.get(self.actor.reset.remote(index, initial)))
        return self

    def set_state(self, state: dict[str, Any]) -> None:
        self._ray.get(self.actor.set_state.remote(state))
        self._mirror(self._ray.get(self.actor.state.remote()))

    def save_learner(self, folder: Path) -> None:
        """The actor writes its learner's state into `folder` (on a cluster, a path every node sees)."""
        self._ray.get(self.actor.save_learner.remote(str(folder)))

    def load_learner(self, folder: Path) -> None:
        self._ray.get(self.actor.load_learner.remote(str(folder)))
