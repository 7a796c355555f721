"""The AlphaStar league's rules: who plays whom, when to snapshot, when to reset.

A transcription of the league pseudocode of Vinyals et al. 2019 (Nature 575,
supplementary ``pseudocode.py``, classes ``MainPlayer``, ``MainExploiter``,
``LeagueExploiter``), with every threshold a field of `LeagueConfig`.

- **Main agents**: PFSP (f_hard) over all snapshots with probability 0.5; otherwise
  pick a main agent, and with probability 0.15 try the verification branch (snapshots of
  main exploiters it beats less than 30% of the time, or forgotten snapshots of that main
  agent it beats less than 70%), else self-play, falling back to PFSP (f_var) over the
  opponent's snapshots when it wins 30% or less against it.
- **Main exploiters**: a main agent while they beat it more than 10% of the time, else
  PFSP (f_var) over that main agent's snapshots. Reset to the initial policy at every snapshot.
- **League exploiters**: PFSP with ``min(0.5, 1 - x)`` over all snapshots. Reset with
  probability 0.25 at a snapshot.
- **Snapshots**: once ``snapshot_min_steps`` have passed since the last one, when the agent
  beats every snapshot (main exploiters: every main agent) more than 70% of the time, or
  once ``snapshot_max_steps`` have passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pbmarl.algorithms.league.pfsp import pfsp, remove_monotonic_suffix
from pbmarl.algorithms.league.win_rates import WinRateTable
from pbmarl.config import FLAG, NON_NEGATIVE_INT, POSITIVE_INT, UNIT, Config, Rule, is_real
from pbmarl.games.base import Game

ROLES = ("main", "main_exploiter", "league_exploiter")
#: the most learner steps or episodes one match may ask for
MAX_STEPS = 10**9


@dataclass(frozen=True)
class LeagueConfig(Config):
    """League options: its roster, then thresholds that each cite the line of the AlphaStar
    pseudocode (Vinyals et al. 2019) they come from."""

    main_agents: int = 1
    """How many main agents (at least one)."""
    main_exploiters: int = 1
    """How many main exploiters."""
    league_exploiters: int = 2
    """How many league exploiters."""
    pfsp_branch: float = 0.5
    """Main agents: probability of the PFSP branch (``MainPlayer.get_match``: ``coin_toss < 0.5``)."""
    verification_branch: float = 0.15
    """Main agents: probability of trying the verification branch (``coin_toss < 0.5 + 0.15``);
    self-play takes the rest, 0.35."""
    selfplay_min_win_rate: float = 0.3
    """Main agents play self-play only while beating the opponent more than this (``_selfplay_branch``: ``> 0.3``)."""
    exploiter_check_win_rate: float = 0.3
    """Verification: replay main exploiters' snapshots while some is beaten less than this (``min() < 0.3``)."""
    forgetting_win_rate: float = 0.7
    """Verification: replay a main agent's old snapshots while some is beaten less than this (``min() < 0.7``)."""
    main_exploiter_min_win_rate: float = 0.1
    """Main exploiters play the main agent itself while beating it more than this (``MainExploiter``: ``> 0.1``)."""
    snapshot_win_rate: float = 0.7
    """Snapshot once every relevant opponent is beaten more than this (``ready_to_checkpoint``: ``min() > 0.7``)."""
    snapshot_min_steps: int = 2_000
    """Steps since the last snapshot before one may be taken (the pseudocode's 2e9 agent steps, scaled to
    small games; an oracle that reports no environment steps counts one step per training call)."""
    snapshot_max_steps: int = 4_000
    """Steps after which a snapshot is taken whatever the win rates (the pseudocode's 4e9: twice the minimum)."""
    league_exploiter_reset: float = 0.25
    """Probability that a league exploiter is reset to its initial policy at a snapshot (``LeagueExploiter.checkpoint``)."""
    decay: float = 1.0
    """Decay of the win-rate counts per game (the pseudocode's ``Payoff`` uses 0.99; 1 keeps every game)."""
    steps_per_match: int = 2_000
    """Learner steps each agent trains against the opponent drawn for it, per league step."""
    match_episodes: int = 200
    """Episodes played per match to update the win rates (exact evaluators use the expected result)."""
    measure: bool | None = None
    """Measure the exact exploitability of `League.main_policy` after every round (None: where the game's tree fits)."""

    checks: ClassVar[dict[str, Rule]] = {
        "main_agents": POSITIVE_INT, "main_exploiters": NON_NEGATIVE_INT, "league_exploiters": NON_NEGATIVE_INT,
        "pfsp_branch": UNIT, "verification_branch": UNIT, "selfplay_min_win_rate": UNIT,
        "exploiter_check_win_rate": UNIT, "forgetting_win_rate": UNIT, "main_exploiter_min_win_rate": UNIT,
        "snapshot_win_rate": UNIT, "snapshot_min_steps": NON_NEGATIVE_INT, "snapshot_max_steps": NON_NEGATIVE_INT,
        "league_exploiter_reset": UNIT, "decay": (lambda v: is_real(v) and 0 < v <= 1, "a number in (0, 1]"),
        "steps_per_match": (lambda v: POSITIVE_INT[0](v) and v <= MAX_STEPS, f"an int in [1, {MAX_STEPS:,}]"),
        "match_episodes": (lambda v: POSITIVE_INT[0](v) and v <= MAX_STEPS, f"an int in [1, {MAX_STEPS:,}]"),
        "measure": (lambda v: v is None or FLAG[0](v), "True, False or None (measure where the game allows)"),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pfsp_branch + self.verification_branch > 1:
            raise ValueError(f"pfsp_branch + verification_branch must be at most 1, got "
                             f"{self.pfsp_branch} + {self.verification_branch}")
        if self.snapshot_max_steps < self.snapshot_min_steps:
            raise ValueError(f"snapshot_max_steps must be at least snapshot_min_steps ({self.snapshot_min_steps}), "
                             f"got {self.snapshot_max_steps!r}")


@dataclass
class Member:
    """A league player: a learning agent (``role`` in `ROLES`) or a frozen snapshot (``parent`` set)."""

    name: str
    role: str
    parent: str | None = None
    """For a snapshot, the agent it was taken from."""
    steps: int = 0
    checkpoint_step: int = 0
    snapshots: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def historical(self) -> bool:
        return self.parent is not None


class Matchmaker:
    """The league's target selection: draws each agent's opponent by its role's rule.

    Args:
        config: the thresholds.
        table: the win rates (`WinRateTable`).
        members: every league player by name (agents and snapshots), in order of joining.
    """

    def __init__(self, config: LeagueConfig, table: WinRateTable, members: dict[str, Member]) -> None:
        self.config = config
        self.table = table
        self.members = members

    # -- views ---------------------------------------------------------------------
    def of_role(self, role: str) -> list[str]:
        return [m.name for m in self.members.values() if m.role == role and not m.historical]

    def historical(self, parents: list[str] | None = None) -> list[str]:
        return [m.name for m in self.members.values()
                if m.historical and (parents is None or m.parent in parents)]

    def _pick(self, rng: np.random.Generator, names: list[str], rates: np.ndarray, weighting: str) -> str:
        return names[int(rng.choice(len(names), p=pfsp(rates, weighting=weighting)))]

    # -- matches ---------------------------------------------------------------------
    def match(self, agent: str, rng: np.random.Generator) -> tuple[str, str]:
        """``(opponent, branch)`` for `agent`'s next match."""
        role = self.members[agent].role
        if role == "main":
            return self._main(agent, rng)
        if role == "main_exploiter":
            return self._main_exploiter(agent, rng)
        if role == "league_exploiter":
            names = self.historical()
            return self._pick(rng, names, self.table.win_rate(agent, names), "linear_capped"), "pfsp_capped"
        raise ValueError(f"unknown league role {role!r}; accepted: {ROLES}")

    def _main(self, agent: str, rng: np.random.Generator) -> tuple[str, str]:
        cfg = self.config
        coin = rng.random()
        if coin < cfg.pfsp_branch:
            names = self.historical()
            return self._pick(rng, names, self.table.win_rate(agent, names), "squared"), "pfsp"
        mains = self.of_role("main")
        opponent = mains[int(rng.integers(len(mains)))]
        if coin < cfg.pfsp_branch + cfg.verification_branch:
            found = self._verification(agent, opponent, rng)
            if found is not None:
                return found
        if self.table.win_rate(agent, [opponent])[0] > cfg.selfplay_min_win_rate:
            return opponent, "selfplay"
        names = self.historical([opponent])
        return self._pick(rng, names, self.table.win_rate(agent, names), "variance"), "selfplay_curriculum"

    def _verification(self, agent: str, opponent: str, rng: np.random.Generator) -> tuple[str, str] | None:
        cfg = self.config
        names = self.historical(self.of_role("main_exploiter"))
        rates = self.table.win_rate(agent, names)
        if len(rates) and rates.min() < cfg.exploiter_check_win_rate:
            return self._pick(rng, names, rates, "squared"), "verification_exploiters"
        names = self.historical([opponent])
        rates, names = remove_monotonic_suffix(self.table.win_rate(agent, names), names)
        if len(rates) and rates.min() < cfg.forgetting_win_rate:
            return self._pick(rng, names, rates, "squared"), "verification_forgetting"
        return None

    def _main_exploiter(self, agent: str, rng: np.random.Generator) -> tuple[str, str]:
        mains = self.of_role("main")
        opponent = mains[int(rng.integers(len(mains)))]
        if self.table.win_rate(agent, [opponent])[0] > self.config.main_exploiter_min_win_rate:
            return opponent, "exploit_main"
        names = self.historical([opponent])
        return self._pick(rng, names, self.table.win_rate(agent, names), "variance"), "exploit_curriculum"

    # -- snapshots and resets ------------------------------------------------------------
    def ready_to_snapshot(self, agent: str) -> bool:
        """Whether `agent` takes a snapshot now (``ready_to_checkpoint`` of its role)."""
        cfg = self.config
        m = self.members[agent]
        passed = m.steps - m.checkpoint_step
        if passed < cfg.snapshot_min_steps:
            return False
        names = self.of_role("main") if m.role == "main_exploiter" else self.historical()
        rates = self.table.win_rate(agent, names)
        return bool((len(rates) and rates.min() > cfg.snapshot_win_rate) or passed > cfg.snapshot_max_steps)

    def resets_at_snapshot(self, agent: str, rng: np.random.Generator) -> bool:
        """Whether `agent` goes back to its initial policy after a snapshot."""
        role = self.members[agent].role
        if role == "main_exploiter":
            return True
        if role == "league_exploiter":
            return bool(rng.random() < self.config.league_exploiter_reset)
        return False


def payoff_scale(game: Game) -> float:
    """The largest absolute return a seat can get: the scale that turns payoff margins into win rates."""
    payoffs = getattr(game, "payoffs", None)
    if isinstance(payoffs, np.ndarray):
        return float(np.abs(payoffs).max()) or 1.0
    spiel = getattr(game, "pyspiel_game", None)
    if spiel is not None:
        return max(abs(float(spiel.min_utility())), abs(float(spiel.max_utility()))) or 1.0
    return 1.0


def win_probability(returns: np.ndarray, seat: int, scale: float) -> float:
    """``0.5 + (u_seat - u_other) / (4 scale)``, clipped to [0, 1].

    For win/draw/loss games (returns +-1, 0) this is exactly ``P[win] + P[draw] / 2``;
    for other payoffs it is the payoff margin rescaled linearly, 0.5 when even.
    """
    margin = float(returns[seat] - returns[1 - seat])
    return float(np.clip(0.5 + margin / (4.0 * scale), 0.0, 1.0))
