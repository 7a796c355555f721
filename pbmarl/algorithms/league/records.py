"""What a `League` reports: the frozen records its steps return, their tables, and its main policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pbmarl.fmt import fmt
from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.mixture import Mixture
from pbmarl.runs import MeasuredRecord


@dataclass(frozen=True)
class MatchRecord:
    """One match of a league round."""

    agent: str
    opponent: str
    branch: str
    """Which rule drew the opponent: ``pfsp``, ``selfplay``, ``verification_exploiters``, ..."""
    win_rate: float
    """The agent's win rate in this match, after its training (both seatings)."""
    steps: int
    """Environment steps the agent's training took (0 for the exact oracle)."""


@dataclass(frozen=True)
class LeagueRecord(MeasuredRecord):
    """One league round (round 0: the initial snapshots): its matches, the snapshots taken, the agents reset.

    Its shared fields (`MeasuredRecord`): ``env_steps`` and ``episodes`` count training and matches over
    the whole run (an exact evaluator plays none); ``wall_time`` is the seconds of league rounds over the
    whole run; ``exploitability`` is of the main agent's policy (`League.main_policy`), where measured exactly.
    """

    matches: tuple[MatchRecord, ...]
    snapshots: tuple[str, ...]
    resets: tuple[str, ...]
    league_size: int
    main_strategy: tuple[tuple[float, ...], ...] = ()
    """Per seat, the main policy's weights over the main agent's snapshots."""
    times: dict[str, float] = field(default_factory=dict)
    """Seconds of this round by phase: ``train``, ``play``, ``measure``."""

    def as_row(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"league_size": self.league_size, "snapshots": list(self.snapshots),
                                 "resets": list(self.resets)}
        for m in self.matches:
            extra[f"opponent[{m.agent}]"] = m.opponent
            extra[f"win_rate[{m.agent}]"] = m.win_rate
        return self.measured_row(times=self.times, extra=extra)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["matches"] = [asdict(m) for m in self.matches]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LeagueRecord:
        def opt(v: Any) -> float | None:
            return None if v is None else float(v)

        return cls(iteration=int(data["iteration"]), env_steps=int(data["env_steps"]), episodes=int(data["episodes"]),
                   wall_time=float(data["wall_time"]), exploitability=opt(data["exploitability"]),
                   nash_conv=opt(data["nash_conv"]), matches=tuple(MatchRecord(**m) for m in data["matches"]),
                   snapshots=tuple(str(s) for s in data["snapshots"]), resets=tuple(str(s) for s in data["resets"]),
                   league_size=int(data["league_size"]),
                   main_strategy=tuple(tuple(float(x) for x in d) for d in data["main_strategy"]),
                   times={str(k): float(v) for k, v in data["times"].items()})

    def __str__(self) -> str:
        plays = ", ".join(f"{m.agent}->{m.opponent} ({m.branch}) {fmt(m.win_rate, '.3f')}" for m in self.matches)
        snaps = f" | snapshots {', '.join(self.snapshots)}" if self.snapshots else ""
        resets = f" | reset {', '.join(self.resets)}" if self.resets else ""
        expl = f" | exploitability {fmt(self.exploitability, '.4g')}" if self.exploitability is not None else ""
        return f"round {self.iteration:>3} | league {self.league_size}{expl} | {plays}{snaps}{resets}"


def matches_frame(records: Sequence[LeagueRecord]) -> pd.DataFrame:
    rows = [{"iteration": r.iteration, **asdict(m)} for r in records for m in r.matches]
    return pd.DataFrame(rows, columns=["iteration", "agent", "opponent", "branch", "win_rate", "steps"])


