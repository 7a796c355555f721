"""RolloutPool on the local backend: evaluate, fill, collect, seeding, bad input, interruption."""

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.rollout import EvalResult, Trajectories


@pytest.fixture(scope="module")
def kuhn():
    return pb.load_game("kuhn_poker")


def _population(game, extra=None):
    pop = pb.Population(game)
    for p in range(game.num_players):
        pop.add(p, pb.RandomPolicy(game), name="random")
        pop.add(p, pb.TabularPolicy.random(game, seed=p), name="tabular")
        pop.add(p, pb.MLPPolicy(game, hidden=(8,), seed=p), name="mlp")
        if extra is not None:
            pop.add(p, extra(game, p))
    return pop


def _snapshot(table):
    return table.values.copy(), table.counts.copy(), table.stderr.copy()


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_evaluate_same_seed_same_result(kuhn):
    pi = [pb.TabularPolicy.random(kuhn, seed=0), pb.Mixture([pb.RandomPolicy(kuhn), pb.policies.FixedPolicy.pure(kuhn, 1)])]
    with pb.RolloutPool(kuhn, seed=4) as pool:
        a = pool.evaluate(pi, 3_000, seed=11, keep_returns=True)
        b = pool.evaluate(pi, 3_000, seed=11, keep_returns=True)
        c = pool.evaluate(pi, 3_000, seed=12, keep_returns=True)
    assert isinstance(a, EvalResult) and a.episodes == 3_000 and a.returns.shape == (3_000, 2)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert not np.array_equal(a.returns, c.returns)
    assert a.steps == a.lengths.sum() and a.stderr.shape == (2,) and np.all(a.stderr > 0)
    # the pool's own seed drives calls without a seed: same pool seed, same sequence of results
    with pb.RolloutPool(kuhn, seed=4) as p1, pb.RolloutPool(kuhn, seed=4) as p2:
        r1 = [p1.evaluate(pi, 500).mean for _ in range(2)]
        r2 = [p2.evaluate(pi, 500).mean for _ in range(2)]
    np.testing.assert_array_equal(r1, r2)
    assert not np.array_equal(r1[0], r1[1])


def test_results_do_not_depend_on_worker_count_or_unit_order(kuhn):
    pi = [pb.TabularPolicy.random(kuhn, seed=0), pb.RandomPolicy(kuhn)]
    with pb.RolloutPool(kuhn, num_workers=1, unit_episodes=1000) as one, pb.RolloutPool(kuhn, num_workers=3, unit_episodes=1000) as three:
        a = one.evaluate(pi, 5_500, seed=3, keep_returns=True)
        b = three.evaluate(pi, 5_500, seed=3, keep_returns=True)
    np.testing.assert_array_equal(a.returns, b.returns)


def test_evaluate_matches_exact_values(kuhn):
    pop = _population(kuhn)
    sigma = [np.array([0.2, 0.5, 0.3]), np.array([0.6, 0.1, 0.3])]
    profile = pop.mixture(sigma)
    exact = pb.ExactEvaluator(kuhn).evaluate(profile)
    with pb.RolloutPool(kuhn, seed=0) as pool:
        res = pool.evaluate(profile, 60_000)
    assert np.all(np.abs(res.mean - exact) <= 5 * res.stderr), (res, exact)


def test_fill_samples_every_missing_cell_exactly(kuhn):
    pop = _population(kuhn)
    table = pb.PayoffTable(pop)
    with pb.RolloutPool(kuhn, seed=0, unit_episodes=700) as pool:
        rec = pool.fill(table, episodes=3_000)
    assert np.all(table.counts == 3_000)
    assert len(rec.cells) == 9 and rec.episodes == 9 * 3_000 and rec.rounds == 1
    exact = pb.PayoffTable(pop)
    pb.ExactEvaluator(kuhn).fill(exact)
    err = np.abs(table.values - exact.values)
    assert np.all(err <= 5 * table.stderr + 1e-9), (err, table.stderr)
    # a member added later: only the new cells are sampled
    pop.add(0, pb.policies.FixedPolicy.pure(kuhn, 0))
    with pb.RolloutPool(kuhn, seed=1) as pool:
        rec = pool.fill(table, episodes=500)
    assert len(rec.cells) == 3
    np.testing.assert_array_equal(table.counts, [[3_000] * 3] * 3 + [[500] * 3])


