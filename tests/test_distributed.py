"""Parameter-server modes: BSP equals one big batch, BAP's staleness bound, ASP's recorded staleness."""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.distributed.server import ParameterServer, get_vector
from pbmarl.distributed.workers import GradientWorker

SMALL = {"steps_per_round": 48, "num_envs": 4, "hidden": (16,)}


@pytest.fixture(scope="module")
def cartpole():
    return pb.load_game("gym:CartPole-v1")


def _params(learner):
    return list(learner.actor.net.parameters()) + list(learner.critic.parameters())


@pytest.mark.parametrize("cls", ["A2C"])  # PPO's epochs of minibatches: tests/test_distributed_learning.py
def test_bsp_with_n_workers_equals_one_worker_with_n_times_the_batch(cartpole, cls) -> None:
    n = 3
    learner = getattr(pb, cls)(cartpole, workers=n, sync="bsp", norm_adv=False, anneal_lr=False, seed=3, **SMALL)
    learner.start(0, [None])
    w0 = get_vector(_params(learner))
    learner.step()
    seeds = [s for r in learner._rounds.last for s in r.seeds]
    assert len(set(seeds)) == n

    single = getattr(pb, cls)(cartpole, norm_adv=False, anneal_lr=False, seed=3, **SMALL)
    single.start(0, [None])
    np.testing.assert_array_equal(get_vector(_params(single)), w0)  # same initial weights
    worker = GradientWorker(cartpole, type(single), single.config, 0, [None])
    big = worker.compute(w0, 0, seeds)  # one worker, all n seeds' data in one batch
    assert big.count == sum(r.count for r in learner._rounds.last)
    counts = np.array([r.count for r in learner._rounds.last], dtype=float)
    mean = np.tensordot(counts / counts.sum(), np.stack([r.grad for r in learner._rounds.last]), axes=1)
    np.testing.assert_allclose(mean, big.grad, rtol=1e-6, atol=1e-6)  # float32 nets: relative 1e-6
    ParameterServer(_params(single), single.optimizer, max_grad_norm=single.config.max_grad_norm).apply(
        [big.grad], [big.count], [0])
    np.testing.assert_allclose(get_vector(_params(learner)), get_vector(_params(single)), atol=1e-6)
    assert learner.staleness == [0, 0, 0] and list(learner.history["max_staleness"]) == [0]


DQN_SMALL = {**SMALL, "learning_starts": 0, "batch_size": 32, "updates_per_round": 1}  # one gradient a batch


def test_dqn_bsp_averages_the_td_gradients_of_the_minibatches_the_learner_draws_from_its_replay(cartpole) -> None:
    """Gorila with a global replay: workers fill the learner's replay, and BSP's update is the gradient of one
    loss over the minibatches the learner drew from it and sent with the jobs."""
    import torch

    from pbmarl.distributed.workers import ReplayGradientWorker

    n = 3
    learner = pb.DQN(cartpole, workers=n, sync="bsp", seed=3, **DQN_SMALL)
    learner.start(0, [None])
    w0 = get_vector(list(learner.q_net.parameters()))
    learner.step()  # the replay was empty when these jobs went out: they only collected
    first = learner._rounds.last
    assert all(r.grad is None for r in first) and learner.history["updates"].iloc[-1] == 0
    assert len(learner.replay) == sum(len(r.traj) for r in first) == learner.history["buffer"].iloc[-1]
    np.testing.assert_array_equal(get_vector(list(learner.q_net.parameters())), w0)
    learner.step()
    workers = learner._rounds.executor.inner.workers
    assert all(isinstance(w, ReplayGradientWorker) and len(w.learner.replay) == 0 for w in workers)  # none of their own
    results = learner._rounds.last
    assert all(r.count == 32 and r.td is not None for r in results)
    assert len(learner.replay) == sum(len(r.traj) for r in first + results)
    # the rows each job's TD errors name are the minibatch it took the gradient of: one loss over all of them
    single = pb.DQN(cartpole, seed=3, **DQN_SMALL)
    single.start(0, [None])
    np.testing.assert_array_equal(get_vector(list(single.q_net.parameters())), w0)
    batches = [learner.replay._gather(r.td[0], np.ones(len(r.td[0]))) for r in results]
    losses = [single._td_loss(b)[0] for b in batches]
    single.optimizer.zero_grad()
    torch.stack(losses).mean().backward()  # equal batch sizes: the mean over all n * 32 samples
    big = torch.cat([p.grad.reshape(-1) for p in single.q_net.parameters()]).numpy()
    mean = np.mean([r.grad for r in results], axis=0)
    np.testing.assert_allclose(mean, big, rtol=1e-6, atol=1e-6)
    ParameterServer(list(single.q_net.parameters()), single.optimizer, max_grad_norm=single.config.max_grad_norm
                    ).apply([big], [n * 32], [0])
    np.testing.assert_allclose(get_vector(list(learner.q_net.parameters())),
                               get_vector(list(single.q_net.parameters())), atol=1e-6)
    assert learner.staleness == [0] * n and learner.history["updates"].iloc[-1] == 1
    learner.finish()


