"""The runner's engine for agents that act together: PettingZoo Parallel environments and
Gymnasium environments (one agent), many instances stepped in this process.

Agents are dispatched by an `AgentMapping`. Each step, for every group and every
member of its seat drawn in the running episodes, the engine gathers the rows of
that group's live agents in all instances, applies the group's observation
transforms (padding, agent id), makes ONE policy call for them, and then steps
each instance with its joint action. Finished instances restart at once (new
reset seeds from the caller's rng). Every learning group's rows are recorded with
termination and truncation apart and, where the game has one, the global state.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbmarl.envs.instances import EnvInstance, make_instance
from pbmarl.games.base import Game
from pbmarl.games.spaces import flatten_observation
from pbmarl.policies.base import Policy, sample_actions
from pbmarl.policies.stateful import StatefulPolicy
from pbmarl.rollout.mapping import AgentMapping, Transform
from pbmarl.rollout.records import EpisodeBook, Seat
from pbmarl.rollout.trajectories import Trajectories


@dataclass(frozen=True, eq=False)
class ParallelOutput:
    """What `run_parallel` produced: episodes in the order they were started, and each learning group's rows."""

    returns: np.ndarray  # [E, P]
    lengths: np.ndarray  # [E] env steps
    steps: int
    groups: dict[str, Trajectories]
    seeds: np.ndarray  # [E] the reset seed of each episode


@dataclass
class _Group:
    name: str
    agents: tuple[str, ...]
    seats: tuple[int, ...]
    seat: Seat
    space: Any
    transforms: tuple[Transform, ...]
    discrete: bool
    num_actions: int
    agent_actions: tuple[int, ...]
    agent_width: int
    rows: _Rows | None
    noise_offset: int = 0  # this group's first noise-instance id (stateful exploration noise)


class _Rows:
    """A learning group's rows as they are made; `build` orders them by (episode, agent, time)."""

    KEYS = ("episode", "agent", "time", "obs", "legal_mask", "action", "log_prob", "reward", "terminated",
            "truncated", "next_obs", "next_legal_mask", "global_state", "next_global_state")

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in self.KEYS}

    def add(self, **arrays: np.ndarray | None) -> None:
        for k, v in arrays.items():
            if v is not None:
                self.parts[k].append(v)

    def build(self, group: _Group, obs_width: int, returns: np.ndarray, lengths: np.ndarray, steps: int,
              state_width: int | None, seeds: np.ndarray, cut: np.ndarray | None = None) -> Trajectories:
        """`cut`: ids of episodes stopped at the step budget; their last rows become truncated."""
        cat: dict[str, np.ndarray] = {}
        empty = {"obs": (0, obs_width), "next_obs": (0, obs_width), "legal_mask": (0, group.num_actions),
                 "next_legal_mask": (0, group.num_actions),
                 "action": (0,) if group.discrete else (0, int(np.prod(group.space.shape)))}
        for k in self.KEYS:
            if k in ("global_state", "next_global_state") and state_width is None:
                continue
            parts = self.parts[k]
            if parts:
                cat[k] = np.concatenate(parts)
            else:
                shape: tuple[int, ...] = empty.get(k, (0, state_width or 0) if k.endswith("global_state") else (0,))
                cat[k] = np.zeros(shape, dtype=bool if "mask" in k or k in ("terminated", "truncated") else float)
        order = np.lexsort((cat["time"], cat["agent"], cat["episode"]))
        out = {k: v[order] for k, v in cat.items()}
        if cut is not None and len(cut) and len(out["episode"]):
            last = np.isin(out["episode"], cut) & (out["time"] == np.asarray(lengths)[out["episode"]] - 1)
            out["truncated"] = out["truncated"] | (last & ~out["terminated"])  # bootstrap from next_obs there
            out["next_legal_mask"] = out["next_legal_mask"] & ~last[:, None]
        log_prob = out["log_prob"].astype(float)
        return Trajectories(
            obs=out["obs"].astype(np.float32), legal_mask=out["legal_mask"].astype(bool),
            action=out["action"].astype(np.int64 if group.discrete else np.float32),
            action_prob=np.exp(log_prob), reward=out["reward"].astype(float),
            done=out["terminated"].astype(bool) | out["truncated"].astype(bool),
            next_obs=out["next_obs"].astype(np.float32), next_legal_mask=out["next_legal_mask"].astype(bool),
            episode=out["episode"].astype(np.int64), episode_returns=np.asarray(returns, dtype=float),
            episode_lengths=np.asarray(lengths, dtype=np.int64), steps=int(steps), player=int(group.seats[0]),
            terminated=out["terminated"].astype(bool), truncated=out["truncated"].astype(bool), log_prob=log_prob,
            agent=out["agent"].astype(np.int64), time=out["time"].astype(np.int64),
            global_state=out["global_state"].astype(np.float32) if state_width is not None else None,
            next_global_state=out["next_global_state"].astype(np.float32) if state_width is not None else None,
            group=group.name, episode_seeds=seeds,
        )


