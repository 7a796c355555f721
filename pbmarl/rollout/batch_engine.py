"""The array engine: multi-agent collection over a `BatchEnv` (all copies stepped in one call).

It plays exactly what `pbmarl.rollout.parallel_engine.run_parallel` plays -- the same
episode bookkeeping, the same policy calls in the same order (one per group and
drawn member per step, rows instance by instance), the same random draws -- but
keeps observations, rewards and flags as arrays instead of one dict per copy. For a
`BatchEnv` that reproduces the original environment (pbmarl's numpy ports,
``SyncVectorEnv``), the data therefore equal the ``"instances"`` route's for the
same seed, row for row. Environments that restart copies themselves
(`BatchEnv.own_resets`) start those episodes from their own generator (seed -1).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from pbmarl.envs.batch import BatchEnv
from pbmarl.games.base import Game
from pbmarl.rollout.mapping import AgentMapping
from pbmarl.rollout.parallel_engine import (
    ParallelOutput,
    _act,
    _Group,
    _stateful_noise,
    build_groups,
    reset_instance_state,
)
from pbmarl.rollout.records import EpisodeBook, Seat


def run_batched(
    game: Game,
    mapping: AgentMapping,
    seats: Mapping[str, Seat],
    learning: Collection[str],
    rng: np.random.Generator,
    *,
    batch: BatchEnv,
    min_steps: int | None = None,
    episodes: int | None = None,
    whole_episodes: bool = True,
) -> ParallelOutput:
    """Play episodes on the `batch.num_envs` copies of `batch`; see the module doc and `run_parallel`.

    With ``whole_episodes=False`` (and `min_steps`), exactly `min_steps` env steps are
    taken: no episode starts that could not take a step, and those still running at
    the budget are cut there (their last rows flagged truncated, their partial returns kept).
    """
    agents = mapping.agents
    if tuple(batch.agents) != tuple(agents):
        raise ValueError(f"the batched environment has agents {list(batch.agents)}, the mapping {list(agents)}")
    P, N = len(agents), batch.num_envs
    groups = build_groups(game, mapping, seats, learning)
    book = EpisodeBook(P, [grp.seat for grp in groups], episodes, min_steps)
    cut_at = min_steps if (not whole_episodes and min_steps is not None) else None
    noisy = _stateful_noise(groups, N)
    with_state = bool(game.has_global_state) and bool(learning)
    state_width = int(np.prod(game.global_state_shape)) if with_state else None
    idle = [_idle_action(game.action_space(p), N) for p in range(P)]
    active = np.zeros(N, dtype=bool)
    pending = np.zeros(N, dtype=bool)  # own_resets: finished copies the env restarts on the next step
    episode = np.full(N, -1, dtype=np.int64)
    member = np.zeros((N, len(groups)), dtype=np.int64)
    ret = np.zeros((N, P))
    t = np.zeros(N, dtype=np.int64)
    reset_seeds: list[np.ndarray] = []
    cut: list[np.ndarray] = []
    restarted = [False]  # copies were reset since the observations were read

    def start(idx: np.ndarray, reset: bool) -> None:
        k = book.may_start(len(idx))
        if cut_at is not None:
            others = int(active.sum()) - int(active[idx].sum())
            k = min(k, max(0, cut_at - book.steps - others))
        active[idx[k:]] = False
        if k == 0:
            return
        ids, members = book.start(k, rng)
        go = idx[:k]
        if reset:
            seeds = rng.integers(2**31 - 1, size=k)
            batch.reset(go, seeds)
            restarted[0] = True
        else:
            seeds = np.full(k, -1, dtype=np.int64)
        reset_seeds.append(np.asarray(seeds, dtype=np.int64))
        episode[go], member[go], ret[go], t[go], active[go] = ids, members, 0.0, 0, True
        for gi, pi in noisy:
            grp = groups[gi]
            K = len(grp.agents)
            reset_instance_state(pi, (grp.noise_offset + np.repeat(go, K) * K + np.tile(np.arange(K), k)).tolist())

    if batch.own_resets:
        batch.reset(np.arange(N), rng.integers(2**31 - 1, size=1))
        start(np.arange(N), reset=False)
    else:
        start(np.arange(N), reset=True)
    obs, restarted[0] = batch.observations(), False
    while active.any() or pending.any():
        if cut_at is not None and active.sum() >= cut_at - book.steps:  # the budget ends within this step
            pending[:] = False
            stop = np.flatnonzero(active)[max(0, cut_at - book.steps):]
            book.finish(episode[stop], ret[stop], t[stop])
            cut.append(episode[stop].copy())
            active[stop] = False
            if not active.any():
                break
        if restarted[0]:
            obs, restarted[0] = batch.observations(), False
        live = np.flatnonzero(active)
        actions = [a.copy() for a in idle]
        before = batch.state() if with_state and len(live) else None
        records: list[tuple[_Group, np.ndarray]] = []
        for gi, grp in enumerate(groups):
            single = len(grp.seat.policies) == 1
            drawn = member[live, gi]
            for m in [0] if single else np.unique(drawn).tolist():
                inst = live if single else live[drawn == m]
                x, mask, index = _rows(grp, obs, inst)
                K = len(grp.agents)
                ids = grp.noise_offset + np.repeat(inst, K) * K + index
                acts, log_prob = _act(grp, grp.seat.policies[m], x, mask, rng, ids)
                acts = acts.reshape((len(inst), K) + acts.shape[1:])
                for k, seat in enumerate(grp.seats):
                    actions[seat][inst] = acts[:, k]
                if grp.rows is not None:
                    grp.rows.add(episode=np.repeat(episode[inst], K), agent=np.tile(np.asarray(grp.seats), len(inst)),
                                 time=np.repeat(t[inst], K), obs=x, legal_mask=mask, action=acts.reshape((len(x),) + acts.shape[2:]),
                                 log_prob=log_prob, global_state=np.repeat(before[inst], K, axis=0) if before is not None else None)
                    records.append((grp, inst))
        rewards, term, trunc = batch.step(actions)
        obs = batch.observations()
        trunc = trunc & ~term
        ret[live] += rewards[live]
        t[live] += 1
        after = batch.state() if with_state and records else None
        for grp, inst in records:
            assert grp.rows is not None
            K = len(grp.agents)
            nxt, nmask, _ = _rows(grp, obs, inst)
            tm, tr = np.repeat(term[inst], K), np.repeat(trunc[inst], K)
            nxt[tm] = 0.0
            nmask[tm | tr] = False
            grp.rows.add(reward=rewards[inst][:, list(grp.seats)].reshape(-1), terminated=tm, truncated=tr,
                         next_obs=nxt, next_legal_mask=nmask,
                         next_global_state=np.repeat(after[inst], K, axis=0) if after is not None else None)
        book.steps += len(live)
        book.learner_steps = book.steps
        fresh = np.flatnonzero(pending)
        pending[:] = False
        if len(fresh):
            start(fresh, reset=False)
        over = live[(term | trunc)[live]]
        if len(over):
            book.finish(episode[over], ret[over], t[over])
            active[over] = False
            if batch.own_resets:
                pending[over] = book.may_start(len(over)) > 0
            else:
                active[over] = True  # still counted as running until start() decides
                start(over, reset=True)

    returns, lengths = book.results()
    seeds = np.concatenate(reset_seeds) if reset_seeds else np.zeros(0, dtype=np.int64)
    cut_ids = np.concatenate(cut) if cut else None
    trajectories = {grp.name: grp.rows.build(grp, mapping.group_game(grp.name).observation_shape[0], returns, lengths,
                                             book.steps, state_width, seeds, cut_ids)
                    for grp in groups if grp.rows is not None}
    return ParallelOutput(returns, lengths, book.steps, trajectories, seeds)


def _rows(grp: _Group, obs: list[np.ndarray], inst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The group's transformed rows for copies `inst`, instance by instance (agents in group order), masks, agent index."""
    K, n = len(grp.agents), len(inst)
    if K == 1 and not grp.transforms and obs[grp.seats[0]].shape[1] == grp.agent_width:  # one agent: its rows as they are
        return obs[grp.seats[0]][inst], np.ones((n, grp.num_actions), dtype=bool), np.zeros(n, dtype=np.int64)
    x = np.zeros((n, K, grp.agent_width), dtype=np.float32)
    for k, seat in enumerate(grp.seats):
        o = obs[seat][inst]
        x[:, k, : o.shape[1]] = o
    x2 = x.reshape(n * K, grp.agent_width)
    index = np.tile(np.arange(K), n)
    mask = np.ones((n * K, grp.num_actions), dtype=bool)
    if grp.discrete:
        for k in range(K):
            mask[k::K, grp.agent_actions[k]:] = False  # padded actions of a smaller agent are illegal
    for transform in grp.transforms:
        x2 = transform(x2, index)
    return x2, mask, index


def _idle_action(space: object, n: int) -> np.ndarray:
    """Actions for copies that do not play this step (ignored by the environment's restart, or unused)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return np.full(n, int(space.start), dtype=np.int64)
    assert isinstance(space, spaces.Box)
    mid = np.clip(np.zeros(space.shape), space.low, space.high).astype(np.float32)
    return np.broadcast_to(mid, (n,) + tuple(space.shape)).copy()
