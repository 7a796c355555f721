"""League: PFSP weightings, the main agents' branches, snapshot/reset rules, Nash on a matrix game, resume."""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.algorithms.league.league import League
from pbmarl.algorithms.league.pfsp import pfsp, remove_monotonic_suffix
from pbmarl.algorithms.league.rules import LeagueConfig, Matchmaker, Member
from pbmarl.algorithms.league.win_rates import WinRateTable

GAME = [[3, -2], [-2, 1]]


@pytest.mark.parametrize("weighting", ["squared", "variance", "linear", "linear_capped"])
@pytest.mark.parametrize("rates", [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0], [0.0], [0.3, 0.7, 1.0]])
def test_pfsp_is_a_distribution_even_on_degenerate_win_rates(weighting, rates):
    p = pfsp(rates, weighting=weighting)
    assert np.all(np.isfinite(p)) and np.all(p >= 0) and p.sum() == pytest.approx(1.0)


def test_pfsp_weightings_match_the_formulas():
    x = np.array([0.2, 0.5, 0.9])
    assert np.allclose(pfsp(x, weighting="squared"), (1 - x) ** 2 / ((1 - x) ** 2).sum())
    assert np.allclose(pfsp(x, weighting="variance"), x * (1 - x) / (x * (1 - x)).sum())
    assert np.allclose(pfsp([0.0, 1.0], weighting="variance"), [0.5, 0.5])  # all weights 0: uniform
    with pytest.raises(ValueError, match="entry 1 is nan"):
        pfsp([0.5, np.nan])
    with pytest.raises(ValueError, match="unknown PFSP weighting 'hard'"):
        pfsp([0.5], weighting="hard")


def test_remove_monotonic_suffix():
    rates, items = remove_monotonic_suffix([0.9, 0.4, 0.6, 0.5, 0.3], list("abcde"))
    assert items == list("abc") and np.allclose(rates, [0.9, 0.4, 0.6])
    assert remove_monotonic_suffix([0.9, 0.8], ["a", "b"])[1] == []


def test_win_rate_table_counts_decay_and_unplayed():
    t = WinRateTable()
    for n in ("a", "b", "c"):
        t.add(n)
    t.update("a", "b", wins=7, draws=1, losses=2)
    assert t.win_rate("a", ["b", "c"]) == pytest.approx([0.75, 0.5])
    assert t.win_rate("b", ["a"]) == pytest.approx([0.25])
    d = WinRateTable(decay=0.5)
    d.add("a"), d.add("b")
    d.update("a", "b", wins=1)
    d.update("a", "b", losses=1)  # the old win counts half
    assert d.win_rate("a", ["b"]) == pytest.approx([0.5 / 1.5])


def _league_rules(rates: dict[tuple[str, str], float], **cfg):
    members = {"main": Member("main", "main"), "mx": Member("mx", "main_exploiter"),
               "lx": Member("lx", "league_exploiter"), "main@0": Member("main@0", "main", parent="main"),
               "mx@0": Member("mx@0", "main_exploiter", parent="mx")}
    table = WinRateTable()
    for n in members:
        table.add(n)
    for (a, b), r in rates.items():
        table.update(a, b, wins=100 * r, losses=100 * (1 - r))
    return Matchmaker(LeagueConfig(**cfg), table, members), members


def test_main_branch_frequencies_within_three_sigma():
    # win rates that make every branch answer: verification finds the exploiter snapshot (0.2 < 0.3)
    mm, _ = _league_rules({("main", "mx@0"): 0.2, ("main", "main@0"): 0.9})
    rng = np.random.default_rng(0)
    n = 10_000
    branches = [mm.match("main", rng)[1] for _ in range(n)]
    for name, p in (("pfsp", 0.5), ("verification_exploiters", 0.15), ("selfplay", 0.35)):
        count = branches.count(name)
        assert abs(count - n * p) <= 3 * np.sqrt(n * p * (1 - p)), (name, count)


