"""PPO, DQN and MAPPO on the parameter server learn: BSP PPO and BSP MAPPO are the learner on the combined
batch, update by update, and two workers (BSP or ASP) lift CartPole far above random play within seconds.

Before, a worker returned one gradient per batch and the server took one step where PPO takes
``epochs * minibatches`` and DQN ``updates_per_round``: two workers stayed near a random policy's
return (about 22 on CartPole). MARL's jobs had the same fault (MAPPO one epoch of one minibatch a batch).
"""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.algorithms.teams.rounds import Team
from pbmarl.distributed.server import get_vector
from pbmarl.distributed.workers import GradientWorker
from pbmarl.learners.control.rounds import get_state, set_state
from pbmarl.rollout.trajectories import concat_trajectories

SMALL = {"steps_per_round": 48, "num_envs": 4, "hidden": (16,)}
#: CartPole settings that learn in seconds (random play returns about 22)
QUICK = {"steps_per_round": 512, "num_envs": 4, "hidden": (32,), "anneal_lr": False}


@pytest.fixture(scope="module")
def cartpole():
    return pb.load_game("gym:CartPole-v1")


def _params(learner):
    return list(learner.actor.net.parameters()) + list(learner.critic.parameters())


def _return(record) -> float:
    value = getattr(record, "mean_return", None)
    return float(record.episode_return if value is None else value)


def test_bsp_ppo_is_the_learner_on_the_combined_batch_update_by_update(cartpole) -> None:
    """Two steps of 2 workers, 2 epochs of 3 minibatches: each server update is PPO's own minibatch step on
    the union of the workers' shards, and the second step's data was collected with the updated weights."""
    n, epochs, parts = 2, 2, 3
    options = {"norm_adv": False, "anneal_lr": False, "seed": 3, **SMALL}
    learner = pb.PPO(cartpole, workers=n, sync="bsp", epochs=epochs, minibatches=parts, **options)
    learner.start(0, [None])
    single = pb.PPO(cartpole, epochs=1, minibatches=1, **options)  # one `_update` call: one step on what it is given
    single.start(0, [None])
    np.testing.assert_array_equal(get_vector(_params(single)), get_vector(_params(learner)))  # same initial weights
    fresh = GradientWorker(cartpole, pb.PPO, learner.config, 0, [None])  # collects what a worker collects
    for _ in range(2):
        before = get_vector(_params(single))
        learner.step()
        results = learner._rounds.last
        assert len(results) == n * epochs * parts and all(r.plan == epochs * parts for r in results)
        collected = results[:n]  # the first round: every worker collects its batch, at the same weights
        assert all(len(r.traj) > 0 for r in collected) and not any(len(r.traj) for r in results[n:])
        for r in collected:  # with the weights the server had when the step began, not stale or initial ones
            np.testing.assert_array_equal(fresh.compute(before, 0, r.seeds).traj.action, r.traj.action)
            fresh.plan = []
        batch = single._prepare(concat_trajectories([r.traj for r in collected]))
        offsets = np.cumsum([0] + [len(r.traj) for r in collected])
        workers = learner._rounds.executor.inner.workers
        plans = [workers[w]._plan(len(r.traj), np.random.default_rng(r.seeds[0])) for w, r in enumerate(collected)]
        for k in range(epochs * parts):
            shards = [plans[w][k][0] for w in range(n)]
            assert [r.count for r in results[k * n:(k + 1) * n]] == [len(s) for s in shards]
            single._update(batch.take(np.concatenate([s + o for s, o in zip(shards, offsets)])), single.task)
        np.testing.assert_allclose(get_vector(_params(learner)), get_vector(_params(single)), atol=1e-6)
    assert learner.staleness == [0] * (2 * n * epochs * parts)
    assert learner.task.learner_steps == sum(e[3] for e in learner._rounds.log)  # each batch counted once
    learner.finish()


def test_ppo_under_bap_keeps_its_bound_and_counts_every_batch_once(cartpole) -> None:
    k = 1
    learner = pb.PPO(cartpole, workers=3, sync="bap", staleness=k, epochs=2, minibatches=2, seed=0, **SMALL)
    learner.start(0, [None])
    for _ in range(3):
        learner.step()
    rounds, task = learner._rounds, learner.task
    assert len(rounds.log) == 3 * 3 * 4  # a step consumes `workers` batches' worth of gradients (4 a batch)
    assert 0 < max(learner.staleness) <= k
    assert task.learner_steps == sum(e[3] for e in rounds.log)
    assert task.env_steps == sum(e[4] for e in rounds.log)
    learner.finish()


