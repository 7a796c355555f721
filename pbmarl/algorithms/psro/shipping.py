"""Sending a population's policies to a Ray actor once: the driver packs targets as tokens and weights
(`TargetShipper`, the rollout workers' shipping: `PolicyTokens`, `ship`), the actor unpacks them (`unpack`);
`place_actor` starts an actor and says why when no CPU hosts it. Used by P2SRO's level actors
(`pbmarl.algorithms.psro.levels`) and `ParallelOracle`'s workers.
"""

from __future__ import annotations

from collections.abc import Sequence
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
