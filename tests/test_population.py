"""Population: ids, metadata, mixtures and save/load."""

import numpy as np
import pytest

import pbmarl as pb


@pytest.fixture()
def kuhn():
    return pb.load_game("kuhn_poker")


def test_add_returns_ids_and_keeps_order(kuhn):
    pop = pb.Population(kuhn)
    assert pop.add(0, pb.RandomPolicy(kuhn)) == "p0/0"
    assert pop.add(1, pb.RandomPolicy(kuhn), name="uniform", iteration=0, origin="init") == "p1/0"
    assert pop.add(0, pb.TabularPolicy.random(kuhn, seed=0)) == "p0/1"
    assert pop.sizes == (2, 1)
    assert pop.member("p1/0").meta == {"iteration": 0, "origin": "init"}
    frame = pop.to_frame()
    assert list(frame.index) == ["p0/0", "p0/1", "p1/0"]
    assert frame.loc["p1/0", "name"] == "uniform"


def test_bad_adds_change_nothing(kuhn):
    pop = pb.Population(kuhn)
    pop.add(0, pb.RandomPolicy(kuhn))
    with pytest.raises(ValueError, match="player 2 is out of range"):
        pop.add(2, pb.RandomPolicy(kuhn))
    with pytest.raises(ValueError, match="leduc_poker"):
        pop.add(1, pb.RandomPolicy(pb.load_game("leduc_poker")))
    with pytest.raises(TypeError, match="Policy"):
        pop.add(1, "not a policy")
    assert pop.sizes == (1, 0)


def test_mixture_checks_distributions(kuhn):
    pop = pb.Population(kuhn)
    for p in (0, 1):
        pop.add(p, pb.RandomPolicy(kuhn))
        pop.add(p, pb.policies.FixedPolicy.pure(kuhn, 0))
    mixes = pop.mixture([[0.3, 0.7], [1.0, 0.0]])
    assert mixes[0].weights.tolist() == [0.3, 0.7]
    with pytest.raises(ValueError, match="player 1's distribution"):
        pop.mixture([[0.3, 0.7], [0.5, 0.6]])
    with pytest.raises(ValueError, match="one per player"):
        pop.mixture([[0.3, 0.7]])


def test_save_load_round_trip_is_exact(tmp_path, kuhn):
    pop = pb.Population(kuhn)
    pop.add(0, pb.TabularPolicy.random(kuhn, seed=1), name="br", iteration=1, stats={"value": 0.5})
    pop.add(1, pb.MLPPolicy(kuhn, hidden=(8,), seed=0))
    pop.add(1, pb.policies.FixedPolicy(kuhn, [0.2, 0.8]))
    pop.save(tmp_path / "pop")
    back = pb.Population.load(tmp_path / "pop")
    assert back.all_ids == pop.all_ids
    assert back.member("p0/0").meta == {"iteration": 1, "stats": {"value": 0.5}}
    infos = kuhn.tree().infosets[1]
    for a, b in zip(pop[1], back[1]):
        np.testing.assert_array_equal(a.action_probabilities(infos.obs, infos.legal, infos.keys),
                                      b.action_probabilities(infos.obs, infos.legal, infos.keys))


def test_load_rejects_another_game(tmp_path, kuhn):
    pop = pb.Population(kuhn)
    pop.save(tmp_path / "pop")
    with pytest.raises(ValueError, match="kuhn_poker"):
        pb.Population.load(tmp_path / "pop", game=pb.load_game("leduc_poker"))


def test_matrix_game_population_round_trip(tmp_path):
    game = pb.MatrixGame([[1, 2], [3, 4]], name="tiny")
    pop = pb.Population(game)
    pop.add(0, pb.policies.FixedPolicy.pure(game, 1))
    pop.save(tmp_path / "pop")
    back = pb.Population.load(tmp_path / "pop")
    assert np.array_equal(back.game.payoffs, game.payoffs)
    assert back[0][0].probs.tolist() == [0.0, 1.0]