def test_fill_same_seed_same_table(kuhn):
    pop = _population(kuhn)
    tables = [pb.PayoffTable(pop) for _ in range(2)]
    for t in tables:
        with pb.RolloutPool(kuhn, seed=9) as pool:
            pool.fill(t, episodes=800)
    _same(_snapshot(tables[0]), _snapshot(tables[1]))


def test_fill_until_stderr(kuhn):
    pop = _population(kuhn)
    table = pb.PayoffTable(pop)
    with pb.RolloutPool(kuhn, seed=0) as pool:
        rec = pool.fill(table, episodes=200, until_stderr=0.03, max_episodes=20_000)
    assert rec.rounds >= 2
    se = np.nanmax(table.stderr, axis=-1)
    assert np.all((se < 0.03) | (table.counts >= 20_000))
    assert np.all(table.counts >= 200) and np.all(table.counts <= 20_000)
    assert rec.max_stderr == pytest.approx(se.max())
    # tightening an already sampled table samples only what is missing
    with pb.RolloutPool(kuhn, seed=1) as pool:
        before = table.counts
        pool.fill(table, episodes=200, until_stderr=0.02, max_episodes=50_000)
    assert np.all(table.counts >= before)
    assert np.all(np.nanmax(table.stderr, axis=-1) < 0.02)


def test_fill_skips_exact_cells(kuhn):
    pop = _population(kuhn)
    table = pb.PayoffTable(pop)
    table.set_exact((0, 0), [0.5, -0.5])
    with pb.RolloutPool(kuhn, seed=0) as pool:
        rec = pool.fill(table, episodes=300, until_stderr=0.05, max_episodes=1_000)
    assert (0, 0) not in rec.cells and table.exact[0, 0] and table.counts[0, 0] == 0
    np.testing.assert_array_equal(table[(0, 0)], [0.5, -0.5])


class _Interrupting(pb.RandomPolicy):
    """Raises KeyboardInterrupt on its n-th batch (set `armed` after adding it to a population)."""

    kind = "test_interrupting"
    armed: int | None = None

    def _probs(self, obs, legal_mask, keys):
        if self.armed is not None:
            self.armed -= 1
            if self.armed <= 0:
                raise KeyboardInterrupt
        return super()._probs(obs, legal_mask, keys)


@pytest.mark.parametrize("until_stderr", [None, 0.01])
def test_interrupted_fill_leaves_the_table_unchanged(kuhn, until_stderr):
    pop = _population(kuhn)
    table = pb.PayoffTable(pop)
    # the state engine asks the policy at every step, so the interrupt lands after some units completed
    with pb.RolloutPool(kuhn, seed=0, engine="states", unit_episodes=100) as pool:
        pool.fill(table, episodes=300)
        pop.add(1, _Interrupting(kuhn))
        before = _snapshot(table)
        # one batch per unit here (seat 1 acts once per Kuhn episode): units 1-4 of 9 finish first, and
        # with until_stderr the whole first round (9 units) does
        pop.member("p1/3").policy.armed = 5 if until_stderr is None else 12
        with pytest.raises(KeyboardInterrupt):
            pool.fill(table, episodes=300, until_stderr=until_stderr, max_episodes=1_000)
        after = _snapshot(table)
    _same([b[:, :3] for b in before], [a[:, :3] for a in after])
    assert np.all(np.isnan(after[0][:, 3])) and np.all(after[1][:, 3] == 0)


