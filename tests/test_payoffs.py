"""PayoffTable: growth, Welford statistics, exact cells, pandas views, save/load."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pbmarl as pb


@pytest.fixture()
def pop():
    game = pb.MatrixGame([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], name="rps")
    pop = pb.Population(game)
    for a in range(2):
        pop.add(0, pb.policies.FixedPolicy.pure(game, a))
        pop.add(1, pb.policies.FixedPolicy.pure(game, a))
    return pop


def test_table_shape_follows_population(pop):
    table = pb.PayoffTable(pop)
    assert table.shape == (2, 2, 2)
    assert np.isnan(table.values).all()
    assert len(table.missing_cells()) == 4


def test_growth_keeps_counts_and_means(pop):
    table = pb.PayoffTable(pop)
    table.update((0, 1), [[1.0, -1.0], [3.0, -3.0]])
    table.set_exact(("p0/1", "p1/0"), [1.0, -1.0])
    game = pop.game
    pop.add(1, pb.policies.FixedPolicy.pure(game, 2))
    pop.add(0, pb.policies.FixedPolicy.pure(game, 2))
    assert table.sizes == (3, 3)
    assert table.counts[0, 1] == 2 and table.values[0, 1].tolist() == [2.0, -2.0]
    assert table.exact[1, 0] and table.values[1, 0].tolist() == [1.0, -1.0]
    assert table.counts.sum() == 2 and int(table.evaluated.sum()) == 2
    assert np.isnan(table.values[2]).all() and np.isnan(table.values[:, 2]).all()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(-100, 100), min_size=2, max_size=2), min_size=1, max_size=40),
       st.integers(1, 5))
def test_welford_matches_numpy(samples, chunks):
    table = pb.PayoffTable.from_array(np.full((1, 1, 2), np.nan))
    data = np.asarray(samples)
    for part in np.array_split(data, min(chunks, len(data))):
        if len(part):
            table.update((0, 0), part)
    np.testing.assert_allclose(table.values[0, 0], data.mean(axis=0), atol=1e-9)
    assert table.counts[0, 0] == len(data)
    if len(data) >= 2:
        expected = data.std(axis=0, ddof=1) / np.sqrt(len(data))
        np.testing.assert_allclose(table.stderr[0, 0], expected, atol=1e-7)
    else:
        assert np.isnan(table.stderr[0, 0]).all()


def test_bad_updates_change_nothing(pop):
    table = pb.PayoffTable(pop)
    table.update((0, 0), [[1.0, -1.0]])
    before = (table.values.copy(), table.counts.copy())
    with pytest.raises(ValueError, match="out of range"):
        table.update((0, 5), [[1.0, -1.0]])
    with pytest.raises(ValueError, match="shape"):
        table.update((0, 0), [[1.0, -1.0, 0.0]])
    with pytest.raises(ValueError, match="finite"):
        table.update((0, 0), [[np.nan, 1.0]])
    with pytest.raises(ValueError, match="'p0/9' is not a member"):
        table.set_exact(("p0/9", "p1/0"), [0.0, 0.0])
    np.testing.assert_array_equal(table.values, before[0])
    np.testing.assert_array_equal(table.counts, before[1])


def test_frames(pop):
    table = pb.PayoffTable(pop)
    table.set_exact((0, 0), [0.0, 0.0])
    table.update((1, 0), [[1.0, -1.0], [1.0, -1.0], [0.0, 0.0]])
    frame = table.to_frame()
    assert frame.index.names == ["player_0", "player_1"]
    assert list(frame.columns) == ["payoff_0", "payoff_1", "count", "stderr_0", "stderr_1", "exact"]
    assert frame.loc[("p0/1", "p1/0"), "count"] == 3
    matrix = table.matrix(player=1)
    assert matrix.loc["p0/1", "p1/0"] == pytest.approx(-2 / 3)
    html = table.style().to_html()
    assert "±" in html and "0.000" in html


def test_from_array_and_matrix_requires_two_players():
    table = pb.PayoffTable.from_array(np.zeros((2, 2, 2, 3)))
    assert table.sizes == (2, 2, 2) and table.exact.all()
    with pytest.raises(ValueError, match="two-player"):
        table.matrix()
    zero_sum = pb.PayoffTable.from_array([[1, 2], [3, 4]])
    assert zero_sum.values[1, 0].tolist() == [3.0, -3.0]


def test_save_load_round_trip_is_exact(tmp_path, pop):
    table = pb.PayoffTable(pop)
    table.update((0, 1), np.random.default_rng(0).normal(size=(10, 2)))
    table.set_exact((1, 1), [0.5, -0.5])
    table.save(tmp_path / "table.npz")
    back = pb.PayoffTable.load(tmp_path / "table.npz", pop)
    np.testing.assert_array_equal(back.values, table.values)
    np.testing.assert_array_equal(back.stderr, table.stderr)
    np.testing.assert_array_equal(back.counts, table.counts)
    assert back.ids == table.ids
