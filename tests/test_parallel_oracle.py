"""ParallelOracle: one learner copy per player; local, in-process-actor and Ray runs give the same PSRO
history as per-player learners answering in turn; resume, all-or-nothing steps and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from inprocess_ray import InProcessRay

import pbmarl as pb
from pbmarl.algorithms.psro.parallel_oracle import ParallelOracle
from pbmarl.protocols import BatchOracle, BestResponse, Oracle

DQN_TINY = dict(budget=200, steps_per_round=50, num_envs=16, learning_starts=50, hidden=(16,),
                updates_per_round=4, batch_size=32)
COLS = ["exploitability", "size_0", "size_1", "sigma_0", "sigma_1", "new_ids", "env_steps", "br_values"]


def _dqn(game, seed=0):
    return pb.DQN(game, seed=seed, **DQN_TINY)


class PerPlayer:
    """The reference: player p's best responses come from its own learner, seeded seed + p, one after another."""

    name = "dqn"

    def __init__(self, game, seed=0):
        self.learners = [_dqn(game, seed + p) for p in range(game.num_players)]

    def respond(self, player, opponents):
        return self.learners[player].respond(player, opponents)


@pytest.fixture
def in_process_ray(monkeypatch):
    import pbmarl.hosting.ray as hosting_ray

    monkeypatch.setattr(hosting_ray, "import_ray", lambda: InProcessRay())
    monkeypatch.setattr(hosting_ray, "init_ray", lambda **_: None)
    InProcessRay.options.clear()
    return InProcessRay


def _psro(game, oracle, **kw):
    return pb.PSRO(game, learner=oracle, seed=0, **kw)


def test_local_copies_answer_as_per_player_learners_do():
    game = pb.load_game("kuhn_poker")
    reference = _psro(game, PerPlayer(game))
    reference.run(3, progress=False)
    oracle = ParallelOracle(_dqn(game), backend="local")
    assert isinstance(oracle, BatchOracle) and isinstance(oracle, Oracle)
    run = _psro(game, oracle)
    run.run(3, progress=False)
    assert run.history[COLS].equals(reference.history[COLS])
    assert run.population.member("p0/1").meta["origin"] == "dqn"
    history = oracle.history
    assert sorted(history["player_copy"].unique()) == [0, 1] and len(history) > 0
    # each copy trained only its own player's best responses, warm-starting from its own last one
    assert [learner.tasks_done for learner in oracle._local] == [3, 3]


def test_actor_backend_sends_the_same_work_as_local(in_process_ray):
    game = pb.load_game("kuhn_poker")
    local = _psro(game, ParallelOracle(_dqn(game), backend="local"))
    local.run(3, progress=False)
    oracle = ParallelOracle(_dqn(game), backend="ray", num_cpus=0.5)
    run = _psro(game, oracle)
    run.run(3, progress=False)
    assert run.history[COLS].equals(local.history[COLS])
    assert [o["num_cpus"] for o in in_process_ray.options] == [0.5, 0.5]
    # each opponent policy travelled to an actor once: the actor holds exactly what the last request named
    for p, actor in enumerate(oracle._actors):
        assert sorted(actor.actor._obj.held) == sorted(oracle._shippers[p].sent)
        assert len(actor.actor._obj.held) == run.population.sizes[1 - p] - 1  # the newest policy was not yet a target
    oracle.close()
    with pytest.raises(RuntimeError, match="was closed"):
        run.step()
    assert run.iteration == 3  # the failed step changed nothing


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, in_process_ray, backend):
    game = pb.load_game("kuhn_poker")
    whole = _psro(game, ParallelOracle(_dqn(game), backend=backend))
    whole.run(3, progress=False)
    part = _psro(game, ParallelOracle(_dqn(game), backend=backend), save_dir=tmp_path / "run")
    part.run(2, progress=False)
    assert sorted(p.name for p in (tmp_path / "run").glob("state-*/learner/player-*")) == ["player-0", "player-1"]
    resumed = pb.PSRO.load(tmp_path / "run")
    assert isinstance(resumed.learner, ParallelOracle) and resumed.learner.backend == backend
    assert resumed.learner.spec() == part.learner.spec()
    resumed.run(1, progress=False)
    assert resumed.history[COLS].equals(whole.history[COLS])


def _copies(oracle):
    return oracle._local if oracle.backend == "local" else [a.actor._obj.learner for a in oracle._actors]


@pytest.mark.parametrize(("backend", "where", "at"), [("ray", "respond", 1), ("ray", "_round", 2),
                                                     ("local", "_round", 2)])