class MainPolicy(Policy):
    """One seat of a league's main policy: a mixture over a main agent's snapshots that can be played directly.

    `action_probabilities` mixes the members' probabilities. Where the league holds the game's
    tree (`behaviour` given), each member is weighted by its own probability of reaching the
    information state, which plays exactly the mixed strategy (Kuhn's theorem; OpenSpiel's
    ``policy_aggregator``): rows are looked up by their info-state keys. Without the tree the
    weights alone are used, which is the mixed strategy at a player's first decision and an
    approximation of it after. `mixture` is the mixed strategy itself: evaluators and
    `League.evaluate` draw one member per episode from it.

    Attributes:
        mixture: the `Mixture` (``policies``, ``weights``) over the snapshots.
        player: the seat.
    """

    def __init__(self, game: Game, player: int, mixture: Mixture, behaviour: tuple[list[str], np.ndarray] | None = None
                 ) -> None:
        super().__init__(game)
        self.player = int(player)
        self.mixture = mixture
        self._rows: dict[str, np.ndarray] | None = None
        if behaviour is not None:
            keys, table = behaviour
            self._rows = {k: table[i] for i, k in enumerate(keys)}

    @property
    def policies(self) -> list[Policy]:
        return self.mixture.policies

    @property
    def weights(self) -> np.ndarray:
        return self.mixture.weights

    @property
    def exact(self) -> bool:
        """Whether `action_probabilities` plays the mixed strategy exactly (rows looked up by info-state key)."""
        return self._rows is not None

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        if self._rows is not None and keys is not None:
            try:
                return np.stack([self._rows[k] for k in keys])
            except KeyError as exc:
                raise ValueError(f"{exc.args[0]!r} is not an information state of player {self.player} in "
                                 f"{self.game_name!r}") from None
        out = np.zeros(legal_mask.shape)
        for policy, w in zip(self.mixture.policies, self.mixture.weights):
            if w > 0:
                out += w * policy.action_probabilities(obs, legal_mask, keys)
        return out

    @property
    def needs_keys(self) -> bool:  # type: ignore[override]
        return self._rows is not None or any(p.needs_keys for p in self.mixture.policies)

    def __repr__(self) -> str:
        how = "exact" if self.exact else "weights only"
        return f"MainPolicy(seat {self.player}, {self.mixture!r}, {how})"


class _Greedy(Policy):
    """A policy's most likely legal action, always (ties to the lowest index, as ``act(deterministic=True)``)."""

    def __init__(self, inner: Policy) -> None:
        self.__dict__.update(inner.__dict__)
        self.inner = inner

    @property
    def needs_keys(self) -> bool:  # type: ignore[override]
        return bool(self.inner.needs_keys)

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        probs = self.inner.action_probabilities(obs, legal_mask, keys)
        out = np.zeros_like(probs)
        out[np.arange(len(probs)), np.argmax(probs, axis=1)] = 1.0
        return out


def play_profile(game: Game, profile: Sequence[Policy | Mixture], episodes: int, *, seed: int,
                 deterministic: bool) -> Any:
    """`episodes` fresh episodes of `profile` (a Mixture seat draws one member per episode) -> `pb.EvalResult`.

    A local `RolloutPool` of its own plays them, seeded by `seed`: nothing of the caller's changes.
    `deterministic` plays every member's most likely legal action.
    """
    from pbmarl.config import FLAG, POSITIVE_INT, check_seed
    from pbmarl.rollout import RolloutPool

    if not POSITIVE_INT[0](episodes):
        raise ValueError(f"episodes must be a positive int, got {episodes!r}")
    if not FLAG[0](deterministic):
        raise ValueError(f"deterministic must be True or False, got {deterministic!r}")
    seed = check_seed(seed)
    if deterministic:
        profile = [Mixture([_Greedy(p) for p in s.policies], s.weights) if isinstance(s, Mixture) else _Greedy(s)
                   for s in profile]
    pool = RolloutPool(game, num_workers=1, envs_per_worker=min(int(episodes), 64), backend="local", seed=seed)
    return pool.evaluate(list(profile), int(episodes), seed=seed)