@pytest.mark.parametrize("sync", ["bsp", "asp"])
def test_two_ppo_workers_learn_cartpole_beyond_random_play(cartpole, sync) -> None:
    """A random policy returns about 22; before the fix two workers were still under 60 after 30k env steps."""
    learner = pb.PPO(cartpole, workers=2, sync=sync, seed=0, **QUICK)
    learner.start(0, [None])
    best, task = 0.0, learner.task
    while best <= 100 and task.env_steps < 30_000:
        best = max(best, _return(learner.step()))
    learner.finish()
    assert best > 100, f"{sync}: best mean return {best:.1f} after {task.env_steps} env steps"


@pytest.mark.parametrize("sync", ["bsp", "asp"])
def test_two_gorila_dqn_workers_learn_cartpole_beyond_random_play(cartpole, sync) -> None:
    """Before the fix (one gradient a batch) two workers stayed under 40 after 30k env steps."""
    learner = pb.DQN(cartpole, workers=2, sync=sync, seed=0, steps_per_round=256, num_envs=4, budget=10_000)
    learner.start(0, [None])
    best, task = 0.0, learner.task
    while best <= 100 and task.env_steps < 30_000:
        best = max(best, _return(learner.step()))
    learner.finish()
    assert best > 100, f"{sync}: best mean return {best:.1f} after {task.env_steps} env steps"


def test_bsp_mappo_is_the_learner_on_the_combined_batch_update_by_update() -> None:
    """Two steps of 2 workers, 2 epochs of 3 minibatches, without advantage or value normalisation and clip:
    each server update is MAPPO's own minibatch step on the union of the workers' shards (before: one update a step,
    one epoch of one minibatch)."""
    game = pb.load_game("pettingzoo:simple_spread_v3", N=2, max_cycles=5)
    n, epochs, parts = 2, 2, 3
    options = {"seed": 3, "steps_per_round": 40, "hidden": (16,), "epochs": epochs, "minibatches": parts,
               "norm_adv": False, "value_norm": False, "max_grad_norm": 1e6}
    run = pb.MARL(game, {"team": pb.MAPPO(workers=n, sync="bsp", **options)}, seed=0, num_envs=4)
    single = pb.MAPPO(**options)
    pb.MARL(game, {"team": single}, seed=0, num_envs=4)  # binds it: the same networks, the same initial weights
    team, alone = Team(run.learners), Team({"team": single})
    np.testing.assert_array_equal(get_state(team), get_state(alone))
    for _ in range(2):
        state, env_steps = get_state(team), run.env_steps
        run.step()
        results = run._rounds.last
        assert len(results) == n * epochs * parts and all(r.plan == epochs * parts for r in results)
        assert all(r.env_steps > 0 for r in results[:n]) and not any(r.env_steps for r in results[n:])
        rows, plans = [], []
        for w, r in enumerate(results[:n]):  # each worker's batch, collected again at the weights of the step's start
            worker = run._rounds.executor.inner.workers[w]
            set_state(worker.team, state)
            worker._reseed(r.seeds, env_steps)
            rows.append(worker.run._collect()["team"])
            order = np.random.default_rng([r.seeds[0], 0])
            plans.append([p for _ in range(epochs) for p in np.array_split(order.permutation(len(rows[-1])), parts)])
        data = single.round_data(concat_trajectories(rows), env_steps)
        offsets = np.cumsum([0] + [len(r) for r in rows])
        for k in range(epochs * parts):
            shards = [plans[w][k] for w in range(n)]
            assert [r.grad.counts["team"] for r in results[k * n:(k + 1) * n]] == [len(s) for s in shards]
            single.minibatch_step(data, np.concatenate([s + o for s, o in zip(shards, offsets)]))
        np.testing.assert_allclose(get_state(team), get_state(alone), atol=1e-6)
    assert run.staleness == [0] * (2 * n * epochs * parts)
    run.close()