def test_an_interrupted_step_leaves_run_and_copies_as_they_were(ctrl_c, in_process_ray, backend, where, at):
    """Player 1's copy is interrupted after player 0's has trained: as it starts, or inside its second round (its
    rounds take no snapshot of their own there: the run's holds theirs)."""
    game = pb.load_game("kuhn_poker")
    whole = _psro(game, ParallelOracle(_dqn(game), backend=backend))
    whole.run(2, progress=False)
    oracle = ParallelOracle(_dqn(game), backend=backend)
    run = _psro(game, oracle)
    run.step()
    ctrl_c(_copies(oracle)[1], where, at=at)
    before = run.history.copy()
    with pytest.raises(KeyboardInterrupt):
        run.step()
    assert run.history.equals(before) and [copy.tasks_done for copy in _copies(oracle)] == [1, 1]
    run.step()  # both copies start again from where they were: the same answers as without the interruption
    assert run.history[COLS].equals(whole.history[COLS])


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_the_copies_rounds_inside_a_run_share_its_snapshot(monkeypatch, in_process_ray, backend):
    """Inside a PSRO step the run's snapshot holds each copy's, so a copy's rounds take none of their own (each
    would copy the networks, Adam's moments and the replay); answered outside a run, they take their own again."""
    game = pb.load_game("kuhn_poker")
    oracle = ParallelOracle(_dqn(game), backend=backend)
    run = _psro(game, oracle)
    copies = _copies(oracle)
    taken = []
    original = type(copies[0]).snapshot
    monkeypatch.setattr(type(copies[0]), "snapshot", lambda self: taken.append(self) or original(self))
    rounds = [len(copy.records) for copy in copies]
    run.step()
    assert all(len(copy.records) > n + 1 for copy, n in zip(copies, rounds))  # several rounds each
    assert sorted(map(id, taken)) == sorted(map(id, copies))  # one snapshot each: the run's
    taken.clear()
    rounds = [len(copy.records) for copy in copies]
    oracle.respond_all([(0, [None, run.population[1][0]]), (1, [run.population[0][0], None])])
    assert len(taken) == sum(len(copy.records) - n for copy, n in zip(copies, rounds))  # one a round


@pytest.mark.ray
def test_ray_actors_answer_as_the_local_copies(ray_session):
    game = pb.load_game("kuhn_poker")
    local = _psro(game, ParallelOracle(_dqn(game), backend="local"))
    local.run(2, progress=False)
    oracle = ParallelOracle(_dqn(game), backend="ray", num_cpus=0.5)
    try:
        run = _psro(game, oracle)
        run.run(2, progress=False)
        assert run.history[COLS].equals(local.history[COLS])
        answers = oracle.respond_all([(0, [None, run.population[1][0]]), (1, [run.population[0][0], None])])
        assert [type(a) for a in answers] == [BestResponse, BestResponse]
        assert all(np.isfinite(a.value) and a.env_steps > 0 for a in answers)
    finally:
        oracle.close()


def test_bad_input_names_the_value():
    game = pb.load_game("kuhn_poker")
    with pytest.raises(ValueError, match="backend must be 'local' or 'ray', got 'gpu'"):
        ParallelOracle(_dqn(game), backend="gpu")
    for bad in (0, -1.0, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="num_cpus must be a positive number"):
            ParallelOracle(_dqn(game), backend="local", num_cpus=bad)
    with pytest.raises(ValueError, match="nothing to parallelise"):
        ParallelOracle(pb.ExactBestResponse(game), backend="local")
    with pytest.raises(TypeError, match="learner must be an RL oracle with spec"):
        ParallelOracle(object(), backend="local")
    with pytest.raises(ValueError, match="a learner spec needs the game"):
        ParallelOracle({"name": "dqn"}, backend="local")
    oracle = ParallelOracle({"name": "dqn", "seed": 3, **DQN_TINY}, game=game, backend="local")
    assert [s["seed"] for s in oracle.copy_specs] == [3, 4]
    for player in (2, -1):
        with pytest.raises(ValueError, match=rf"player {player} is out of range for 'kuhn_poker': it has players 0..1"):
            oracle.respond(player, [None, None])
    for player in (0.5, True):
        with pytest.raises(TypeError, match=r"player must be an int in 0..1, got"):
            oracle.respond(player, [None, None])
    assert [learner.tasks_done for learner in oracle._local] == [0, 0]


def test_loading_a_folder_without_every_player_loads_nothing(tmp_path):
    game = pb.load_game("kuhn_poker")
    oracle = ParallelOracle(_dqn(game), backend="local")
    pb.PSRO(game, learner=oracle, seed=0).step()
    oracle.save(tmp_path / "o")
    fresh = ParallelOracle(_dqn(game), backend="local")
    (tmp_path / "o" / "player-1").rename(tmp_path / "o" / "elsewhere")
    with pytest.raises(ValueError, match="player-1"):
        fresh.load(tmp_path / "o")
    assert [learner.tasks_done for learner in fresh._local] == [0, 0]
    (tmp_path / "o" / "elsewhere").rename(tmp_path / "o" / "player-1")
    assert [learner.tasks_done for learner in fresh.load(tmp_path / "o")._local] == [1, 1]


def test_xdo_asks_the_parallel_oracle_for_both_players_at_once(tmp_path, in_process_ray):
    game = pb.load_game("kuhn_poker")
    reference = pb.XDO(game, tau=0.5, learner=PerPlayer(game))
    reference.run(2, progress=False)
    expected = [(r.exploitability, r.env_steps) for r in reference.records]
    oracle = ParallelOracle(_dqn(game), backend="ray")
    calls = []
    respond_all = oracle.respond_all
    oracle.respond_all = lambda requests: calls.append([p for p, _ in requests]) or respond_all(requests)
    run = pb.XDO(game, tau=0.5, learner=oracle, save_dir=tmp_path / "xdo")
    run.run(1, progress=False)
    got = [(r.exploitability, r.env_steps) for r in run.records]
    assert calls == [[0, 1], [0, 1]]  # each iteration (iteration 0 too) asks for both players' answers in one call
    resumed = pb.XDO.load(tmp_path / "xdo")
    assert isinstance(resumed.learner, ParallelOracle)
    got += [(r.exploitability, r.env_steps) for r in resumed.run(1)]
    assert got == expected
