"""Tree size estimates, the memory check and the disk cache of built trees."""

from __future__ import annotations

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.games.tree import NotExact, check_fits
from pbmarl.games.tree_cache import cache_path, load_cached_tree, save_cached_tree
from pbmarl.games.tree_size import estimate_size


def test_estimate_is_exact_for_small_trees_and_close_for_liars_dice() -> None:
    kuhn = estimate_size(pb.load_game("kuhn_poker"))
    assert kuhn.exact and kuhn.histories == pb.load_game("kuhn_poker").tree().num_nodes == 58
    liars = estimate_size(pb.load_game("liars_dice")).histories
    assert 294_883 / 2 < liars < 294_883 * 2  # the root-only estimate was six times too small


def test_memory_check_refuses_with_the_estimate_and_what_is_available() -> None:
    with pytest.raises(NotExact, match=r"need about .* GB to walk and .* GB of memory is available"):
        check_fits(pb.load_game("leduc_poker"), memory=1e4)
    with pytest.raises(ValueError, match="too large for the exact engine"):
        pb.ExactEvaluator(pb.load_game("connect_four"))


def test_a_long_walk_is_announced_with_its_time_and_memory(monkeypatch) -> None:
    import pbmarl.games.tree as tree_module

    monkeypatch.setattr(tree_module, "WALK_RATE", 0.1)  # as if the machine walked 0.1 histories a second
    with pytest.warns(UserWarning, match=r"'leduc_poker': walking about 9.\d+e\+03 histories takes about \d+ minutes"):
        tree = tree_module.build_tree(pb.load_game("leduc_poker"))
    assert tree.num_nodes == 9_457


def test_cached_tree_loads_identically_and_damaged_entries_are_ignored(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PBMARL_TREE_CACHE", str(tmp_path))
    game = pb.load_game("leduc_poker")
    tree = game.tree()
    path = save_cached_tree(game, tree)
    assert path is not None and path == cache_path(game) and path.parent == tmp_path
    loaded = load_cached_tree(pb.load_game("leduc_poker"))
    assert loaded is not None and loaded.num_nodes == tree.num_nodes
    np.testing.assert_array_equal(loaded.terminal_seq, tree.terminal_seq)
    for a, b in zip(loaded.infosets, tree.infosets):
        assert a.keys == b.keys
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.parent_seq, b.parent_seq)
    # a fresh game picks the cached tree up through Game.tree()
    fresh = pb.load_game("leduc_poker")
    assert fresh.tree().num_nodes == tree.num_nodes
    # flip bytes in the middle of the file: the checksum no longer matches, the entry is ignored
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert load_cached_tree(pb.load_game("leduc_poker")) is None
    path.write_bytes(b"not an npz")
    assert load_cached_tree(pb.load_game("leduc_poker")) is None


def test_cache_can_be_switched_off(monkeypatch) -> None:
    monkeypatch.setenv("PBMARL_TREE_CACHE", "0")
    assert cache_path(pb.load_game("kuhn_poker")) is None



def test_cached_recall_keys_are_rebuilt_identically(tmp_path, monkeypatch) -> None:
    import warnings

    monkeypatch.setenv("PBMARL_TREE_CACHE", str(tmp_path))
    game = pb.load_game("goofspiel(num_cards=4)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tree = game.tree()
    assert tree.recall_keys and save_cached_tree(game, tree) is not None
    loaded = load_cached_tree(pb.load_game("goofspiel(num_cards=4)"))
    assert loaded is not None and loaded.recall_keys
    for a, b in zip(loaded.infosets, tree.infosets):
        assert a.keys == b.keys
