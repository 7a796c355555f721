"""P2SRO's active levels: `Level`, a learner training one policy per player against its targets, and
`RemoteLevel`, the same level with its learner in a Ray actor (``backend="ray"``), all advancing at once.

`RemoteLevel` has the interface of `Level` that `P2SRO` uses, and mirrors the actor's state
(policies, values, progress) after every call, so the driver (the single writer of the
payoff table: claiming and freezing stay atomic) reads it without a round trip. The actor
rebuilds the game and the learner from their specs, so nothing but specs, policies and
numbers travel. A level's targets reach its actor as tokens and weights (`TargetShipper`,
`pbmarl.hosting.shipping`): each policy travels once, as arrays and meta, and stays there while
the targets name it, so the fixed population is not sent again every refresh period. The actor is a
`pbmarl.hosting.Hosted` handle: this module imports no Ray.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from pbmarl.algorithms.psro.parts import learner_reader, learner_writer
from pbmarl.algorithms.psro.targets import Target, against
from pbmarl.games.base import Game
from pbmarl.hosting.hosted import PLACEMENT_TIMEOUT_S, Hosted
from pbmarl.hosting.shipping import Packed, Shipment, TargetShipper, unpack
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture


class Level:
    """One active level: a learner training one policy per player against its target mixtures.

    With an RL `Learner` the players train one after the other, a task each, `rounds` learner
    rounds per `advance`; a level that is not the lowest starts again (warm) when it has
    finished, so it keeps improving until it is the lowest. A level that has finished once is
    `done`: when it becomes the lowest it freezes at once with each player's latest finished
    policy, and the cycle it had begun is dropped (waiting for that cycle to end made every
    freeze cost a whole extra cycle of all levels: on Leduc, 3 iterations in 8 minutes where
    PSRO made 7). An exact oracle answers every player at every `advance`.
    """

    def __init__(self, index: int, learner: Any, initial: Sequence[Policy]) -> None:
        self.index = index
        """The rung: this level's policies will be member `index` of every player's population."""
        self.learner = learner
        self.policies: list[Policy] = list(initial)
        self.values = [math.nan] * len(initial)
        self.trained = [False] * len(initial)
        self.player = 0
        self.cycles = 0
        self.targets: list[Mixture] = []

    @property
    def done(self) -> bool:
        """Every player's training has ended at least once: the level may freeze."""
        return all(self.trained) or self.cycles > 0

    def _rl(self) -> bool:
        from pbmarl.learners.oracles.base import Learner

        return isinstance(self.learner, Learner)

    def retarget(self, targets: list[Mixture]) -> None:
        """Train against `targets` (one mixture per player) from now on, the running task included."""
        self.targets = targets
        task = getattr(self.learner, "task", None) if self._rl() else None
        if task is not None:
            task.opponents = [None if q == task.player else t for q, t in enumerate(targets)]

    def select(self, rng: np.random.Generator | None = None) -> list[Target]:
        """The level's targets (a `TargetSelector`): each player against the others' mixtures."""
        return [Target(p, against(p, self.targets), f"level {self.index}") for p in range(len(self.targets))]

    def advance(self, rounds: int) -> int:
        """Train for `rounds` learner rounds (an exact oracle: one answer per player); returns env steps."""
        if not self._rl():
            spent = 0
            for t in self.select():
                answer = self.learner.respond(t.player, t.opponents)
                self.policies[t.player], self.values[t.player] = answer.policy, float(answer.value)
                spent += int(answer.env_steps)
            self.trained = [True] * len(self.trained)
            return spent
        learner, spent = self.learner, 0
        for _ in range(rounds):
            if all(self.trained):
                self.trained = [False] * len(self.trained)
                self.cycles += 1
            p = self.player
            if learner.task is None:
                learner.start(p, self.select()[p].opponents, warm_start=True if self.cycles else None)
            before = learner.task.env_steps
            learner.step()
            if learner.done:  # env steps counted per round, so a cycle dropped at a freeze is counted too
                self.policies[p], self.values[p] = learner.finish()
                spent += int(learner.last_env_steps) - before
                self.trained[p] = True
                self.player = (p + 1) % len(self.trained)
                if all(self.trained):
                    break
            else:
                spent += int(learner.task.env_steps) - before
        return spent

    def reset(self, index: int, initial: Sequence[Policy]) -> Level:
        """A fresh level at rung `index` that reuses this level's learner (a frozen level's learner moves up).

        A cycle begun after the level's last finished one is dropped unfinished; its networks stay
        until the next task replaces them, so an interrupted step can still restore it.
        """
        if self._rl() and self.learner.task is not None:
            self.learner.task = None
        return Level(index, self.learner, initial)

    def set_state(self, state: dict[str, Any]) -> None:
        self.index, self.policies, self.values = int(state["index"]), list(state["policies"]), list(state["values"])
        self.trained, self.player, self.cycles = list(state["trained"]), int(state["player"]), int(state["cycles"])

    def save_learner(self, folder: Path) -> None:
        """Write the level's learner state into `folder` (`pbmarl.algorithms.psro.parts.learner_writer`)."""
        keeper = learner_writer(self.learner)
        if keeper is None:
            raise ValueError(f"the level's learner {self.learner!r} keeps no state to save")
        keeper[1](folder)

    def load_learner(self, folder: Path) -> None:
        """Read back what `save_learner` wrote (a learner that is a run is replaced by the one loaded)."""
        keeper = learner_writer(self.learner)
        self.learner = learner_reader(keeper and keeper[0], folder, self.learner)

    def close(self) -> None:
        """Nothing to end: the learner lives in this process."""

    def current(self, player: int) -> Policy:
        """The level's policy for `player` now (a copy of the one in training, if it is training)."""
        task = getattr(self.learner, "task", None) if self._rl() else None
        if task is not None and task.player == player:
            return cast(Policy, self.learner.policy())
        return self.policies[player]



class LevelWorker:
    """The body of a level actor: one `Level` and its learner, and the policies its targets name."""

    def __init__(self, game_spec: dict[str, Any], learner_spec: dict[str, Any], index: int,
                 initial: Sequence[Policy]) -> None:
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

        self.learner_spec = learner.spec()
        self.host = Hosted(
            LevelWorker, (game_spec(game), self.learner_spec, index, initial), backend="ray", num_cpus=num_cpus,
            name=f"P2SRO level {index}'s learner", placement_timeout_s=PLACEMENT_TIMEOUT_S, quiet=True,
            fix=f"Each active level needs level_cpus={num_cpus:g}; close other runs' levels (run.close()), "
                f"lower active= or level_cpus=, or add CPUs / nodes.")
        self.targets: list[Mixture] = []
        self.shipper = TargetShipper()
        self._mirror(self.host.call("state"))

    def close(self) -> None:
        """End the level's actor (its state is lost unless the run was saved)."""
        self.host.close()

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
            return self.host.send("advance", shipments, packed, rounds)
        except BaseException:
            self.shipper.forget()
            raise

    def finish(self, ref: Any) -> int:
        try:
            spent, state = self.host.get(ref)
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
        self._mirror(self.host.call("reset", index, initial))
        return self

    def set_state(self, state: dict[str, Any]) -> None:
        self.host.call("set_state", state)
        self._mirror(self.host.call("state"))

    def save_learner(self, folder: Path) -> None:
        """The actor writes its learner's state into `folder` (on a cluster, a path every node sees)."""
        self.host.call("save_learner", str(folder))

    def load_learner(self, folder: Path) -> None:
        self.host.call("load_learner", str(folder))
