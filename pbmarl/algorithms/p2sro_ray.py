"""P2SRO's Ray backend: every active level is a learner actor, advancing at the same time.

`RemoteLevel` has the interface of `Level` that `P2SRO` uses, and mirrors the actor's state
(policies, values, progress) after every call, so the driver (the single writer of the
payoff table: claiming and freezing stay atomic) reads it without a round trip. The actor
rebuilds the game and the learner from their specs, so nothing but specs, policies and
numbers travel. A level's targets reach its actor as `PolicyCache` tokens and weights: each
policy travels once and stays there while the targets hold it, so the fixed population is
not pickled again every refresh period. Ray is imported through `pbmarl.rollout.ray_backend`,
lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pbmarl.algorithms import driver_io as io
from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture

#: seconds to wait for a level actor to be placed before saying why it is not
SCHEDULE_TIMEOUT_S = 60


#: a target mixture as it travels: the members' tokens and the weights
Packed = tuple[list[int], np.ndarray]


class PolicyCache:
    """The driver's side of a level's targets: which policies its actor holds, under which token.

    `pack` turns the targets into tokens and weights and hands over only the policies the actor does
    not hold yet; both sides then drop every policy the targets no longer name, so the cache holds at
    most the targets' members. Tokens are never reused, so a `forget` (after a failed call, when the
    actor may or may not have stored them) only makes the next `pack` send everything again.
    """

    def __init__(self) -> None:
        self.held: dict[int, Policy] = {}  # token -> policy, kept alive so its id() stays its own
        self.tokens: dict[int, int] = {}  # id(policy) -> token
        self.next = 0

    def pack(self, targets: Sequence[Mixture]) -> tuple[dict[int, Policy], list[Packed]]:
        """``(new, packed)``: the policies to send under their new tokens, and every target as tokens."""
        new: dict[int, Policy] = {}
        packed: list[Packed] = []
        keep: set[int] = set()
        for mixture in targets:
            tokens = []
            for policy in mixture.policies:
                token = self.tokens.get(id(policy))
                if token is None or self.held.get(token) is not policy:
                    token, self.next = self.next, self.next + 1
                    self.tokens[id(policy)], self.held[token], new[token] = token, policy, policy
                tokens.append(token)
                keep.add(token)
            packed.append((tokens, mixture.weights))
        for token in [t for t in self.held if t not in keep]:
            del self.tokens[id(self.held.pop(token))]
        return new, packed

    def forget(self) -> None:
        """Assume the actor holds nothing (its call failed): the next `pack` sends every policy."""
        self.held.clear()
        self.tokens.clear()


def unpack(cache: dict[int, Policy], new: dict[int, Policy], packed: list[Packed]) -> list[Mixture]:
    """The actor's side of `PolicyCache.pack`: store `new`, drop what `packed` no longer names, rebuild the mixtures.

    Raises:
        KeyError: a token the actor does not hold (the caches disagree), naming it.
    """
    cache.update(new)
    keep = {t for tokens, _ in packed for t in tokens}
    for token in [t for t in cache if t not in keep]:
        del cache[token]
    missing = sorted(keep - cache.keys())
    if missing:
        raise KeyError(f"the level actor holds no policy under token(s) {missing}: the driver's cache and the "
                       f"actor's disagree")
    return [Mixture([cache[t] for t in tokens], weights) for tokens, weights in packed]


class LevelWorker:
    """The body of a level actor: one `Level` and its learner, and the policies its targets name."""

    def __init__(self, game_spec: dict[str, Any], learner_spec: dict[str, Any], index: int,
                 initial: Sequence[Policy]) -> None:
        from pbmarl.algorithms.p2sro import Level
        from pbmarl.games.registry import game_from_spec
        from pbmarl.learners.registry import make_learner

        game = game_from_spec(game_spec)
        self.level = Level(index, make_learner(game, learner_spec), initial)
        self.cache: dict[int, Policy] = {}

    def reset(self, index: int, initial: Sequence[Policy]) -> dict[str, Any]:
        self.level = self.level.reset(index, initial)
        return self.state()

    def advance(self, new: dict[int, Policy], packed: list[Packed], rounds: int) -> tuple[int, dict[str, Any]]:
        self.level.retarget(unpack(self.cache, new, packed))
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

    def save_learner(self, folder: str) -> str | None:
        return io.save_learner(self.level.learner, Path(folder))

    def load_learner(self, folder: str, saved: str | None) -> None:
        io.load_learner(self.level.learner, Path(folder), saved)


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
        self.actor = ray.remote(num_cpus=num_cpus)(LevelWorker).remote(game_spec(game), self.learner_spec, index, initial)
        self.targets: list[Mixture] = []
        self.cache = PolicyCache()
        try:  # an actor that no free CPU can host would otherwise wait for ever
            first = ray.get(self.actor.state.remote(), timeout=SCHEDULE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            ray.kill(self.actor)
            free = ray.available_resources().get("CPU", 0.0)
            raise RuntimeError(
                f"P2SRO level {index}'s learner actor ({num_cpus:g} CPU) was not scheduled within "
                f"{SCHEDULE_TIMEOUT_S} s: the Ray cluster has {free:g} CPU(s) free. Each active level needs "
                f"level_cpus={num_cpus:g}; close other runs' levels (run.close()), lower active= or level_cpus=, "
                f"or add CPUs / nodes.") from None
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
        new, packed = self.cache.pack(self.targets)
        try:
            return self.actor.advance.remote(new, packed, rounds)
        except BaseException:
            self.cache.forget()
            raise

    def finish(self, ref: Any) -> int:
        try:
            spent, state = self._ray.get(ref)
        except BaseException:
            self.cache.forget()
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

    def save_learner(self, folder: Path) -> str | None:
        return self._ray.get(self.actor.save_learner.remote(str(folder)))

    def load_learner(self, folder: Path, saved: str | None) -> None:
        self._ray.get(self.actor.load_learner.remote(str(folder), saved))