def test_dqn_workers_only_collect_before_learning_starts_and_the_target_follows_the_server(cartpole) -> None:
    learner = pb.DQN(cartpole, workers=2, sync="bsp", seed=1, target_update_interval=2,
                     **{**DQN_SMALL, "learning_starts": 200})
    weights, targets = [], []
    for _ in range(6):
        record = learner.step()
        weights.append(get_vector(list(learner.q_net.parameters())))
        targets.append(get_vector(list(learner.target_net.parameters())))
    updates = list(learner.history["updates"])
    first = next(i for i, u in enumerate(updates) if u > 0)
    assert first >= 1 and np.isnan(learner.history["loss/total"].iloc[0])  # the first rounds only filled replays
    assert record.learner_steps == sum(e[3] for e in learner._rounds.log)  # every job counted, applied or not
    for i, u in enumerate(updates):  # BSP: one update a round, computed at version u - 1 against the target
        if u >= 1:  # of the last even version (target_update_interval 2) before it
            j = updates.index((u - 1) - (u - 1) % 2)
            np.testing.assert_array_equal(targets[i], weights[j])
    assert any(u >= 3 for u in updates)  # the target moved at least once
    for w in learner._rounds.executor.inner.workers:  # the workers used the target the learner holds
        np.testing.assert_array_equal(get_vector(w.target_params), targets[-1])
    learner.finish()


def test_dqn_on_the_parameter_server_learns_a_best_response() -> None:
    kuhn = pb.load_game("kuhn_poker")
    opponents = [None, pb.Mixture([pb.RandomPolicy(kuhn), pb.policies.FixedPolicy.pure(kuhn, 1)], [0.3, 0.7])]
    _, best = pb.ExactBestResponse(kuhn).best_response_with_value(0, opponents)
    # budget 12,000: with the workers' batches in one replay, 8,000 left seeds 0, 2 and 3 one small mistake (gap 0.05)
    learner = pb.DQN(kuhn, workers=2, sync="bsp", seed=0, steps_per_round=16, batch_size=64, learning_starts=200,
                     budget=12_000, target_update_interval=25, updates_per_round=1)
    policy = learner.best_response(0, opponents)
    profile = list(opponents)
    profile[0] = policy
    assert best - float(pb.ExactEvaluator(kuhn).evaluate(profile)[0]) < 0.05
    assert learner.history["updates"].iloc[-1] == len(learner.history) - (learner.history["loss/total"].isna()).sum()


@pytest.mark.parametrize("cls", ["A2C", "DQN"])
@pytest.mark.parametrize("k", [1, 2])
def test_bap_staleness_never_exceeds_the_bound_and_asp_records_it(cartpole, k, cls) -> None:
    measured = {}
    first = 1 if cls == "DQN" else 0  # DQN's first round only fills the replay (empty when its jobs went out)
    for sync in ("bap", "asp"):
        options = DQN_SMALL if cls == "DQN" else SMALL
        learner = getattr(pb, cls)(cartpole, workers=4, sync=sync, staleness=k, seed=0, **options)
        for _ in range(5 + first):
            record = learner.step()
        rounds = learner._rounds
        measured[sync] = learner.staleness  # public: every applied gradient's staleness
        per_round = list(learner.history["max_staleness"])[first:]
        assert max(per_round) == max(learner.staleness)
        if sync == "asp":  # each gradient is applied on arrival: four applies a round
            assert per_round == [max(learner.staleness[i:i + 4]) for i in range(0, 20, 4)]
        assert len(rounds.log) == 20 + 4 * first  # every round consumes one job per worker
        # exact accounting: each consumed job counted once, nothing else
        assert record.learner_steps == sum(e[3] for e in rounds.log)
        assert record.env_steps == sum(e[4] for e in rounds.log)
        assert len({e[2] for e in rounds.log}) == 20 + 4 * first
    assert max(measured["bap"]) <= k
    assert len(measured["asp"]) == 20 and max(measured["asp"]) > k  # the bound is what holds BAP back


