"""P2SRO: the fixed set is always members 0..k, active=1 is PSRO, levels train against what is below, resume."""

from __future__ import annotations

import numpy as np
import pytest
from inprocess_ray import InProcessRay as _InProcessRay

import pbmarl as pb
from pbmarl.algorithms.psro.p2sro import P2SRO

DQN_TINY = dict(budget=200, steps_per_round=50, num_envs=16, learning_starts=50, hidden=(16,),
                updates_per_round=4, batch_size=32)
COLS = ["exploitability", "size_0", "size_1", "sigma_0", "sigma_1", "new_ids", "env_steps"]


def _dqn(game, seed=0):
    return pb.DQN(game, seed=seed, **DQN_TINY)


def test_active_one_equals_psro_with_an_rl_oracle():
    game = pb.load_game("kuhn_poker")
    psro = pb.PSRO(game, learner=_dqn(game), seed=0)
    psro.run(2, progress=False)
    p2sro = P2SRO(game, learner=_dqn(game), seed=0, active=1, refresh_every=2)
    p2sro.run(2, progress=False)
    assert psro.history[COLS].equals(p2sro.history[COLS])


def test_active_one_equals_psro_exact():
    psro = pb.PSRO("kuhn_poker")
    psro.run(5, progress=False)
    p2sro = P2SRO("kuhn_poker", active=1)
    p2sro.run(5, progress=False)
    assert psro.history[COLS].equals(p2sro.history[COLS])


def test_fixed_set_is_always_the_first_members_and_only_the_lowest_level_freezes():
    game = pb.load_game("kuhn_poker")
    run = P2SRO(game, learner=_dqn(game), active=3, refresh_every=1, seed=1)
    for k in range(1, 4):
        record = run.step()
        assert run.population.sizes == (k + 1, k + 1)
        assert run.fixed == [[f"p{p}/{i}" for i in range(k + 1)] for p in range(2)]
        assert [lv.index for lv in run.levels] == [k + 1, k + 2, k + 3]
        assert record.new_ids == (f"p0/{k}", f"p1/{k}")
    frozen = run.level_history[run.level_history["frozen"]]
    assert len(frozen) <= 3  # a period freezes at most the lowest level
    assert run.level_history["trained"].map(lambda t: t[1] + t[2]).max() > 0  # higher levels trained meanwhile


def test_upper_levels_target_the_meta_nash_of_everything_below():
    run = P2SRO("kuhn_poker", active=2)
    run.run(2, progress=False)
    target = run.level_targets(1)
    assert [len(m.policies) for m in target] == [4, 4]  # 3 fixed + the level below
    assert all(np.isclose(m.weights.sum(), 1.0) for m in target)


def test_bad_options_name_the_value():
    with pytest.raises(ValueError, match="active must be a positive int"):
        P2SRO("kuhn_poker", active=0)
    with pytest.raises(ValueError, match="backend must be 'local' or 'ray'"):
        P2SRO("kuhn_poker", backend="mpi")


def test_save_resume_equals_uninterrupted(tmp_path):
    game = pb.load_game("kuhn_poker")
    whole = P2SRO(game, learner=_dqn(game), active=2, refresh_every=2, seed=0)
    whole.run(3, progress=False)
    part = P2SRO(game, learner=_dqn(game), active=2, refresh_every=2, seed=0, save_dir=tmp_path / "run")
    part.run(2, progress=False)
    resumed = P2SRO.load(tmp_path / "run")
    resumed.run(1, progress=False)
    assert whole.history[COLS].equals(resumed.history[COLS])
    assert whole.level_history.equals(resumed.level_history)


@pytest.mark.ray
def test_ray_backend_levels_are_actors_and_resume(tmp_path, ray_session):
    game = pb.load_game("kuhn_poker")
    # three levels on the session's two CPUs: each actor asks for half a CPU
    run = P2SRO(game, learner=_dqn(game), active=3, refresh_every=2, seed=0, backend="ray", level_cpus=0.5,
                save_dir=tmp_path / "r")
    run.run(2, progress=False)
    fixed = len(run.fixed[0])
    assert run.fixed == [[f"p{p}/{i}" for i in range(fixed)] for p in range(2)]
    assert [lv.index for lv in run.levels] == [fixed, fixed + 1, fixed + 2]
    run.close()  # the level actors hold 1.5 of the session's two CPUs
    resumed = P2SRO.load(tmp_path / "r")
    assert resumed.config.backend == "ray" and resumed.config.level_cpus == 0.5
    assert [lv.index for lv in resumed.levels] == [fixed, fixed + 1, fixed + 2]
    resumed.run(1, progress=False)
    resumed.close()
    assert resumed.population.sizes == (fixed + 1, fixed + 1)
    with pytest.raises(ValueError, match="backend='ray' runs RL learners"):
        P2SRO("kuhn_poker", backend="ray")