def test_bad_input_fails_fast_and_changes_nothing(kuhn):
    leduc = pb.load_game("leduc_poker")
    with pytest.raises(ValueError, match="unknown backend 'dask'"):
        pb.RolloutPool(kuhn, backend="dask")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_workers must be a positive int"):
            pb.RolloutPool(kuhn, num_workers=bad)
    with pytest.raises(ValueError, match="envs_per_worker"):
        pb.RolloutPool(kuhn, envs_per_worker=0)
    pop = _population(kuhn)
    table = pb.PayoffTable(pop)
    with pb.RolloutPool(kuhn, seed=0) as pool:
        pool.fill(table, episodes=100)
        before = _snapshot(table)
        pi = pb.RandomPolicy(kuhn)
        with pytest.raises(ValueError, match="made for game 'leduc_poker', not 'kuhn_poker'"):
            pool.evaluate([pi, pb.RandomPolicy(leduc)], 10)
        with pytest.raises(ValueError, match="needs 2 entries"):
            pool.evaluate([pi], 10)
        with pytest.raises(ValueError, match="needs 2 entries"):
            pool.evaluate([pi, pi, pi], 10)
        with pytest.raises(TypeError, match="Policy or a Mixture"):
            pool.evaluate([pi, "random"], 10)
        with pytest.raises(ValueError, match="episodes must be a positive int"):
            pool.evaluate([pi, pi], 0)
        with pytest.raises(ValueError, match="episodes must be a positive int"):
            pool.fill(table, episodes=-5)
        with pytest.raises(ValueError, match="until_stderr"):
            pool.fill(table, episodes=5, until_stderr=0.0)
        with pytest.raises(ValueError, match="max_episodes"):
            pool.fill(table, episodes=50, max_episodes=10, until_stderr=0.1)
        with pytest.raises(ValueError, match="bound to a Population"):
            pool.fill(pb.PayoffTable.from_array(np.zeros((2, 2))), episodes=10)
        other = pb.Population(leduc)
        other.add(0, pb.RandomPolicy(leduc))
        other.add(1, pb.RandomPolicy(leduc))
        with pytest.raises(ValueError, match="plays 'leduc_poker'"):
            pool.fill(pb.PayoffTable(other), episodes=10)
        with pytest.raises(ValueError, match="out of range"):
            pool.collect(2, pi, [pi, pi], 10)
        with pytest.raises(ValueError, match="made for game"):
            pool.collect(0, pb.RandomPolicy(leduc), [None, pi], 10)
        with pytest.raises(ValueError, match="one entry per seat"):
            pool.collect(0, pi, [None], 10)
    _same(before, _snapshot(table))
    with pytest.raises(RuntimeError, match="closed"):
        pool.evaluate([pi, pi], 10)


def test_collect_whole_episodes(kuhn):
    learner = pb.MLPPolicy(kuhn, hidden=(8,), seed=0)
    opponents = [pb.Mixture([pb.RandomPolicy(kuhn), pb.policies.FixedPolicy.pure(kuhn, 0)]), None]
    with pb.RolloutPool(kuhn, seed=0, unit_steps=1_000) as pool:
        a = pool.collect(1, learner, opponents, 2_500)
        b = pool.collect(1, learner, opponents, 2_500, seed=5)
        c = pool.collect(1, learner, opponents, 2_500, seed=5)
    assert isinstance(a, Trajectories) and len(a) >= 2_500 and a.player == 1
    np.testing.assert_array_equal(b.obs, c.obs)
    np.testing.assert_array_equal(b.action, c.action)
    for t in (a, b):
        assert np.all(np.diff(t.episode) >= 0)
        assert t.done[-1] and t.done.sum() == len(np.unique(t.episode))
        np.testing.assert_allclose(np.bincount(t.episode, weights=t.reward, minlength=t.num_episodes),
                                   t.episode_returns[:, 1])


def test_progress_bar_runs(kuhn, capsys):
    pi = pb.RandomPolicy(kuhn)
    with pb.RolloutPool(kuhn, seed=0, unit_episodes=500) as pool:
        res = pool.evaluate([pi, pi], 2_000, progress=True)
    assert res.episodes == 2_000