def test_the_parameter_server_owns_its_copies_and_the_learner_pulls_them_each_round(cartpole) -> None:
    from pbmarl.distributed.server import ServerProcess

    learner = pb.A2C(cartpole, workers=2, sync="asp", seed=1, **SMALL)
    learner.step()  # the server and its workers start with the first round
    server = learner._rounds.server
    process = server.host.obj
    assert isinstance(process, ServerProcess)  # the server actor's body, in-process on the local backend
    mine = _params(learner)
    assert not {id(p) for p in process.server.params} & {id(p) for p in mine}  # copies, not the learner's
    before = get_vector(mine)
    learner.step()
    assert server.version == 4 == process.server.version  # ASP: one update per gradient
    np.testing.assert_array_equal(get_vector(mine), process.server.weights()[1])  # pulled at the end of the round
    assert np.abs(get_vector(mine) - before).max() > 0
    state = learner.optimizer.state_dict()["state"]
    assert int(state[0]["step"]) == 4  # the optimiser's moments came back too (save keeps them)
    learner.finish()
    assert server.host.obj is None


def test_ctrl_c_mid_round_undoes_the_round_and_the_next_is_the_same(cartpole, ctrl_c) -> None:
    """Issue 48: a Ctrl-C between the server's update and its version bump broke every later step.
    Now the interrupted step is undone whole (server, workers, counts) and the next one is what it would have been."""
    learner = pb.A2C(cartpole, workers=2, sync="asp", seed=1, **SMALL)
    twin = pb.A2C(cartpole, workers=2, sync="asp", seed=1, **SMALL)
    learner.step(), twin.step()
    before = learner.task.env_steps, get_vector(_params(learner))
    ctrl_c(learner._rounds.executor.inner, "next", at=2)
    with pytest.raises(KeyboardInterrupt):
        learner.step()
    assert learner._rounds is None  # the workers and the server were stopped
    assert learner.task.env_steps == before[0] and len(learner.records) == 1
    np.testing.assert_array_equal(get_vector(_params(learner)), before[1])
    mine, theirs = learner.step(), twin.step()  # fresh workers and server, at the version and jobs of before
    assert learner._rounds.server.version == 4
    assert {k: v for k, v in mine.as_row().items() if k != "wall_time" and not k.startswith("time/")} == \
        {k: v for k, v in theirs.as_row().items() if k != "wall_time" and not k.startswith("time/")}
    learner.finish()


def test_ppo_under_asp_saves_its_workers_place_in_their_batches(cartpole, tmp_path, ctrl_c) -> None:
    """ASP workers end a step part-way through a batch's minibatch plan: a save keeps each one's collecting job and
    the gradients taken of it, and a loaded learner, or one whose step was interrupted, goes on as the twin does."""
    options = {"workers": 2, "sync": "asp", "epochs": 2, "minibatches": 3, "seed": 1, **SMALL}
    a, twin = pb.PPO(cartpole, **options), pb.PPO(cartpole, **options)
    a.step(), twin.step()
    batches = a._rounds.executor.batches
    assert batches and all(0 < consumed < 6 for _, consumed in batches.values())
    a.save(tmp_path / "run")
    ctrl_c(a._rounds.executor.inner, "next", at=3)
    with pytest.raises(KeyboardInterrupt):
        a.step()
    with pb.load_run(tmp_path / "run") as b:
        rows = [{k: v for k, v in r.step().as_row().items() if k != "wall_time" and not k.startswith("time/")}
                for r in (a, b, twin)]
        assert rows[0] == rows[1] == rows[2]
        np.testing.assert_array_equal(get_vector(_params(a)), get_vector(_params(twin)))
        np.testing.assert_array_equal(get_vector(_params(b)), get_vector(_params(twin)))
    a.finish(), twin.finish()


