"""The multi-agent learners on the parameter server (`pbmarl.algorithms.teams.rounds`): the update is
the single-process one, BSP averages, BAP keeps its bound, counts stay exact, errors are named."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import pbmarl as pb
from pbmarl.algorithms.teams.rounds import MARLServerProcess, MARLWorker, Team, _rebuild_run
from pbmarl.games.matrix_env import CLIMBING
from pbmarl.learners.control.rounds import get_state, named_optimizers


@pytest.fixture(scope="module")
def spread() -> pb.games.Game:
    return pb.load_game("pettingzoo:simple_spread_v3", N=2, local_ratio=0.5, max_cycles=5)


SMALL: dict[str, dict[str, Any]] = {
    "mappo": {"steps_per_round": 40, "hidden": (16,)},
    "qmix": {"steps_per_round": 40, "hidden": (16,), "batch_episodes": 4, "target_update": 2},
    "maddpg": {"steps_per_round": 40, "hidden": (16,), "batch_size": 16, "learning_starts": 0},
}
CLASSES = {"mappo": pb.MAPPO, "qmix": pb.QMIX, "maddpg": pb.MADDPG}


def _recipe(run: pb.MARL) -> tuple[Any, ...]:
    from pbmarl.rollout.worker import game_for_worker

    return (type(run), game_for_worker(run.game), run.mapping.spec(),
            {g: (type(lr), lr.config, lr.seed) for g, lr in run.learners.items()}, dict(run.fixed))


@pytest.mark.parametrize("algo", ["mappo", "qmix", "maddpg"])
def test_one_recorded_job_applied_by_the_server_is_the_single_process_update(spread: pb.games.Game, algo: str) -> None:
    """A worker's first gradient of a batch, stepped by the server, gives the networks one single-process update
    gives on the same rows (targets, ValueNorm and update counts included): MAPPO of one epoch of one minibatch,
    the replay learners' first update. MADDPG's actor is the one exception (its loss sees the critic before that
    update's step), so only its critics are compared."""
    one = {"epochs": 1} if algo == "mappo" else {}
    run = pb.MARL(spread, {"team": CLASSES[algo](seed=3, workers=2, **SMALL[algo], **one)}, seed=0, num_envs=4)
    recipe = _recipe(run)
    team = Team(run.learners)
    state = get_state(team)
    worker = MARLWorker(*recipe, 11, 4)
    result = worker.compute(state, 0, [123], 0)
    assert result.grad is not None and result.count > 0 and result.env_steps >= 40
    for (_, sent), (_, kept) in zip(named_optimizers(team), named_optimizers(worker.team)):  # nothing stepped
        for a, b in zip(sent.param_groups[0]["params"], kept.param_groups[0]["params"]):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    server = MARLServerProcess(*recipe, state, {k: o.state_dict() for k, o in named_optimizers(team)},
                               team.counters(), 0)
    server.apply([result.grad], [result.count], [0])

    single = _rebuild_run(*recipe, 11, 4, one_gradient=True)  # ordinary optimisers, same one-gradient options
    single.rng = np.random.default_rng(123)
    lr = single.learners["team"]
    lr.rng, lr.env_steps = np.random.default_rng([123, 0]), 0
    lr.torch_gen.manual_seed(123)
    single.step()
    got = {k: m for k, m in server.team._modules().items() if not isinstance(m, torch.optim.Optimizer)}
    want = {k: m for k, m in Team(single.learners)._modules().items() if not isinstance(m, torch.optim.Optimizer)}
    compared = [k for k in want if algo != "maddpg" or "critic" in k]
    assert len(compared) >= 2
    for k in compared:
        for (name, a), b in zip(got[k].state_dict().items(), want[k].state_dict().values()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"{k}.{name}")
    assert server.team.counters() == Team(single.learners).counters()


def test_bsp_steps_adam_once_on_the_workers_mean_gradient(spread: pb.games.Game) -> None:
    """Adam's first step on a gradient g moves each weight by lr * g / (|g| + eps): checked against the mean
    of the two workers' gradients, computed by hand (one epoch of one minibatch: one update a step)."""
    learner = pb.MAPPO(seed=0, workers=2, sync="bsp", value_norm=False, epochs=1, **SMALL["mappo"])
    run = pb.MARL(spread, {"team": learner}, seed=0, num_envs=4)
    team = Team(run.learners)
    before = get_state(team)
    params_before = torch.cat([p.detach().reshape(-1) for p in learner.optimizer.param_groups[0]["params"]]).numpy()
    run.step()
    got = run._rounds.last
    assert len(got) == 2 and {r.version for r in got} == {0}
    g = (got[0].grad.grads["team/optimizer"] * got[0].count + got[1].grad.grads["team/optimizer"] * got[1].count) / (
        got[0].count + got[1].count)
    assert not np.allclose(got[0].grad.grads["team/optimizer"], got[1].grad.grads["team/optimizer"])
    cfg = learner.config
    want = params_before - cfg.lr * g / (np.abs(g) + 1e-5)
    now = torch.cat([p.detach().reshape(-1) for p in learner.optimizer.param_groups[0]["params"]]).numpy()
    np.testing.assert_allclose(now, want, rtol=1e-5, atol=1e-7)
    assert not np.array_equal(get_state(team), before) and run.staleness == [0, 0]
    run.close()


@pytest.mark.parametrize("sync", ["asp", "bap"])
def test_bap_keeps_its_bound_asp_records_staleness_and_env_steps_are_counted_once(spread: pb.games.Game,
                                                                                    sync: str) -> None:
    learner = pb.QMIX(seed=0, workers=3, sync=sync, staleness=1, **SMALL["qmix"])
    run = pb.MARL(spread, {"team": learner}, seed=0, num_envs=4)
    records = [run.step() for _ in range(4)]
    log = run._rounds.log
    updates = learner.config.updates_per_round  # a collected batch is followed by that many gradients
    assert len(log) == 4 * 3 * updates and len({e[2] for e in log}) == len(log)  # every job once, under its own seed
    assert sum(e[4] > 0 for e in log) >= 12  # a batch each worker, each step (a fast one may start its next)
    assert records[-1].env_steps == sum(e[4] for e in log) == run.env_steps
    assert learner.env_steps == run.env_steps
    assert learner.updates == len(run.staleness) if sync == "asp" else learner.updates <= len(run.staleness)
    if sync == "bap":
        assert max(run.staleness) <= 1
    else:
        assert max(run.staleness) >= 2  # three workers pushing on arrival: some gradients are two versions old
    assert run.history["max_staleness"].max() == max(run.staleness)
    assert list(run.history["fresh_workers"]) == [True, False, False, False]
    run.close()


def test_an_interrupted_step_is_undone_and_the_next_starts_fresh_workers(spread: pb.games.Game, ctrl_c: Any) -> None:
    run = pb.MARL(spread, {"team": pb.MAPPO(seed=0, workers=2, sync="asp", **SMALL["mappo"])}, seed=0, num_envs=4)
    run.step()
    before = run.snapshot()
    ctrl_c(run._rounds.executor.inner, "next", at=2)
    with pytest.raises(KeyboardInterrupt):
        run.step()
    assert run._rounds is None and len(run.records) == 1 and run.env_steps == before[4]
    np.testing.assert_array_equal(get_state(Team(run.learners)), _state_of(run, before))
    record = run.step()  # a fresh server from the restored learners, and the record says so
    assert record.iteration == 2 and record.env_steps == before[4] + sum(e[4] for e in run._rounds.log)
    assert record.extra["fresh_workers"] and list(run.history["fresh_workers"]) == [True, True]
    run.close()


def _state_of(run: pb.MARL, snapshot: Any) -> np.ndarray:
    other = pb.MARL(run.game, {"team": pb.MAPPO(seed=5, **SMALL["mappo"])}, seed=0, num_envs=4)
    other.learners["team"].load_state_dict(snapshot[0]["team"])
    return get_state(Team(other.learners))


def test_a_parallel_run_saves_loads_and_goes_on(tmp_path, spread: pb.games.Game) -> None:
    run = pb.MARL(spread, {"team": pb.MADDPG(seed=0, workers=2, sync="bap", **SMALL["maddpg"])}, seed=0,
                  num_envs=4)
    run.step()
    run.save(tmp_path / "run")
    state = get_state(Team(run.learners))
    loaded = pb.MARL.load(tmp_path / "run")
    assert loaded.parallel is not None and loaded.parallel.sync == "bap" and loaded.parallel.workers == 2
    np.testing.assert_array_equal(get_state(Team(loaded.learners)), state)
    before = loaded.env_steps
    record = loaded.step()
    assert before == run.env_steps and record.env_steps == before + sum(e[4] for e in loaded._rounds.log)
    assert loaded.staleness and record.extra["fresh_workers"]
    run.close()
    loaded.close()


def test_parallel_mappo_learns_a_coordination_game() -> None:
    """Two agents paid 1 for matching actions (0 otherwise): MAPPO on two BSP workers coordinates."""
    game = pb.MatrixGame([np.eye(3), np.eye(3)], name="match")
    learner = pb.MAPPO(seed=0, workers=2, sync="bsp", steps_per_round=128, lr=1e-2, gamma=0.0, hidden=(32,))
    run = pb.MARL(game, {"team": learner}, pb.AgentMapping.shared(game, group="team", agent_id=True), seed=0,
                  num_envs=16)
    run.run(40, progress=False)
    assert run.evaluate(256).mean["team"] >= 1.95  # both agents paid 1 on (almost) every episode (seeds 0-3: 2.0)
    run.close()


def test_bad_parallel_marl_set_ups_are_named(spread: pb.games.Game) -> None:
    with pytest.raises(ValueError, match=r"sync must be one of \('bsp', 'asp', 'bap'\), got 'ssp'"):
        pb.MAPPO(workers=2, sync="ssp")
    with pytest.raises(ValueError, match=r"workers must be an int in \[1, 256\], got 0"):
        pb.QMIX(workers=0)
    mapping = pb.AgentMapping(spread, {"agent_0": "a", "agent_1": "b"})
    with pytest.raises(ValueError, match="the same parameter server.*a: \\(2, 'bsp', 1, 'local'\\); b: \\(1"):
        pb.MARL(spread, {"a": pb.MAPPO(workers=2), "b": pb.MAPPO()}, mapping)
    with pytest.raises(ValueError, match="group 'b'.*Independent has no parameter-server mode"):
        pb.MARL(spread, {"a": pb.MAPPO(workers=2), "b": pb.learners.Independent(algo="rainbow")}, mapping)
    with pytest.raises(ValueError, match="pool= cannot be combined with the learners' workers=2"):
        pb.MARL(spread, {"team": pb.MAPPO(workers=2)}, pool=pb.RolloutPool(spread))


def test_a_job_that_steps_an_optimiser_twice_is_refused(spread: pb.games.Game) -> None:
    run = pb.MARL(spread, {"team": pb.QMIX(seed=0, workers=2, **SMALL["qmix"])}, seed=0, num_envs=4)
    recipe = list(_recipe(run))
    cls, config, seed = recipe[3]["team"]
    worker = MARLWorker(*recipe, 0, 4)
    worker.run.learners["team"].config = replace(config, workers=1, updates_per_round=2)
    with pytest.raises(RuntimeError, match="'team/optimizer' stepped twice in one parameter-server job"):
        worker.compute(get_state(Team(run.learners)), 0, [1], 0)


def test_a_fixed_group_plays_in_the_workers_episodes_and_does_not_learn() -> None:
    game = pb.MatrixGame([CLIMBING, CLIMBING], name="climbing")
    mapping = pb.AgentMapping(game, {"player_0": "learner", "player_1": "partner"})
    partner = pb.RandomPolicy(mapping.group_game("partner"))
    run = pb.MARL(game, {"learner": pb.MAPPO(seed=0, workers=2, steps_per_round=32, hidden=(8,))}, mapping,
                  fixed={"partner": partner}, seed=0, num_envs=8)
    record = run.step()
    assert record.env_steps == 64 and set(record.returns) == {"learner", "partner"} and set(record.losses) == {"learner"}
    run.close()


def test_command_line_marl_on_workers_and_resume(tmp_path, capsys) -> None:
    import json

    from pbmarl.cli import main

    out = tmp_path / "run"
    game = "pettingzoo:simple_spread_v3(N=2, max_cycles=5)"
    assert main(["marl", "--game", game, "--algo", "vdn", "--mapping", "shared", "--steps", "20",
                 "--steps-per-round", "10", "--num-envs", "2", "--eval-episodes", "2", "--workers", "2", "--sync",
                 "bap", "--staleness", "0", "--out", str(out), "--quiet"]) == 0
    assert "2 workers (bap, local)" in capsys.readouterr().out
    saved = json.loads((out / "run" / "run.json").read_text())["state"]
    config = json.loads((out / "run" / saved / "state.json").read_text())["learners"][0]["config"]
    assert (config["workers"], config["sync"], config["staleness"]) == (2, "bap", 0)
    assert main(["resume", str(out), "--steps", "20", "--quiet"]) == 0
    history = pd.read_csv(out / "history.csv")
    assert list(history["env_steps"]) == [20, 40] and history["max_staleness"].max() == 0
    assert list(history["fresh_workers"]) == [True, True]   # the resumed run started fresh workers