def run_parallel(
    game: Game,
    mapping: AgentMapping,
    seats: Mapping[str, Seat],
    learning: Collection[str],
    rng: np.random.Generator,
    *,
    num_envs: int,
    min_steps: int | None = None,
    episodes: int | None = None,
    instances: list[EnvInstance] | None = None,
    whole_episodes: bool = True,
    deterministic: bool = False,
) -> ParallelOutput:
    """Play episodes with `num_envs` instances stepped together; see the module doc.

    Give `min_steps` (start episodes until that many env steps were taken, then let
    running ones finish) or `episodes`. With ``whole_episodes=False`` and `min_steps`,
    exactly `min_steps` env steps: no episode starts that could not take a step, and
    those running at the budget are cut there (last rows truncated, partial returns
    kept). `seats` has one `Seat` per group of `mapping`.
    `instances` is a list of environment instances to reuse between calls (grown as
    needed); every episode starts with a reset from a seed drawn from `rng`.
    ``deterministic=True`` plays every policy's most likely legal action (Box policies: their
    noise-free action) instead of sampling: for evaluation, not for learning groups' rows.
    """
    agents = mapping.agents
    P = len(agents)
    groups = build_groups(game, mapping, seats, learning)
    book = EpisodeBook(P, [grp.seat for grp in groups], episodes, min_steps)
    N = int(max(1, min(num_envs, episodes if episodes is not None else min_steps or 1)))
    noisy = _stateful_noise(groups, N)
    envs: list[EnvInstance] = instances if instances is not None else []
    envs.extend(make_instance(game) for _ in range(N - len(envs)))
    raw_spaces = envs[0].observation_spaces
    with_state = bool(game.has_global_state) and bool(learning)
    state_width = int(np.prod(game.global_state_shape)) if with_state else None
    obs: list[dict[str, Any]] = [{} for _ in range(N)]
    infos: list[dict[str, Any]] = [{} for _ in range(N)]
    active = np.zeros(N, dtype=bool)
    episode = np.full(N, -1, dtype=np.int64)
    member = np.zeros((N, len(groups)), dtype=np.int64)
    ret = np.zeros((N, P))
    t = np.zeros(N, dtype=np.int64)
    reset_seeds: list[int] = []
    gstate: list[np.ndarray | None] = [None] * N  # each instance's global state now (where the game has one)

    cut_at = min_steps if (not whole_episodes and min_steps is not None) else None
    cut: list[int] = []

    def start(idx: list[int]) -> None:
        k = book.may_start(len(idx))
        if cut_at is not None:
            others = int(active.sum()) - int(active[idx].sum())
            k = min(k, max(0, cut_at - book.steps - others))
        for i in idx[k:]:
            active[i] = False
        if k == 0:
            return
        ids, members = book.start(k, rng)
        seeds = rng.integers(2**31 - 1, size=k)
        reset_seeds.extend(seeds.tolist())
        for j, i in enumerate(idx[:k]):
            episode[i], member[i], ret[i], t[i], active[i] = ids[j], members[j], 0.0, 0, True
            obs[i], infos[i] = envs[i].reset(int(seeds[j]))
            if with_state:
                gstate[i] = envs[i].state()
            for gi, pi in noisy:
                grp = groups[gi]
                reset_instance_state(pi, [grp.noise_offset + i * len(grp.agents) + k for k in range(len(grp.agents))])

    start(list(range(N)))
    while active.any():
        if cut_at is not None and active.sum() > cut_at - book.steps:  # the budget ends within this step
            stop = np.flatnonzero(active)[max(0, cut_at - book.steps):]
            book.finish(episode[stop], ret[stop], t[stop])
            cut.extend(episode[stop].tolist())
            active[stop] = False
            if not active.any():
                break
        live_idx = np.flatnonzero(active).tolist()
        live = {i: envs[i].live_agents() for i in live_idx}
        joint: dict[int, dict[str, Any]] = {i: {} for i in live_idx}
        state_before = {i: gstate[i] for i in live_idx}
        pending: list[tuple[_Group, list[int], list[int]]] = []
        for gi, grp in enumerate(groups):
            drawn = member[live_idx, gi].tolist()
            for m in sorted(set(drawn)):
                pairs = [(i, k) for i, d in zip(live_idx, drawn) if d == m
                         for k, a in enumerate(grp.agents) if a in live[i]]
                if not pairs:
                    continue
                inst = [i for i, _ in pairs]
                index = np.asarray([k for _, k in pairs], dtype=np.int64)
                x, mask = _group_rows(grp, raw_spaces, obs, infos, pairs)
                ids = grp.noise_offset + np.asarray(inst) * len(grp.agents) + index
                actions, log_prob = _act(grp, grp.seat.policies[m], x, mask, rng, ids, deterministic)
                for (i, k), a in zip(pairs, actions):
                    joint[i][grp.agents[k]] = int(a) if grp.discrete else a
                if grp.rows is not None:
                    grp.rows.add(episode=episode[inst], agent=np.asarray([grp.seats[k] for _, k in pairs]),
                                 time=t[inst], obs=x, legal_mask=mask, action=actions, log_prob=log_prob,
                                 global_state=np.stack([state_before[i] for i in inst]) if with_state else None)
                    pending.append((grp, inst, index.tolist()))
        rewards, terms, truncs = {}, {}, {}
        for i in live_idx:
            obs[i], rewards[i], terms[i], truncs[i], infos[i] = envs[i].step(joint[i])
        ret[live_idx] += [[float(rewards[i].get(a, 0.0)) for a in agents] for i in live_idx]
        t[live_idx] += 1
        if with_state:
            for i in live_idx:
                gstate[i] = envs[i].state()  # after this step = before the next one
        state_after = {i: gstate[i] for i in live_idx}
        for grp, inst, where in pending:
            assert grp.rows is not None
            pairs = list(zip(inst, where))
            names = [grp.agents[k] for k in where]
            term = np.asarray([bool(terms[i].get(a, False)) for i, a in zip(inst, names)])
            trunc = np.asarray([bool(truncs[i].get(a, False)) for i, a in zip(inst, names)]) & ~term
            nxt, nmask = _group_rows(grp, raw_spaces, obs, infos, pairs)
            nxt[term] = 0.0
            nmask[term | trunc] = False
            grp.rows.add(reward=np.asarray([float(rewards[i].get(a, 0.0)) for i, a in zip(inst, names)]),
                         terminated=term, truncated=trunc, next_obs=nxt, next_legal_mask=nmask,
                         next_global_state=np.stack([state_after[i] for i in inst]) if with_state else None)
        book.steps += len(live_idx)
        book.learner_steps = book.steps
        over = [i for i in live_idx if not envs[i].live_agents()]
        if over:
            book.finish(episode[over], ret[over], t[over])
            start(over)

    returns, lengths = book.results()
    seeds = np.asarray(reset_seeds, dtype=np.int64)  # episode ids are 0, 1, ... in start order
    trajectories = {grp.name: grp.rows.build(grp, mapping.group_game(grp.name).observation_shape[0], returns, lengths,
                                             book.steps, state_width, seeds, np.asarray(cut, dtype=np.int64))
                    for grp in groups if grp.rows is not None}
    return ParallelOutput(returns, lengths, book.steps, trajectories, seeds)