def test_bad_parallel_options_are_named(cartpole) -> None:
    with pytest.raises(ValueError, match=r"workers must be an int in \[1, 256\], got 0"):
        pb.PPO(cartpole, workers=0)
    with pytest.raises(ValueError, match=r"sync must be one of \('bsp', 'asp', 'bap'\), got 'ssp'"):
        pb.PPO(cartpole, sync="ssp")
    with pytest.raises(ValueError, match="staleness must be a non-negative int"):
        pb.A2C(cartpole, sync="bap", staleness=-1)


def test_a3c_is_a2c_under_asp(cartpole) -> None:
    learner = pb.A3C(cartpole, **SMALL)
    assert (learner.config.workers, learner.config.sync) == (4, "asp")
    record = learner.step()
    assert len(learner.staleness) == 4 and record.learner_steps == sum(e[3] for e in learner._rounds.log)


def test_impala_learns_from_stale_batches_with_exact_step_counts(cartpole) -> None:
    learner = pb.IMPALA(cartpole, actors=3, steps_per_round=32, num_envs=4, hidden=(16,), seed=0)
    records = [learner.step() for _ in range(3)]
    assert len(learner.staleness) == 9 and max(learner.staleness) > 0  # the slow actors' data is stale
    assert records[-1].max_staleness == max(learner.staleness[-3:])
    assert records[-1].learner_steps == sum(e[3] for e in learner.log)
    assert records[-1].env_steps == sum(e[4] for e in learner.log)
    assert len({e[2] for e in learner.log}) == 9  # no batch counted twice
    assert learner.task.updates == 9
    with pytest.raises(ValueError, match="actors must be a positive int, got 0"):
        pb.IMPALA(cartpole, actors=0)


def test_the_replay_hands_out_prefetched_groups_within_what_the_learner_announced() -> None:
    from pbmarl.distributed.replay import RemoteReplay, ReplayProcess
    from pbmarl.learners.common.buffers import PrioritizedReplayBuffer

    buffer = PrioritizedReplayBuffer(100, (3,), 2)
    data = np.random.default_rng(0)
    for i in range(50):
        buffer.append(data.normal(size=3).astype(np.float32), i % 2, float(i), False,
                      data.normal(size=3).astype(np.float32))
    reference = ReplayProcess(buffer)
    replay = RemoteReplay(buffer, backend="local", prefetch=2)
    calls: list[tuple[str, int]] = []
    host = replay.host.obj
    real_one, real_many, real_prio = host.sample, host.sample_many, host.update_priorities_many
    host.sample = lambda size, seed, prio=(): calls.append(("sample", 1)) or real_one(size, seed, prio)
    host.sample_many = lambda size, seeds, prio=(): calls.append(("sample_many", len(seeds))) or real_many(size, seeds, prio)
    host.update_priorities_many = lambda prio: calls.append(("priorities", len(prio))) or real_prio(prio)
    rng, twin = np.random.default_rng(7), np.random.default_rng(7)
    replay.expect(5)
    got = []
    for _ in range(5):
        got.append(replay.sample(8, rng))
        replay.update_priorities(got[-1].index, np.full(8, 100.0))  # held: it travels with the next request
    # never past the 5 announced; the next group is asked for as soon as one is handed out; no call of
    # their own for the priority updates
    assert calls == [("sample_many", 2), ("sample_many", 2), ("sample_many", 1)]
    want = []
    for k in (2, 2, 1):  # group k + 1 is drawn while group k trains: after the updates of group k - 1
        want += reference.sample_many(8, [int(x) for x in twin.integers(2**63 - 1, size=k)])
        if len(want) > 2:
            for b in want[-4:-2]:
                reference.buffer.update_priorities(b.index, np.full(8, 100.0))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.index, b.index)
        np.testing.assert_allclose(a.weight, b.weight)
    row = (np.ones(3, np.float32), 1, 1.0, False, np.ones(3, np.float32))
    replay.append(*row)  # the held updates go ahead of the transition, in order
    assert calls[-1] == ("priorities", 3)
    for b in got[2:]:
        reference.buffer.update_priorities(b.index, np.full(8, 100.0))
    reference.append_rows([row])
    np.testing.assert_allclose(replay.state_arrays()["priority"], reference.state_arrays()["priority"])
    replay.sample(8, rng)  # nothing announced: one minibatch per round trip
    assert calls[-1] == ("sample", 1)
    with pytest.raises(ValueError, match="prefetch must be a positive int .*got 0"):
        RemoteReplay(buffer, backend="local", prefetch=0)