def test_exploiter_rules():
    rng = np.random.default_rng(1)
    mm, _ = _league_rules({("mx", "main"): 0.05, ("mx", "main@0"): 0.5})
    assert mm.match("mx", rng) == ("main@0", "exploit_curriculum")  # beats main < 10%: its snapshots
    mm, _ = _league_rules({("mx", "main"): 0.2})
    assert mm.match("mx", rng) == ("main", "exploit_main")
    mm, _ = _league_rules({("lx", "main@0"): 1.0, ("lx", "mx@0"): 1.0})
    opp = {mm.match("lx", rng)[0] for _ in range(50)}
    assert opp == {"main@0", "mx@0"}  # all weights 0 -> uniform, no NaN


def test_snapshot_and_reset_rules_fire_on_synthetic_payoffs():
    mm, members = _league_rules({("main", "main@0"): 0.8, ("main", "mx@0"): 0.8}, snapshot_min_steps=10,
                                snapshot_max_steps=100)
    members["main"].steps = 5
    assert not mm.ready_to_snapshot("main")  # too early
    members["main"].steps = 10
    assert mm.ready_to_snapshot("main")  # beats every snapshot > 0.7
    mm.table.update("main", "mx@0", wins=0, losses=1000)
    assert not mm.ready_to_snapshot("main")
    members["main"].steps = 101
    assert mm.ready_to_snapshot("main")  # past the step limit
    mm.table.update("mx", "main", wins=80, losses=20)
    members["mx"].steps = 10
    assert mm.ready_to_snapshot("mx")  # main exploiters look at the main agents only
    rng = np.random.default_rng(0)
    assert mm.resets_at_snapshot("mx", rng) and not mm.resets_at_snapshot("main", rng)
    resets = np.mean([mm.resets_at_snapshot("lx", rng) for _ in range(4000)])
    assert abs(resets - 0.25) < 3 * np.sqrt(0.25 * 0.75 / 4000)


@pytest.mark.parametrize(("options", "message"), [
    ({"pfsp_branch": 1.5}, "pfsp_branch must be a number in"),
    ({"main_agents": 0}, "main_agents must be a positive int"),
    ({"main_exploiters": True}, "main_exploiters must be a non-negative int, got True"),
    ({"decay": float("nan")}, r"decay must be a number in \(0, 1\], got nan"),
    ({"steps_per_match": 10**10}, "steps_per_match must be an int in"),
    ({"snapshot_min_steps": 5, "snapshot_max_steps": 1}, "snapshot_max_steps must be at least"),
])
def test_config_fields_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        LeagueConfig(**options)


def test_options_seed_and_game_are_checked():
    with pytest.raises(TypeError, match="unknown option 'pfsp_brnch' for League; did you mean 'pfsp_branch'"):
        League(pb.MatrixGame(GAME), pfsp_brnch=0.5)
    with pytest.raises(ValueError, match="seed must be an int"):
        League(pb.MatrixGame(GAME), seed=-1)
    league = League("kuhn_poker", seed=0, main_exploiters=0, league_exploiters=1)
    assert league.config.to_dict()["league_exploiters"] == 1 and list(league.learners) == ["main", "league_exploiter"]


def _main_action_probs(league: League) -> list[float]:
    game = league.game
    state = game.new_initial_state()
    out = []
    for p, pi in enumerate(league.main_policy()):
        obs, mask, key = game.observation(state, p)[None], game.legal_mask(state, p)[None], [game.info_key(state, p)]
        out.append(float(pi.action_probabilities(obs, mask, keys=key)[0, 0]))
    return out


def test_main_policy_plays_the_mixture_exactly_and_names_its_agents():
    league = League("kuhn_poker", snapshot_min_steps=1, snapshot_max_steps=2, seed=0)
    league.run(4, progress=False)
    policies = league.main_policy()
    assert [pi.player for pi in policies] == [0, 1] and all(pi.exact for pi in policies)
    from pbmarl.evaluation.exact import exploitability

    # the behaviour policy is realisation-equivalent to the Nash mixture: the same exploitability
    mixed = exploitability(league.game, [pi.mixture for pi in policies]).exploitability
    assert exploitability(league.game, policies).exploitability == pytest.approx(mixed, abs=1e-9)
    assert league.history["exploitability"].iloc[-1] == pytest.approx(mixed, abs=1e-9)
    with pytest.raises(ValueError, match="'nobody' is not a main agent of this league; its main agents are \\['main'\\]"):
        league.main_policy("nobody")