def build_groups(game: Game, mapping: AgentMapping, seats: Mapping[str, Seat], learning: Collection[str]) -> list[_Group]:
    """One `_Group` per group of `mapping` (rows recorded for the `learning` ones)."""
    from gymnasium import spaces

    groups = []
    for g in mapping.groups:
        gg = mapping.group_game(g)
        space = gg.action_space(0)
        discrete = isinstance(space, spaces.Discrete)
        counts = tuple(int(game.action_space(p).n) if discrete else 0 for p in mapping.seats_of(g))
        groups.append(_Group(g, mapping.agents_of(g), mapping.seats_of(g), seats[g], space, gg.transforms,
                             discrete, gg.num_actions, counts, gg.agent_width, _Rows() if g in learning else None))
    return groups


def reset_instance_state(pi: Any, ids: list[int]) -> None:
    """Fresh per-instance state of `pi` for noise-instance ids `ids` at an episode start (noise, recurrent state)."""
    if isinstance(pi, StatefulPolicy):
        pi.reset_state(ids)
    else:
        pi.reset_noise(ids)


def _observe(space: Any, raws: list[Any], infos: list[Any], *, num_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat float32 observations ``[B, d]`` and masks ``[B, num_actions]`` (all legal unless the env gives one)."""
    if all(type(r) is np.ndarray for r in raws) and not any(isinstance(f, dict) and "action_mask" in f for f in infos):
        try:  # the common case: plain arrays of the space's size, no masks
            stacked: np.ndarray | None = np.stack(raws).reshape(len(raws), -1)
        except ValueError:
            stacked = None
        if stacked is not None and stacked.shape[1] == int(np.prod(space.shape)):
            return stacked.astype(np.float32, copy=False), np.ones((len(raws), num_actions), dtype=bool)
    masks = np.ones((len(raws), num_actions), dtype=bool)
    flat = []
    for j, (raw, info) in enumerate(zip(raws, infos)):
        mask = None
        if isinstance(raw, dict) and "observation" in raw:
            mask, raw = raw.get("action_mask"), raw["observation"]
        elif isinstance(info, dict):
            mask = info.get("action_mask")
        if raw is None:
            flat.append(np.zeros(int(np.prod(space.shape)), dtype=np.float32))
        else:
            flat.append(flatten_observation(space, raw).ravel())
        if mask is not None and num_actions:
            m = np.asarray(mask, dtype=bool).ravel()
            masks[j] = False
            masks[j, : len(m)] = m
    return np.stack(flat).astype(np.float32, copy=False), masks


def _group_rows(grp: _Group, raw_spaces: Mapping[str, Any], obs: list[dict[str, Any]], infos: list[dict[str, Any]],
                pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The transformed observations and masks of `pairs` (instance, agent index in group)."""
    x = np.zeros((len(pairs), grp.agent_width), dtype=np.float32)
    mask = np.zeros((len(pairs), grp.num_actions), dtype=bool)
    index = np.asarray([k for _, k in pairs], dtype=np.int64)
    for k, agent in enumerate(grp.agents):
        sel = np.flatnonzero(index == k)
        if len(sel) == 0:
            continue
        inst = [pairs[j][0] for j in sel]
        rows, masks = _observe(raw_spaces[agent], [obs[i].get(agent) for i in inst], [infos[i].get(agent) for i in inst],
                               num_actions=grp.num_actions)
        x[sel, : rows.shape[1]] = rows
        mask[sel] = masks
        if grp.discrete:
            mask[sel, grp.agent_actions[k]:] = False  # padded actions of a smaller agent are illegal
    for transform in grp.transforms:
        x = transform(x, index)
    return x, mask


def _stateful_noise(groups: list[_Group], num_envs: int) -> list[tuple[int, Any]]:
    """(group index, policy) for Box policies with per-instance noise, all reset; gives each group its id range."""
    out: list[tuple[int, Any]] = []
    offset = 0
    for gi, grp in enumerate(groups):
        grp.noise_offset = offset
        offset += num_envs * len(grp.agents)
        for pi in grp.seat.policies:
            if isinstance(pi, StatefulPolicy):  # a recurrent policy's hidden state: the same bookkeeping as noise
                pi.reset_state(None)
                out.append((gi, pi))
        if grp.discrete:
            continue
        from pbmarl.policies.continuous import DeterministicPolicy

        for pi in grp.seat.policies:
            if isinstance(pi, DeterministicPolicy):
                pi.reset_noise(None)  # each call starts afresh: the same data on any worker
                out.append((gi, pi))
    return out


def _act(grp: _Group, pi: Policy, x: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
         ids: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One policy call for a group's rows: actions and their log-probabilities (`ids`: rows' noise instances;
    `deterministic`: the most likely legal action, ties to the lowest index, as `Policy.act` does)."""
    if grp.discrete:
        probs = pi.step_probabilities(x, mask, ids) if isinstance(pi, StatefulPolicy) else pi.action_probabilities(x, mask)
        actions = np.argmax(probs, axis=1).astype(np.int64) if deterministic else sample_actions(probs, rng)
        with np.errstate(divide="ignore"):
            return actions, np.log(probs[np.arange(len(actions)), actions])
    from pbmarl.policies.continuous import DeterministicPolicy

    if isinstance(pi, DeterministicPolicy):
        record = pi.act(x, mask, rng=rng, env_ids=ids, deterministic=deterministic)
    else:
        record = pi.act(x, mask, rng=rng, deterministic=deterministic)
    actions = np.asarray(record.action, dtype=np.float32).reshape(len(x), -1)
    low, high = grp.space.low.reshape(1, -1), grp.space.high.reshape(1, -1)
    tol = 1e-6 * (1.0 + np.abs(high - low))
    bad = ~np.isfinite(actions) | (actions < low - tol) | (actions > high + tol)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"{pi!r} (group {grp.name!r}) returned action {actions[row].tolist()}, outside {grp.space}: "
                         f"accepted are low {grp.space.low.tolist()} to high {grp.space.high.tolist()}")
    return np.clip(actions, low, high), np.asarray(record.log_prob, dtype=float).reshape(len(x))
