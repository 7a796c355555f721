"""The runner's engine over game states (any game following the state protocol).

It steps states through `pbmarl.games.stepper`, the same functions `VecEnv` uses.

Each step gathers, for every distinct policy, the observations, legal masks (and
info keys, where the policy needs them) of all instances and seats it acts in,
makes ONE batched `action_probabilities` call, samples, and applies the actions.
Chance nodes are resolved with the runner's rng; finished instances restart at once.
States are never cloned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pbmarl.games import stepper
from pbmarl.games.base import Game
from pbmarl.policies.base import Policy, sample_actions
from pbmarl.rollout.records import EpisodeBook, RunOutput, Seat
from pbmarl.rollout.trajectories import TransitionBuffer


def state_factory(game: Game, rng: np.random.Generator) -> Callable[[], Any]:
    """New initial states; games whose resets are random internally get seeds from `rng`."""
    from pbmarl.games.gym import GymGame
    from pbmarl.games.pettingzoo import PettingZooGame

    if isinstance(game, (PettingZooGame, GymGame)):
        return lambda: game.new_initial_state(seed=int(rng.integers(2**31 - 1)))
    return game.new_initial_state


def run_states(
    game: Game,
    seats: Sequence[Seat],
    book: EpisodeBook,
    rng: np.random.Generator,
    *,
    num_envs: int,
    learner: int | None,
) -> RunOutput:
    """Play `book`'s episodes by stepping state objects; see the module doc."""
    P, A = game.num_players, game.num_actions
    N, active, ret, length, member, episode, last_t = book.slots(num_envs)
    new_state = state_factory(game, rng)
    states: list[Any] = [None] * N
    buf = TransitionBuffer(A, tuple(game.observation_shape)) if learner is not None else None

    uniform = stepper.Uniforms(rng)

    def credit(i: int, rewards: Sequence[float]) -> None:
        if not any(rewards):
            return
        ret[i] += rewards
        if buf is not None and learner is not None and last_t[i] >= 0:
            buf.add_reward(last_t[i:i + 1], np.asarray(rewards, dtype=float)[learner:learner + 1])

    def advance_chance(i: int) -> None:
        stepper.advance_chance(states[i], uniform, lambda rewards: credit(i, rewards))

    def start(which: Sequence[int]) -> None:
        idx = np.asarray(which, dtype=np.int64)
        k = book.may_start(len(idx))
        active[idx[k:]] = False
        for i in idx[k:]:
            states[i] = None
        idx = idx[:k]
        if k == 0:
            return
        ids, members = book.start(k, rng)
        member[idx] = members
        episode[idx] = ids
        ret[idx] = 0.0
        length[idx] = 0
        last_t[idx] = -1
        active[idx] = True
        for i in idx:
            states[i] = new_state()
            advance_chance(int(i))

    start(range(N))
    while True:
        act = np.flatnonzero(active)
        if len(act) == 0:
            break
        term = [int(i) for i in act if states[i].is_terminal()]
        if term:
            book.finish(episode[term], ret[term], length[term])
            if buf is not None:
                buf.end(last_t[term])
            start(term)
            continue
        live: list[int] = act.tolist()
        groups: dict[int, tuple[Policy, list[tuple[int, int]]]] = {}
        for i in live:
            for p in stepper.acting_players(states[i], P):
                pi = seats[p].policies[member[i, p]]
                groups.setdefault(id(pi), (pi, []))[1].append((i, p))
        joint: dict[int, dict[int, int]] = {i: {} for i in live}
        for pi, pairs in groups.values():
            actions = _act(game, pi, pairs, states, rng, buf, learner, episode, last_t)
            for (i, p), a in zip(pairs, actions):
                joint[i][p] = int(a)
        for i in live:
            state = states[i]
            stepper.apply_joint(state, joint[i], P)
            length[i] += 1
            credit(i, state.rewards())
            if not state.is_terminal():
                advance_chance(i)
        book.steps += len(act)
        if buf is not None:
            book.learner_steps = buf.size

    returns, lengths = book.results()
    traj = buf.build(returns, lengths, book.steps, learner) if buf is not None and learner is not None else None
    return RunOutput(returns, lengths, book.steps, traj)


def _act(
    game: Game,
    pi: Policy,
    pairs: list[tuple[int, int]],
    states: list[Any],
    rng: np.random.Generator,
    buf: TransitionBuffer | None,
    learner: int | None,
    episode: np.ndarray,
    last_t: np.ndarray,
) -> np.ndarray:
    """One batched policy call for all (instance, seat) pairs it plays; records the learner's."""
    n = len(pairs)
    shape = tuple(game.observation_shape)
    flat = np.empty((n, int(np.prod(shape))), dtype=np.float32)  # games may hand out flat tensors
    mask = np.zeros((n, game.num_actions), dtype=bool)
    plain_mask = type(game).legal_mask is Game.legal_mask
    for k, (i, p) in enumerate(pairs):
        state = states[i]
        flat[k] = np.ravel(game.observation(state, p))
        if plain_mask:
            mask[k, state.legal_actions(p)] = True
        else:
            mask[k] = game.legal_mask(state, p)
    obs = flat.reshape((n,) + shape)
    keys = [game.info_key(states[i], p) for i, p in pairs] if pi.needs_keys else None
    probs = pi.action_probabilities(obs, mask, keys)
    actions = sample_actions(probs, rng)
    if buf is not None:
        mine = np.fromiter((p == learner for _, p in pairs), dtype=bool, count=n)
        if mine.any():
            idx = np.fromiter((i for i, _ in pairs), dtype=np.int64, count=n)[mine]
            a = actions[mine]
            last_t[idx] = buf.add(episode[idx], obs[mine], mask[mine], a, probs[mine][np.arange(len(a)), a])
    return actions