def test_apex_updates_per_step_keeps_the_replay_ratio_as_batches_grow(cartpole) -> None:
    learner = pb.ApeX(cartpole, actors=2, steps_per_round=32, num_envs=4, hidden=(16,), learning_starts=0,
                      updates_per_step=0.3, batch_size=16, seed=0)
    for _ in range(4):
        learner.step()
    data = sum(e[3] for e in learner.log)  # learner transitions consumed in all
    assert learner.task.updates == int(0.3 * data)  # the fractions carry over: none lost, none made up
    with pytest.raises(ValueError, match="updates_per_step must be None or a positive number, got 0"):
        pb.ApeX(cartpole, updates_per_step=0)


def test_apex_actors_use_their_epsilon_schedule(cartpole) -> None:
    assert pb.learners.apex_epsilons(1) == [0.4]
    assert pb.learners.apex_epsilons(4) == pytest.approx([0.4, 0.4 ** (1 + 7 / 3), 0.4 ** (1 + 14 / 3), 0.4 ** 8])
    learner = pb.ApeX(cartpole, actors=4, apex_epsilon=0.5, steps_per_round=32, num_envs=4, hidden=(16,),
                      learning_starts=0, updates_per_round=4, publish_interval=2, batch_size=16, seed=0)
    eps = pb.learners.apex_epsilons(4, 0.5)
    seen = set()
    for _ in range(2):
        record = learner.step()
        for i, result in learner.last:
            seen.add(i)
            # two legal actions: the greedy one has 1 - eps/2, the other eps/2
            probs = np.unique(np.round(result.traj.action_prob, 12))
            assert set(probs) <= {round(1 - eps[i] / 2, 12), round(eps[i] / 2, 12)}, (i, probs)
    assert seen == {0, 1, 2, 3}  # the fast actor comes back more often, but all do
    assert learner.published[0] == 4  # 8 updates, published every 2
    assert record.buffer == record.learner_steps == sum(e[3] for e in learner.log)
    from pbmarl.distributed.replay import ReplayProcess

    central = learner.replay.host.obj  # the replay actor's body (in-process on the local backend)
    assert isinstance(central, ReplayProcess) and len(central.buffer) == record.buffer
    assert central.buffer.state_arrays()["obs"].shape[0] == record.buffer
    with pytest.raises(ValueError, match="n must be a positive int"):
        pb.learners.apex_epsilons(0)


class _Ref:
    def __init__(self, handle, method, args):
        self.handle, self.method, self.args = handle, method, args


class _Handle:
    def __init__(self, obj):
        self.obj, self.dead = obj, False

    def __getattr__(self, name):
        method = getattr(self.obj, name)
        return type("M", (), {"remote": staticmethod(lambda *a: _Ref(self, method, a))})


class _Class:
    def __init__(self, cls):
        self.cls = cls

    def options(self, **_):
        return self

    def remote(self, *args):
        return _Handle(self.cls(*args))


class _FakeRay:
    """Ray's calls that RayExecutor makes, run in-process; `kill` makes an actor's results fail."""

    def is_initialized(self):
        return True

    def remote(self, cls):
        return _Class(cls)

    def wait(self, refs, num_returns=1):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        if isinstance(ref, list):
            return [self.get(r) for r in ref]
        if ref.handle.dead:
            from ray.exceptions import RayActorError

            raise RayActorError()
        return ref.method(*ref.args)

    def kill(self, handle, no_restart=True):
        handle.dead = True

    def cancel(self, ref):
        pass