def test_ray_backend_logic_with_in_process_actors(tmp_path, monkeypatch):
    import pbmarl.hosting.ray as hosting_ray

    monkeypatch.setattr(hosting_ray, "import_ray", lambda: _InProcessRay())
    monkeypatch.setattr(hosting_ray, "init_ray", lambda **_: None)
    _InProcessRay.options.clear()
    game = pb.load_game("kuhn_poker")
    whole = P2SRO(game, learner=_dqn(game), active=2, refresh_every=2, seed=0, backend="ray")
    whole.run(2, progress=False)
    assert whole.fixed == [["p0/0", "p0/1", "p0/2"], ["p1/0", "p1/1", "p1/2"]]
    assert [lv.index for lv in whole.levels] == [3, 4]
    part = P2SRO(game, learner=_dqn(game), active=2, refresh_every=2, seed=0, backend="ray", save_dir=tmp_path / "r")
    part.run(1, progress=False)
    resumed = P2SRO.load(tmp_path / "r")
    resumed.run(1, progress=False)
    assert resumed.config.backend == "ray" and whole.history[COLS].equals(resumed.history[COLS])
    assert {o.get("num_cpus") for o in _InProcessRay.options if "max_concurrency" not in o} == {1.0}


def test_a_level_actor_receives_each_target_policy_once_and_drops_it_with_the_targets():
    import pickle

    from pbmarl.hosting.shipping import TargetShipper, unpack
    from pbmarl.policies.mixture import Mixture

    game = pb.load_game("kuhn_poker")
    a, b, c, d = (pb.TabularPolicy(game) for _ in range(4))
    for k, policy in enumerate((a, b, c, d)):  # tell them apart after the trip
        policy.table[:, :] = np.eye(2)[k % 2] if k < 2 else 0.5
    driver, actor = TargetShipper(), {}

    def send(*mixtures):  # through pickle, as Ray sends them: the actor rebuilds its own copies
        shipments, packed = driver.pack(mixtures)
        got = unpack(actor, game, *pickle.loads(pickle.dumps((shipments, packed))))
        return [driver.token(p) for p in (a, b, c, d)], [s[0] for s in shipments], got

    tok, shipped, got = send(Mixture([a, b], [0.25, 0.75]), Mixture([a, c]))
    assert shipped == sorted(tok[:3])  # a once, though both targets name it
    assert [len(m) for m in got] == [2, 2] and got[0].weights.tolist() == [0.25, 0.75]
    assert got[0].policies[0] is got[1].policies[0]  # the actor's one copy of a
    assert np.array_equal(got[0].policies[1].table, b.table)
    tok, shipped, got = send(Mixture([a, b, d], [0.5, 0.0, 0.5]))  # c is dropped on both sides, only d travels
    assert shipped == [tok[3]] and sorted(actor) == sorted([tok[0], tok[1], tok[3]])
    assert sorted(driver.sent) == sorted(actor) and got[0].weights.tolist() == [0.5, 0.0, 0.5]
    b.version += 1  # a changed policy travels again
    tok, shipped, got = send(Mixture([a, b]))
    assert shipped == [tok[1]] and len(actor) == 2
    driver.forget()  # a failed call: the next pack ships everything again
    tok, shipped, got = send(Mixture([a, b]))
    assert shipped == sorted(tok[:2]) and len(actor) == 2
    with pytest.raises(KeyError, match=r"no policy under token\(s\) \['t99'\]"):
        unpack(actor, game, [], [(["t99"], np.ones(1))])


def test_level_cpus_reach_the_actors_and_bad_values_are_refused(monkeypatch):
    import pbmarl.hosting.ray as hosting_ray

    monkeypatch.setattr(hosting_ray, "import_ray", lambda: _InProcessRay())
    monkeypatch.setattr(hosting_ray, "init_ray", lambda **_: None)
    game = pb.load_game("kuhn_poker")
    _InProcessRay.options.clear()
    P2SRO(game, learner=_dqn(game), active=3, seed=0, backend="ray", level_cpus=2 / 3)
    assert [o["num_cpus"] for o in _InProcessRay.options if "max_concurrency" not in o] == [2 / 3] * 3
    for bad in (0, -1.0, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="level_cpus must be a positive number"):
            P2SRO(game, learner=_dqn(game), backend="ray", level_cpus=bad)


def test_an_interrupted_step_leaves_the_levels_as_they_were(monkeypatch):
    from pbmarl.algorithms.psro.levels import Level

    game = pb.load_game("kuhn_poker")
    run = P2SRO(game, learner=_dqn(game), active=2, refresh_every=1, seed=0)
    run.step()
    original, calls = Level.advance, {"n": 0}

    def flaky(self, rounds):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(self, rounds)

    monkeypatch.setattr(Level, "advance", flaky)
    for _ in range(4):  # a step whose lowest level is already trained freezes it without advancing
        before = (run.history.copy(), [lv.index for lv in run.levels], [list(lv.trained) for lv in run.levels],
                  len(run.level_records), run.learner.rng.bit_generator.state)
        try:
            run.step()
        except KeyboardInterrupt:
            break
    else:
        pytest.fail("no step advanced a level twice")
    assert run.history.equals(before[0]) and [lv.index for lv in run.levels] == before[1]
    assert [lv.trained for lv in run.levels] == before[2] and len(run.level_records) == before[3]
    assert run.learner.rng.bit_generator.state == before[4]


