"""Sequence-form LP, XDO, correlated meta-solvers and JPSRO (issue 11)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python.algorithms import exploitability as os_exploitability
from openspiel_refs import KUHN, KUHN3, LEDUC, openspiel_value, to_openspiel

import pbmarl as pb
from pbmarl.algorithms.xdo import restricted_tree
from pbmarl.evaluation.engine import nash_conv
from pbmarl.solvers.correlated import cce_gaps, ce_gaps, deviation_constraints, solve_correlated

# -- sequence-form LP ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [(KUHN, -1 / 18), (LEDUC, -0.0856064)])
def test_lp_value_and_exploitability(name: str, value: float) -> None:
    game = pb.load_game(name)
    sol = pb.sequence_form_lp(game)
    assert sol.value == pytest.approx(value, abs=1e-6)
    assert abs(sol.values[0] - sol.values[1]) < 1e-9
    ex = pb.exploitability(game, list(sol.policies))
    assert ex.nash_conv < 1e-9
    assert ex.values[0] == pytest.approx(value, abs=1e-6)
    # OpenSpiel's own evaluation of the same policies agrees
    joint = to_openspiel(game, list(sol.policies))
    assert openspiel_value(game, joint)[0] == pytest.approx(sol.value, abs=1e-9)
    assert os_exploitability.nash_conv(game.pyspiel_game, joint) < 1e-9


def test_lp_policies_are_uniform_where_never_reached() -> None:
    game = pb.load_game(KUHN)
    sol = pb.sequence_form_lp(game)
    tree = game.tree()
    for p in range(2):
        infos = tree.infosets[p]
        parent_mass = sol.plans[p][infos.parent_seq]
        rows = sol.policies[p].table[[sol.policies[p].index[k] for k in infos.keys]]
        for i in np.flatnonzero(parent_mass == 0):
            assert np.allclose(rows[i][infos.legal[i]], 1 / infos.legal[i].sum())
        assert np.allclose(rows.sum(axis=1), 1.0)


def test_lp_refuses_bad_games() -> None:
    with pytest.raises(ValueError, match="3 players"):
        pb.sequence_form_lp(pb.load_game(KUHN3))
    general = pb.MatrixGame(np.stack([np.array([[3.0, 0.0], [5.0, 1.0]]), np.array([[3.0, 5.0], [0.0, 1.0]])], -1))
    with pytest.raises(ValueError, match="general-sum"):
        pb.sequence_form_lp(general)
    with pytest.raises(ValueError, match="max_sequences"):
        pb.sequence_form_lp(pb.load_game(KUHN), max_sequences=10)
    with pytest.raises(ValueError, match="too large|max_nodes"):
        pb.sequence_form_lp(pb.load_game(LEDUC), max_nodes=1000)


def test_lp_matches_matrix_game_value() -> None:
    rps = pb.MatrixGame([[0, -1, 2], [1, 0, -1], [-1, 1, 0]])
    sol = pb.sequence_form_lp(rps)
    x, y, v = pb.solvers.solve_zero_sum(np.array([[0, -1, 2], [1, 0, -1], [-1, 1, 0]], float))
    assert sol.value == pytest.approx(v, abs=1e-9)


# -- XDO -----------------------------------------------------------------------------------


def _restricted_nash_conv(xdo: pb.XDO) -> float:
    tree = restricted_tree(xdo.tree, tuple(xdo._masks(p) for p in range(2)))
    br, values = nash_conv(tree, [x[tree.terminal_seq[p]] for p, x in enumerate(xdo.plans)])
    return float((br - values).sum())


def test_xdo_restricted_solutions_are_restricted_equilibria() -> None:
    xdo = pb.XDO(KUHN, tau=0.05, check_every=5)
    for k in range(5):  # iteration 0 (built with the run), then four steps
        record = xdo.records[-1] if k == 0 else xdo.step()
        assert record.restricted_exploitability <= record.tau
        assert _restricted_nash_conv(xdo) / 2 == pytest.approx(record.restricted_exploitability, abs=1e-12)
        assert record.inner_iterations >= 5
    lp = pb.XDO(KUHN, solver="lp")
    records = lp.run(6, progress=False)
    assert all(r.restricted_exploitability < 1e-9 for r in records)
    assert records[-1].exploitability < 1e-9  # the restricted game grows to an equilibrium of the full game
    assert _restricted_nash_conv(lp) < 1e-9


def test_xdo_tau_halves_and_counts_inner_iterations() -> None:
    xdo = pb.XDO(KUHN, tau=1.0, check_every=3)
    xdo.run(4, progress=False)
    records = xdo.records
    for a, b in zip(records, records[1:]):
        assert b.tau == (a.tau / 2 if a.exploitability < a.tau else a.tau)
    assert records[-1].total_inner_iterations == sum(r.inner_iterations for r in records)
    assert list(xdo.history["tau"]) == [r.tau for r in records]


def test_xdo_saves_and_resumes(tmp_path) -> None:
    straight = pb.XDO(KUHN, tau=0.1)
    straight.run(3, progress=False)
    expected = [r.exploitability for r in straight.records]
    run = pb.XDO(KUHN, tau=0.1, save_dir=tmp_path / "xdo")
    run.run(1, progress=False)
    resumed = pb.XDO.load(tmp_path / "xdo")
    assert resumed.iteration == 1 and resumed.tau == run.tau
    got = [r.exploitability for r in resumed.run(2)]
    assert got == pytest.approx(expected[2:], abs=1e-12)
    assert len(resumed.history) == 4


def test_xdo_run_folder_is_untrusted_input(tmp_path) -> None:
    import json

    run = pb.XDO(KUHN, solver="lp", save_dir=tmp_path / "xdo")
    run.run(1, progress=False)
    with pytest.raises(ValueError, match="holds a XDO run, not a JPSRO"):
        pb.JPSRO.load(tmp_path / "xdo")
    meta = json.loads((tmp_path / "xdo" / "run.json").read_text())
    meta["state"] = "../outside"
    (tmp_path / "xdo" / "run.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="must name a state-NNNNNN folder"):
        pb.XDO.load(tmp_path / "xdo")


@pytest.mark.parametrize("tau", [0, -1.0, float("nan")])
def test_xdo_refuses_non_positive_tau(tau: float) -> None:
    with pytest.raises(ValueError, match="tau"):
        pb.XDO(KUHN, tau=tau)


def test_xdo_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="solver"):
        pb.XDO(KUHN, solver="cfr")
    with pytest.raises(ValueError, match="3 players"):
        pb.XDO(KUHN3)


def test_xdo_with_an_exact_oracle_object_equals_exact_xdo() -> None:
    # the learner= path (respond against the solution's TabularPolicy, tabulate, take the greedy action)
    # reproduces the built-in exact best responses step for step
    plain, via = pb.XDO(LEDUC, tau=0.5), pb.XDO(LEDUC, tau=0.5, learner=pb.ExactBestResponse(pb.load_game(LEDUC)))
    plain.run(3, progress=False), via.run(3, progress=False)
    for a, b in zip(plain.records, via.records):
        assert b.exploitability == pytest.approx(a.exploitability, abs=1e-12)
        assert (b.restricted_actions, b.inner_iterations, b.env_steps) == (a.restricted_actions, a.inner_iterations, 0)
    assert list(via.population.to_frame()["origin"]) == ["exact"] * 8


def test_pure_table_takes_the_most_probable_legal_action() -> None:
    from pbmarl.algorithms.xdo import pure_table

    table = np.array([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2], [0.9, 0.05, 0.05], [0.0, 0.0, 0.0]])
    legal = np.array([[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 0]], bool)
    assert pure_table(table, legal).tolist() == [[0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]]


class _Recording:
    """An oracle that remembers what its learner answered."""

    def __init__(self, learner: pb.DQN) -> None:
        self.learner, self.name, self.answers = learner, learner.name, []

    def respond(self, player, opponents):
        answer = self.learner.respond(player, opponents)
        self.answers.append((player, answer))
        return answer


def test_xdo_with_a_dqn_oracle_adds_greedy_pure_responses() -> None:
    from pbmarl.algorithms.xdo import pure_table
    from pbmarl.evaluation.realization import policy_tables

    game = pb.load_game(KUHN)
    oracle = _Recording(pb.DQN(game, seed=3, budget=600, hidden=(16,), batch_size=32))
    run = pb.XDO(game, tau=0.5, learner=oracle)  # iteration 0 asks the oracle too: answers to uniform
    run.run(2, progress=False)
    records = run.records
    steps = [r.env_steps for r in records]
    assert steps == sorted(steps) and steps[-1] == sum(a.env_steps for _, a in oracle.answers) > 0
    assert set(run.population.to_frame()["origin"]) == {"dqn"}
    tree = run.tree
    for p in range(2):
        answers = [a.policy for q, a in oracle.answers if q == p]
        assert len(answers) == len(run.population[p]) == 3
        for member, answer in zip(run.population[p], answers):
            table = policy_tables(answer, tree, p)
            assert np.array_equal(policy_tables(member, tree, p), pure_table(table, tree.infosets[p].legal))
    # exploitability stays exact: the solution's NashConv measured independently
    br, values = nash_conv(tree, [x[tree.terminal_seq[p]] for p, x in enumerate(run.plans)])
    assert records[-1].nash_conv == pytest.approx(float((br - values).sum()), abs=1e-12)


def test_xdo_with_a_dqn_oracle_saves_and_resumes(tmp_path) -> None:
    game = pb.load_game(KUHN)
    options = dict(budget=600, hidden=(16,), batch_size=32)
    straight = pb.XDO(game, tau=0.5, learner=pb.DQN(game, seed=3, **options))
    straight.run(3, progress=False)
    expected = [r.exploitability for r in straight.records]
    run = pb.XDO(game, tau=0.5, learner=pb.DQN(game, seed=3, **options), save_dir=tmp_path / "xdo")
    run.run(1, progress=False)
    resumed = pb.XDO.load(tmp_path / "xdo")  # the learner loaded from its own run folder inside the save
    assert isinstance(resumed.learner, pb.DQN) and resumed.learner.config == run.learner.config
    got = [r.exploitability for r in resumed.run(2)]
    assert got == pytest.approx(expected[2:], abs=1e-12)
    assert [r.env_steps for r in resumed.records] == [r.env_steps for r in straight.records]
    state = json.loads((tmp_path / "xdo" / "run.json").read_text())["state"]
    assert (tmp_path / "xdo" / state / "learner" / "run.json").exists()


def test_xdo_refuses_a_learner_that_is_not_an_oracle() -> None:
    with pytest.raises(TypeError, match="XDO's learner must be an Oracle"):
        pb.XDO(KUHN, learner="dqn")  # type: ignore[arg-type]


# -- correlated meta-solvers ------------------------------------------------------------------

tables = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**31 - 1))


@settings(max_examples=8, deadline=None)
@given(tables)
def test_ce_and_cce_constraints_hold(spec: tuple[int, int, int, int]) -> None:
    *sizes, seed = spec
    U = np.random.default_rng(seed).uniform(-3, 3, size=(*sizes, 3))
    for kind in ("ce", "cce"):
        for objective in ("welfare", "gini"):
            joint = solve_correlated(U, kind=kind, objective=objective)
            assert joint.shape == tuple(sizes) and joint.min() >= 0 and joint.sum() == pytest.approx(1.0)
            assert (deviation_constraints(U, kind) @ joint.ravel()).max(initial=0.0) <= 1e-8
            assert cce_gaps(U, joint).max() <= 1e-8  # every CE is a CCE too
            if kind == "ce":
                assert ce_gaps(U, joint).max() <= 1e-8


def test_mgcce_is_unique() -> None:
    rng = np.random.default_rng(3)
    U = rng.uniform(-1, 1, size=(3, 4, 2, 3))
    for kind in ("cce", "ce"):
        a = solve_correlated(U, kind=kind, objective="gini")
        b = solve_correlated(U, kind=kind, objective="gini")
        assert np.allclose(a, b, atol=1e-9)
        perm = np.array([2, 0, 3, 1])  # relabel player 1's members: the same equilibrium, relabelled
        c = solve_correlated(U[:, perm], kind=kind, objective="gini")
        assert np.allclose(c, a[:, perm], atol=1e-6)


def test_lifted_cce_qp_gives_the_same_joint(monkeypatch: pytest.MonkeyPatch) -> None:
    from pbmarl.solvers import correlated

    U = np.random.default_rng(5).uniform(-1, 1, size=(4, 3, 5, 3))
    D, K = correlated.cce_factors(U)
    assert np.allclose((D @ K).toarray(), deviation_constraints(U, "cce").toarray())
    plain = solve_correlated(U, kind="cce", objective="gini")
    monkeypatch.setattr(correlated, "_LIFT_ABOVE", 0)
    assert np.allclose(solve_correlated(U, kind="cce", objective="gini"), plain, atol=1e-7)


def test_metasolver_gives_joint_and_marginals() -> None:
    U = np.random.default_rng(0).uniform(-1, 1, size=(2, 3, 2, 3))
    for name in ("mgcce", "mgce", "mwcce", "mwce", "cce", "ce"):
        sigma = pb.MetaSolver(name)(U)
        assert sigma.joint is not None and sigma.joint.shape == (2, 3, 2)
        for p in range(3):
            assert np.allclose(sigma[p], sigma.joint.sum(axis=tuple(q for q in range(3) if q != p)))
        assert not sigma.joint.flags.writeable
    chicken = np.array([[[6, 6], [2, 7]], [[7, 2], [0, 0]]], float)
    assert np.allclose(pb.MetaSolver("mwce")(chicken).joint, [[0.5, 0.25], [0.25, 0.0]], atol=1e-8)
    with pytest.raises(ValueError, match="epsilon"):
        pb.MetaSolver("mgcce", epsilon=-1.0)(U)
    with pytest.raises(ValueError, match="joint must have shape"):
        pb.solvers.MetaStrategy(([0.5, 0.5], [1.0]), solver="manual", joint=np.ones((2, 2)) / 4)


# -- JPSRO -----------------------------------------------------------------------------------------


def test_jpsro_three_player_kuhn_cce_gap() -> None:
    jpsro = pb.JPSRO(KUHN3, solver="mgcce")
    assert jpsro.records[0].gap == pytest.approx(2.0625, abs=1e-3)  # OpenSpiel's probe: 2.06 at iteration 0
    records = jpsro.run(20, progress=False)
    gaps = [r.gap for r in jpsro.records]
    assert gaps[1] == pytest.approx(0.8333, abs=1e-3)  # OpenSpiel: 0.83
    assert gaps[10] <= 0.06
    assert gaps[-1] <= 1e-8 and jpsro.converged
    assert all(r.meta_gap <= 1e-7 for r in records)
    assert list(jpsro.history["cce_gap"]) == gaps


def test_jpsro_two_player_zero_sum_marginals_become_nash() -> None:
    jpsro = pb.JPSRO(KUHN, solver="mgce")
    jpsro.run(15, progress=False)
    assert jpsro.converged
    last = jpsro.records[-1]
    assert last.kind == "ce" and last.gap <= 1e-8
    assert last.exploitability <= 1e-7
    sigma = jpsro.meta_strategy
    assert pb.exploitability(jpsro.game, jpsro.population, sigma).nash_conv <= 1e-7


def test_jpsro_saves_and_resumes(tmp_path) -> None:
    straight = pb.JPSRO(KUHN3, solver="mgcce")
    expected = [r.gap for r in straight.run(5)]
    run = pb.JPSRO(KUHN3, solver="mgcce", save_dir=tmp_path / "jpsro")
    run.run(3, progress=False)
    resumed = pb.JPSRO.load(tmp_path / "jpsro")
    assert resumed.iteration == 3 and resumed.population.sizes == run.population.sizes
    got = [r.gap for r in resumed.run(2)]
    assert got == pytest.approx(expected[3:], abs=1e-9)
    assert len(resumed.history) == 6


def test_failed_steps_leave_xdo_and_jpsro_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    xdo = pb.XDO(KUHN, solver="lp")
    xdo.run(2, progress=False)
    before = (xdo.population.sizes, xdo.tau, len(xdo.records), [x.copy() for x in xdo.plans])
    monkeypatch.setattr(xdo, "_solve", lambda tree: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        xdo.step()
    assert (xdo.population.sizes, xdo.tau, len(xdo.records)) == before[:3]
    assert all(np.array_equal(a, b) for a, b in zip(xdo.plans, before[3]))
    jpsro = pb.JPSRO(KUHN3, solver="mwcce")
    jpsro.run(2, progress=False)
    sizes, n, pending = jpsro.population.sizes, len(jpsro.records), len(jpsro._pending)
    monkeypatch.setattr(jpsro, "solver", lambda table: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        jpsro.step()
    assert (jpsro.population.sizes, len(jpsro.records), len(jpsro._pending)) == (sizes, n, pending)
    assert jpsro.table.sizes == sizes


def test_jpsro_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="correlated meta-solver"):
        pb.JPSRO(KUHN, solver="nash")
    with pytest.raises(ValueError, match="stop_gap"):
        pb.JPSRO(KUHN, stop_gap=-1.0)


# -- plots ---------------------------------------------------------------------------------------------


def test_plots_overlay_lp_and_jpsro_gap() -> None:
    from pbmarl.plots import plot_against_lp, plot_jpsro_gap

    game = pb.load_game(KUHN)
    psro = pb.PSRO(game, solver="nash")
    psro.run(3, progress=False)
    xdo = pb.XDO(game, solver="lp")
    xdo.run(3, progress=False)
    fig = plot_against_lp({"PSRO": psro.history, "XDO": xdo.history}, game)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "PSRO" in labels and "XDO" in labels and any("sequence-form LP" in t for t in labels)
    jpsro = pb.JPSRO(game, solver="mwcce")
    jpsro.run(3, progress=False)
    fig = plot_jpsro_gap(jpsro.history, reference={"OpenSpiel": [2.0, 1.0]})
    assert len(fig.axes[0].get_lines()) == 2
    with pytest.raises(ValueError, match="gap"):
        plot_jpsro_gap(psro.history)
    with pytest.raises(TypeError, match="sequence_form_lp"):
        plot_against_lp(psro.history, game, lp=object())
