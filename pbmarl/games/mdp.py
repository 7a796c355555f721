"""MALib's five verification MDPs, written in pbmarl: ``load_game("mdp:two_round_nmdp")``.

Tiny one-player games with two actions and known optimal values, so a learner can be
tested against an exact optimum. The tables follow MALib's ``mdp`` DSL definitions
(see the specification in the project's reference notes):

=================  ====================================================  ==========================
id                 dynamics                                              optimum (undiscounted)
=================  ====================================================  ==========================
one_round_dmdp     start -> end; r(start, a1) = 1                        a1: 1
two_round_dmdp     start -a0-> better, -a1-> worse; r(better, a1) = 3,   a0 then a1: 3
                   r(worse, a0) = 1, r(worse, a1) = 2
one_round_nmdp     r(start, a0) = 0 | 5, r(start, a1) = 1 | 3            a0: 2.5
two_round_nmdp     start -a0-> A, -a1-> B; r(A, a0) = -1 | 1,            a0 then a1: 3
                   r(A, a1) = 0 (2/3) | 9 (1/3), r(B, a0) = 0 | 2,
                   r(B, a1) = 2 | 3
multi_round_nmdp   discount 0.9; reward 3 in `first`, 5 in `second`;     by finite-horizon DP over
                   only (second, a1) can end (1/4); truncated at          `horizon` steps (default 20)
                   `horizon` steps
=================  ====================================================  ==========================

Observations are one-hot over the non-terminal states; information keys are the
action-observation history (perfect recall). A player action whose outcome is
random leads to a chance node that draws (next state, reward) together, so the
existing steppers and tree builder handle these games as they are. For one-player
learners, ``game.make_env()`` gives a ``gymnasium.Env`` with termination and
truncation (at `horizon`) kept apart.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.state import CHANCE, TERMINAL, OnePlayerState

MDP_PREFIX = "mdp:"
END = "end"

Outcomes = tuple[tuple[Any, float], ...]  # (value, weight) pairs, weights normalised on use


@dataclass(frozen=True)
class MDPTable:
    """One MDP as tables: ``transitions[(state, action)]`` and ``rewards[(state, action)]``
    map to weighted outcomes; a missing reward is 0. The first state is the start."""

    states: tuple[str, ...]
    transitions: dict[tuple[str, int], Outcomes]
    rewards: dict[tuple[str, int], Outcomes] = field(default_factory=dict)
    discount: float = 1.0
    default_horizon: int | None = None

    def outcomes(self, state: str, action: int) -> list[tuple[str, float, float]]:
        """Joint (next state, reward, probability) outcomes of `action` in `state`."""
        trans = _normalised(self.transitions[(state, action)])
        rews = _normalised(self.rewards.get((state, action), ((0.0, 1.0),)))
        return [(s, float(r), ps * pr) for (s, ps), (r, pr) in itertools.product(trans, rews) if ps * pr > 0]


def _normalised(outcomes: Outcomes) -> list[tuple[Any, float]]:
    total = float(sum(w for _, w in outcomes))
    return [(v, float(w) / total) for v, w in outcomes]


def _both(outcomes: Outcomes) -> dict[int, Outcomes]:
    return {0: outcomes, 1: outcomes}


def _build_tables() -> dict[str, MDPTable]:
    to_end: Outcomes = ((END, 1),)
    first_second = {("first", 0): (("first", 1), ("second", 1)), ("first", 1): (("first", 1), ("second", 2)),
                    ("second", 0): (("first", 1), ("second", 1)),
                    ("second", 1): (("first", 2), ("second", 1), (END, 1))}
    return {
        "one_round_dmdp": MDPTable(("start",), {("start", a): to_end for a in (0, 1)}, {("start", 1): ((1.0, 1),)}),
        "two_round_dmdp": MDPTable(
            ("start", "better", "worse"),
            {("start", 0): (("better", 1),), ("start", 1): (("worse", 1),),
             **{(s, a): to_end for s in ("better", "worse") for a in (0, 1)}},
            {("better", 1): ((3.0, 1),), ("worse", 0): ((1.0, 1),), ("worse", 1): ((2.0, 1),)},
        ),
        "one_round_nmdp": MDPTable(
            ("start",), {("start", a): to_end for a in (0, 1)},
            {("start", 0): ((0.0, 1), (5.0, 1)), ("start", 1): ((1.0, 1), (3.0, 1))},
        ),
        "two_round_nmdp": MDPTable(
            ("start", "A", "B"),
            {("start", 0): (("A", 1),), ("start", 1): (("B", 1),), **{(s, a): to_end for s in ("A", "B") for a in (0, 1)}},
            {("A", 0): ((-1.0, 1), (1.0, 1)), ("A", 1): ((0.0, 2), (9.0, 1)),
             ("B", 0): ((0.0, 1), (2.0, 1)), ("B", 1): ((2.0, 1), (3.0, 1))},
        ),
        "multi_round_nmdp": MDPTable(
            ("start", "first", "second"),
            {("start", 0): (("first", 1), ("second", 3)), ("start", 1): (("first", 3), ("second", 1)), **first_second},
            {**{("first", a): ((3.0, 1),) for a in (0, 1)}, **{("second", a): ((5.0, 1),) for a in (0, 1)}},
            discount=0.9,
            default_horizon=20,
        ),
    }


TABLES: dict[str, MDPTable] = _build_tables()


def load_mdp(name: str, **params: Any) -> MDPGame:
    """One of MALib's verification MDPs by id; ``horizon=`` sets the time limit.

    Raises:
        ValueError: an unknown id (with the known ones) or a bad horizon.
    """
    from pbmarl.games.params import parse_name

    base, inline = parse_name(name)
    inline.update(params)
    if base not in TABLES:
        import difflib

        close = difflib.get_close_matches(base, list(TABLES), n=2, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(MDP_PREFIX + c) for c in close)}?" if close else ""
        raise ValueError(f"unknown MDP {base!r}{hint} (known: {', '.join(TABLES)})")
    unknown = set(inline) - {"horizon"}
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for {MDP_PREFIX}{base}; accepted: horizon")
    return MDPGame(base, horizon=inline.get("horizon"))


class MDPGame(Game):
    """One of the verification MDPs as a one-player, turn-based game; see the module doc.

    Attributes:
        discount: the environment's discount (`optimal_value` uses it).
        horizon: the number of actions after which an episode is truncated (None: none).
    """

    spec_kind = "mdp"

    def __init__(self, mdp_id: str, *, horizon: int | None = None) -> None:
        self.mdp_id = mdp_id
        self.table = TABLES[mdp_id]
        if horizon is None:
            horizon = self.table.default_horizon
        if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1):
            raise ValueError(f"horizon must be a positive int or None, got {horizon!r}")
        self.horizon = None if horizon is None else int(horizon)
        if self.horizon is None and self._cyclic():
            raise ValueError(f"{mdp_id!r} can loop forever: give a horizon")
        suffix = f"(horizon={self.horizon})" if self.horizon != self.table.default_horizon else ""
        self.name = MDP_PREFIX + mdp_id + suffix
        self.discount = self.table.discount
        self.states = self.table.states
        self.index = {s: i for i, s in enumerate(self.states)}
        self.num_players = 1
        self.num_actions = 2
        self.observation_shape = (len(self.states),)
        self.turn_based = True
        self.zero_sum = False

    def _cyclic(self) -> bool:
        return any(s != END and self.table.states.index(s) <= self.table.states.index(st)
                   for (st, _), outs in self.table.transitions.items() for s, _ in outs)

    @property
    def enumerable(self) -> bool:
        """Small trees only: a long horizon on a looping MDP grows the tree exponentially."""
        return self.horizon is None or self.horizon <= 6

    def new_initial_state(self) -> MDPState:
        return MDPState(self)

    def observation(self, state: Any, player: int) -> np.ndarray:
        obs = np.zeros(self.observation_shape, dtype=np.float32)
        if state.node is not None:
            obs[self.index[state.node]] = 1.0
        return obs

    def info_key(self, state: Any, player: int) -> str:
        return "/".join(state.history)

    def optimal_value(self) -> float:
        """Expected discounted return of an optimal policy from the start, by exact dynamic programming."""
        return float(self.optimal_values()[0][self.index[self.states[0]]])

    def optimal_values(self) -> np.ndarray:
        """``V[t, s]``: optimal value with ``t`` actions already taken, for every state (backward induction).

        ``V[T] = 0`` with ``T`` the horizon (or, without one, the number of states, which
        bounds an acyclic MDP's episodes); ``V[t, s] = max_a sum p (r + discount V[t+1, s'])``.
        """
        T = self.horizon if self.horizon is not None else len(self.states)
        V = np.zeros((T + 1, len(self.states)))
        for t in range(T - 1, -1, -1):
            for s in self.states:
                V[t, self.index[s]] = max(self.q_value(t, s, a, V) for a in range(self.num_actions))
        return V

    def q_value(self, t: int, state: str, action: int, V: np.ndarray) -> float:
        """``sum p (r + discount V[t+1, s'])`` over the outcomes of `action` in `state`."""
        return sum(p * (r + (0.0 if s == END else self.discount * V[t + 1, self.index[s]]))
                   for s, r, p in self.table.outcomes(state, action))

    def make_env(self) -> MDPEnv:
        """A ``gymnasium.Env`` of this MDP (one-hot observations, Discrete(2) actions)."""
        return MDPEnv(self)

    def flatten_observation(self, raw: Any) -> np.ndarray:
        return np.asarray(raw, dtype=np.float32).reshape(self.observation_shape)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.mdp_id, self.horizon))

    def __repr__(self) -> str:
        return f"MDPGame({self.name!r}: states {list(self.states)}, discount {self.discount}, horizon {self.horizon})"