def test_evaluate_plays_the_main_policy_and_changes_nothing():
    league = League("kuhn_poker", snapshot_min_steps=1, snapshot_max_steps=2, seed=0)
    league.run(2, progress=False)
    state = league.rng.bit_generator.state
    res = league.evaluate(200, seed=1)
    assert list(res.mean.index) == [0, 1] and res.episodes == 200
    assert res.mean.sum() == pytest.approx(0.0)  # zero-sum
    assert league.evaluate(200, seed=1).mean.equals(res.mean) and league.rng.bit_generator.state == state
    assert np.isfinite(league.evaluate(20, seed=0, deterministic=True).mean).all()


def test_league_main_policy_reaches_the_nash_of_a_matrix_game():
    league = League(pb.MatrixGame(GAME), snapshot_min_steps=1, snapshot_max_steps=3, seed=0)
    records = league.run(12, progress=False)
    assert all(len(r.matches) == 4 for r in records)
    assert np.allclose(_main_action_probs(league), [0.375, 0.375], atol=0.05)
    assert records[-1].exploitability == pytest.approx(0.0, abs=0.02)
    assert set(league.matches["branch"]) >= {"pfsp", "selfplay"}


def test_league_save_resume_equals_uninterrupted(tmp_path):
    kw = dict(snapshot_min_steps=1, snapshot_max_steps=3, seed=3)
    whole = League(pb.MatrixGame(GAME), **kw)
    whole.run(8, progress=False)
    part = League(pb.MatrixGame(GAME), **kw)
    part.run(4, progress=False, callback=lambda record: part.save(tmp_path / "run"))
    resumed = League.load(tmp_path / "run")
    resumed.run(4, progress=False)
    cols = ["exploitability", "nash_conv", "league_size", "snapshots", "resets"]
    assert whole.history[cols].equals(resumed.history[cols])
    assert whole.matches.drop(columns="steps").equals(resumed.matches.drop(columns="steps"))


def test_a_failed_league_step_leaves_the_league_as_it_was(monkeypatch):
    league = League(pb.MatrixGame(GAME), snapshot_min_steps=1, snapshot_max_steps=3, seed=0)
    league.run(3, progress=False)
    before = (league.history.copy(), dict(league.policies), list(league.members), league.win_rates.to_frame(),
              league.population.sizes, league.rng.bit_generator.state)
    calls = {"n": 0}
    original = League._play

    def flaky(self, home, away):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, home, away)

    monkeypatch.setattr(League, "_play", flaky)
    with pytest.raises(KeyboardInterrupt):
        league.step()
    assert league.history.equals(before[0]) and league.policies == before[1] and list(league.members) == before[2]
    assert league.win_rates.to_frame().equals(before[3]) and league.population.sizes == before[4]
    assert league.rng.bit_generator.state == before[5]


def test_ctrl_c_while_a_dqn_oracle_sets_up_its_task_leaves_the_league_usable(monkeypatch):
    """Issue 48: an interrupt inside the oracle's task set-up left the league without learners."""
    from pbmarl.learners.oracles.dqn import DQN

    game = pb.load_game("kuhn_poker")
    dqn = pb.DQN(game, seed=0, budget=40, hidden=(8,), steps_per_round=20, learning_starts=20, num_envs=2,
                 eval_episodes=0)
    kw = dict(main_exploiters=0, league_exploiters=0, steps_per_match=40, match_episodes=4, seed=0)
    league, twin = League(game, dqn, "rollout", **kw), League(game, dqn, "rollout", **kw)
    original = DQN._init_task

    def interrupted(self, player, warm):
        self.q_net = None  # part of the task is set up, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(DQN, "_init_task", interrupted)
    with pytest.raises(KeyboardInterrupt):
        league.step()
    monkeypatch.setattr(DQN, "_init_task", original)
    assert list(league.learners) == ["main"] and league.iteration == 0
    league.step(), twin.step()
    assert league.history["win_rate[main]"].equals(twin.history["win_rate[main]"])
    assert league.history["env_steps"].equals(twin.history["env_steps"])