# -- the manager: claiming and freezing are atomic ---------------------------------------
def _hammer(ladder, workers=8, rounds=5):
    """`workers` threads each claim a rung and freeze it once it is the lowest, `rounds` times over;
    every freeze checks the fixed set is {0..k} at that moment."""
    import threading

    claimed, bad = [], []
    guard = threading.Lock()

    def worker():
        for _ in range(rounds):
            rung = ladder.claim()
            with guard:
                claimed.append(rung)
            while not ladder.try_freeze(rung):
                pass
            fixed = ladder.fixed_rungs()
            if fixed != list(range(len(fixed))) or rung not in fixed:
                bad.append((rung, fixed))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return claimed, bad, ladder.events()


def _check_ladder_log(claimed, bad, events, start, n):
    assert sorted(claimed) == list(range(start, start + n))  # no rung claimed twice, none skipped
    assert bad == []
    freezes = [(rung, fixed) for op, rung, fixed in events if op == "freeze"]
    assert freezes == [(r, r + 1) for r in range(start, start + n)]  # frozen strictly bottom up, fixed = {0..rung}


def test_manager_claims_and_freezes_atomically_across_threads():
    from pbmarl.algorithms.psro.ladder import LadderManager

    ladder = LadderManager(fixed=2)
    claimed, bad, events = _hammer(ladder)
    _check_ladder_log(claimed, bad, events, 2, 40)
    assert ladder.fixed_rungs() == list(range(42)) and ladder.active_rungs() == []


def test_manager_refuses_all_but_the_lowest_rung_and_bad_states():
    from pbmarl.algorithms.psro.ladder import LadderManager

    ladder = LadderManager(fixed=1)
    assert [ladder.claim() for _ in range(3)] == [1, 2, 3]
    before = ladder.state()
    with pytest.raises(ValueError, match="only the lowest active level may freeze: rung 2 asked"):
        ladder.freeze(2)
    assert ladder.state() == before and not ladder.try_freeze(3)
    assert ladder.freeze(1) == 1 and ladder.fixed_rungs() == [0, 1] and ladder.active_rungs() == [2, 3]
    with pytest.raises(ValueError, match="active rungs must be 2, 3"):
        LadderManager(fixed=2, active=[3, 4])


def test_run_freezes_through_its_manager_and_the_ladder_matches_the_table():
    run = P2SRO("kuhn_poker", active=3)
    for k in range(1, 4):
        run.step()
        assert run.ladder == {"fixed": list(range(k + 1)), "active": [k + 1, k + 2, k + 3]}
        assert run.fixed == [[f"p{p}/{i}" for i in range(k + 1)] for p in range(2)]
    run.manager.claim()  # an outside claim: the next freeze still must be the lowest rung
    with pytest.raises(ValueError, match="only the lowest active level may freeze"):
        run.manager.freeze(6)


@pytest.mark.ray
def test_ray_manager_is_one_actor_and_atomic(ray_session):
    from pbmarl.algorithms.psro.ladder import RemoteLadder

    ladder = RemoteLadder(fixed=1)
    try:
        claimed, bad, events = _hammer(ladder, workers=6, rounds=3)
        _check_ladder_log(claimed, bad, events, 1, 18)
        with pytest.raises(Exception, match="only the lowest active level may freeze"):
            ladder.freeze(99)
        assert ladder.fixed_rungs() == list(range(19))
    finally:
        ladder.close()


def test_a_level_that_finished_once_freezes_at_once_when_lowest_and_drops_its_new_cycle():
    game = pb.load_game("kuhn_poker")
    run = P2SRO(game, learner=_dqn(game), active=2, refresh_every=1, seed=0)
    run.step()  # freezes the lowest level; the level above is now the lowest
    upper = run.levels[1]
    upper.retarget(run.level_targets(1))
    rounds = 0
    while upper.cycles == 0 or upper.learner.task is None:  # one whole cycle, then into the next
        upper.advance(1)
        rounds += 1
        assert rounds < 200
    assert upper.done and not all(upper.trained)  # finished once; its new cycle is under way
    finished = list(upper.policies)
    low = run.levels[0]
    low.retarget(run.level_targets(0))
    while not low.done:
        low.advance(1)
    periods = len(run.level_records)
    run.step()  # the old lowest freezes without a new period
    run.step()  # and so does the one that had finished a cycle, with its finished policies
    assert len(run.level_records) == periods
    assert [run.population[p][-1] for p in range(2)] == finished
    assert upper.learner.task is None  # the unfinished cycle was dropped
    assert run.ladder["fixed"] == [0, 1, 2, 3]