def _rebuild(mdp_id: str, horizon: int | None) -> MDPGame:
    return MDPGame(mdp_id, horizon=horizon)


class MDPState(OnePlayerState):
    """One episode, following the pyspiel-like state protocol (chance nodes draw outcomes).

    ``terminated`` (the MDP reached its end) and ``truncated`` (the horizon) say how it ended.
    """

    def __init__(self, game: MDPGame) -> None:
        self.game = game
        self.node: str | None = game.states[0]
        self.steps = 0
        self.history: list[str] = [self.node]
        self.pending: list[tuple[str, float, float]] | None = None
        self._reward = 0.0
        self._return = 0.0
        self.terminated = False
        self.truncated = False

    def is_terminal(self) -> bool:
        return self.node is None

    def is_chance_node(self) -> bool:
        return self.pending is not None

    def is_simultaneous_node(self) -> bool:
        return False

    def current_player(self) -> int:
        return TERMINAL if self.node is None else CHANCE if self.pending is not None else 0

    def chance_outcomes(self) -> list[tuple[int, float]]:
        return [(k, p) for k, (_, _, p) in enumerate(self.pending or [])]

    def legal_actions(self, player: int) -> list[int]:
        return [0, 1] if self.node is not None and self.pending is None and player == 0 else []

    def apply_action(self, action: int) -> None:
        if self.node is None:
            raise ValueError(f"the episode of {self.game.name!r} is over")
        if self.pending is not None:
            if not 0 <= int(action) < len(self.pending):
                raise ValueError(f"chance outcome {action} is out of range 0..{len(self.pending) - 1}")
            self._resolve(self.pending[int(action)])
            return
        if int(action) not in (0, 1):
            raise ValueError(f"illegal action {action!r} in {self.game.name!r}: accepted are 0 and 1")
        a = int(action)
        self.history.append(f"a{a}")
        self.steps += 1
        outcomes = self.game.table.outcomes(self.node, a)
        if len(outcomes) == 1:
            self._resolve(outcomes[0])
        else:
            self.pending = outcomes
            self._reward = 0.0

    def _resolve(self, outcome: tuple[str, float, float]) -> None:
        nxt, reward, _ = outcome
        self.pending = None
        self._reward = reward
        self._return += reward
        if nxt == END:
            self.terminated = True
        elif self.game.horizon is not None and self.steps >= self.game.horizon:
            self.truncated = True
        self.node = None if self.terminated or self.truncated else nxt
        self.history.append(nxt)

    def clone(self) -> MDPState:
        copy = MDPState.__new__(MDPState)
        copy.__dict__.update(self.__dict__)
        copy.history = list(self.history)
        copy.pending = list(self.pending) if self.pending is not None else None
        return copy


class MDPEnv(gymnasium.Env):
    """A ``gymnasium.Env`` of an `MDPGame`: one-hot observations, `Discrete(2)` actions."""

    def __init__(self, game: MDPGame) -> None:
        self.game = game
        self.action_space = gymnasium.spaces.Discrete(2)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=game.observation_shape, dtype=np.float32)
        self.state = game.new_initial_state()

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.state = self.game.new_initial_state()
        return self.game.observation(self.state, 0), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        state = self.state
        state.apply_action(int(np.asarray(action).reshape(-1)[0]))
        while state.is_chance_node():
            probs = np.array([p for _, p in state.chance_outcomes()])
            state.apply_action(int(self.np_random.choice(len(probs), p=probs / probs.sum())))
        return (self.game.observation(state, 0), float(state.rewards()[0]), state.terminated, state.truncated, {})