def test_the_ray_executor_replaces_a_killed_actor_and_counts_every_step_once(cartpole, monkeypatch) -> None:
    import pbmarl.hosting.ray as rb

    fake = _FakeRay()
    monkeypatch.setattr(rb, "import_ray", lambda: fake)
    learner = pb.IMPALA(cartpole, actors=2, backend="ray", steps_per_round=32, num_envs=4, hidden=(16,), seed=0)
    learner.step()
    fake.kill(learner.executor.inner.actors[0].actor)  # dies with a job in flight
    records = [learner.step() for _ in range(2)]
    assert learner.executor.replacements == 1 and not learner.executor.inner.actors[0].actor.dead
    assert len(learner.log) == 6
    assert records[-1].learner_steps == sum(e[3] for e in learner.log)
    assert records[-1].env_steps == sum(e[4] for e in learner.log)
    assert len({e[2] for e in learner.log}) == 6  # the lost job ran again under its own seed, once
    learner.finish()


def test_ray_actors_start_with_the_learner_not_inside_its_first_round(cartpole, monkeypatch) -> None:
    import pbmarl.hosting.ray as rb

    fake = _FakeRay()
    monkeypatch.setattr(rb, "import_ray", lambda: fake)
    learner = pb.IMPALA(cartpole, actors=2, backend="ray", steps_per_round=32, num_envs=4, hidden=(16,), seed=0)
    learner.start(0, [None])
    assert learner.executor.inner is not None and len(learner.executor.inner.actors) == 2  # up before any step
    fake.kill(learner.executor.inner.actors[1].actor)
    with pytest.raises(RuntimeError, match="a worker failed to start"):
        learner.executor.ready()
    learner.finish()


def test_ctrl_c_stops_the_actors_and_leaves_the_last_checkpoint_whole(cartpole, tmp_path, ctrl_c) -> None:
    options = {"actors": 2, "steps_per_round": 32, "num_envs": 4, "hidden": (16,), "seed": 0}
    learner = pb.IMPALA(cartpole, **options)
    learner.step()
    learner.save(tmp_path / "ckpt")
    saved = get_vector(_params(learner))
    ctrl_c(learner.executor.inner, "next")
    with pytest.raises(KeyboardInterrupt):
        learner.step()
    assert learner.executor.inner is None  # the actors were stopped
    restored = pb.IMPALA.load(tmp_path / "ckpt")
    np.testing.assert_array_equal(get_vector(_params(restored)), saved)
    assert restored.task.learner_steps == learner.records[0].learner_steps
    record = learner.step()  # stepping again starts fresh actors, with the jobs they had
    assert record.round == 2 and learner.executor.inner is not None
    assert restored.step().learner_steps == record.learner_steps


def test_apex_ddpg_actors_explore_with_their_own_noise_scale() -> None:
    game = pb.load_game("gym:Pendulum-v1")
    learner = pb.learners.ApeXDDPG(game, actors=3, steps_per_round=30, hidden=(8,), learning_starts=10**6, seed=0)
    record = learner.step()
    sigmas = pb.learners.apex_epsilons(3)
    assert learner.actor_sigmas == sigmas
    assert {(e[0], e[4]) for e in learner.log} <= {(i, s) for i, s in enumerate(sigmas)}
    workers = learner.executor.inner.workers
    assert [w.learner.actor.noise.sigma for w in workers] == pytest.approx(sigmas)
    assert record.env_steps == sum(e[3] for e in learner.log) == len(learner.replay)
    central = learner.replay.host.obj.buffer  # the central replay's own buffer holds every transition
    assert len(learner.replay.state_arrays()["reward"]) == len(central) == record.env_steps


@pytest.mark.parametrize("cls", ["A3C", "IMPALA", "ApeX"])
def test_distributed_learners_rebuild_from_their_spec(cartpole, cls) -> None:
    from pbmarl.learners.common.registry import make_learner

    learner = getattr(pb, cls)(cartpole, seed=2, hidden=(8,), backend="local")
    twin = make_learner(cartpole, learner.spec())
    assert type(twin) is type(learner) and twin.config == learner.config and twin.seed == 2
