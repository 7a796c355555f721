"""Policies sent to another process once: what they travel under (`PolicyTokens`), what travels
(`Shipment`: arrays and meta, no code), what a destination still needs (`ship`) and how it rebuilds
them (`unship`). The rollout pool's Ray workers get their policies so; `TargetShipper` and `unpack`
do the same for a list of target mixtures (P2SRO's level actors, `ParallelOracle`'s copies).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy, new_policy_from_state
from pbmarl.policies.mixture import Mixture

__all__ = ["Packed", "PolicyTokens", "Shipment", "TargetShipper", "ship", "unpack", "unship"]

#: what travels for one policy: (token, version, arrays, meta)
Shipment = tuple[str, int, dict[str, np.ndarray], dict[str, Any]]


class PolicyTokens:
    """The names policies travel under: one token per live policy object, never reused.

    Call it with a policy for its token; `live` lists the tokens of policies still alive, so a
    destination can drop the others.
    """

    def __init__(self) -> None:
        self._tokens: weakref.WeakKeyDictionary[Policy, str] = weakref.WeakKeyDictionary()
        self._next = itertools.count()

    def __call__(self, policy: Policy) -> str:
        token = self._tokens.get(policy)
        if token is None:
            token = self._tokens[policy] = f"t{next(self._next)}"
        return token

    def live(self) -> set[str]:
        return set(self._tokens.values())


def ship(sent: dict[str, int], tokens: Iterable[str], policies: Mapping[str, Policy]) -> list[Shipment]:
    """The shipments a destination still needs for `tokens`, given what it holds (`sent`: token -> version).

    A policy travels again only when its version changed; `sent` is updated to what is being sent.
    """
    out = []
    for token in sorted(tokens):
        pi = policies[token]
        if sent.get(token) != pi.version:
            out.append((token, pi.version, pi.arrays(), pi.meta()))
            sent[token] = pi.version
    return out


def unship(shipment: Shipment, game: Game) -> Policy:
    """The policy a shipment carries, rebuilt for `game` (no code travels, only arrays and meta)."""
    _, version, arrays, meta = shipment
    policy = new_policy_from_state(game, arrays, meta)
    policy.version = int(version)
    return policy


#: a target mixture as it travels: the members' tokens and the weights
Packed = tuple[list[str], np.ndarray]


class TargetShipper:
    """The driver's side of an actor's targets: `PolicyTokens` and `ship` for a list of mixtures.

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
