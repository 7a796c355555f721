"""The exact engine stays within memory: the estimate's spread, the default budget, the watchdog,
Ctrl-C and the progress bar of a long walk.

Every walk here is small (3-player Leduc: 1.8 million histories, about 0.3 GB when walked to
the end); the watchdog is tested with a budget of a few MB, never by filling the machine.
"""

from __future__ import annotations

import tracemalloc

import pytest

import pbmarl as pb
import pbmarl.games.tree as tree_module
import pbmarl.games.walk_guard as guard_module
from pbmarl.games.tree import NotExact, WalkOverBudget, check_fits
from pbmarl.games.tree_cache import game_tree
from pbmarl.games.tree_size import estimate_memory, estimate_spread

GB = 2.0**30
LEDUC3 = "leduc_poker(players=3)"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PBMARL_TREE_CACHE", str(tmp_path))
    return tmp_path


def _no_walk(*args: object, **kwargs: object) -> None:
    raise AssertionError("the walk started")


def test_estimate_has_an_upper_quantile_over_probe_seeds() -> None:
    kuhn = estimate_spread(pb.load_game("kuhn_poker"))
    assert kuhn.exact and kuhn.mean == kuhn.high and kuhn.mean.histories == 58
    liars = estimate_spread(pb.load_game("liars_dice"), seeds=8, quantile=0.9)
    assert not liars.exact and liars.seeds == 8
    # heavy-tailed probes: the seeds disagree, and the upper quantile lies above their mean
    assert liars.high.histories > liars.mean.histories > 0
    assert liars.high.terminals > liars.mean.terminals
    assert "90% quantile of 8 probe seeds" in liars.describe()
    with pytest.raises(ValueError, match="quantile"):
        estimate_spread(pb.load_game("liars_dice"), quantile=1.5)


def test_default_budget_leaves_half_of_what_is_available(monkeypatch) -> None:
    game = pb.load_game(LEDUC3)
    high = estimate_memory(game, estimate_spread(game).high)
    # a machine where the upper estimate needs 2/3 of what is free: 80% would have accepted it
    monkeypatch.setattr(tree_module, "available_memory", lambda: 1.5 * high)
    with pytest.raises(NotExact, match=r"50% of the .* GB available; memory= sets it.*memory=\d"):
        check_fits(game)
    assert check_fits(game, memory=1.01 * high).high.histories > 1e6  # memory= raises the budget


def test_trade_comm_is_refused_before_its_walk_on_the_issues_machine(monkeypatch) -> None:
    monkeypatch.setattr(tree_module, "available_memory", lambda: 23.3 * GB)  # what the issue's machine had free
    monkeypatch.setattr(tree_module, "_walk", _no_walk)
    with pytest.raises(NotExact, match=r"'trade_comm' is too large.*1e\+08 histories.*GB of memory is available.*memory="):
        pb.ExactEvaluator(pb.load_game("trade_comm"))


def test_watchdog_stops_a_walk_past_its_budget_and_frees_it(monkeypatch, _own_cache) -> None:
    # an estimate that undercounts (as it does 3x on two-dice liar's dice) lets the walk start
    monkeypatch.setattr(tree_module, "estimate_memory", lambda game, size: 0.0)
    game = pb.load_game(LEDUC3)
    budget = 16 * 2**20
    tracemalloc.start()
    try:
        with pytest.raises(WalkOverBudget) as info:
            pb.ExactEvaluator(game, memory=budget)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    exc = info.value
    assert isinstance(exc, MemoryError) and isinstance(exc, NotExact)  # PSRO's fallback to sampling still applies
    message = str(exc)
    assert "resident memory grew by" in message and "budget of 0.02 GB (memory=1.68e+07)" in message
    assert "pass memory= in bytes, e.g. pb.ExactEvaluator(game, memory=" in message
    grown = float(message.split("grew by ")[1].split(" GB")[0]) * GB
    assert budget < grown < 4 * budget  # stopped soon after the budget was passed
    # the exception (and the walk's frame in its traceback) is still alive: what it built is not
    assert current < peak / 4
    assert "_tree_cache" not in game.__dict__ and not list(_own_cache.iterdir())


def test_ctrl_c_stops_the_walk_frees_it_and_caches_nothing(monkeypatch, _own_cache) -> None:
    seen: list[int] = []

    class Interrupting(guard_module.WalkGuard):
        def check(self, nodes: int) -> str | None:
            seen.append(nodes)
            if len(seen) == 3:  # as Ctrl-C lands there (interrupt_main would reach the main thread, which under
                raise KeyboardInterrupt  # pytest-xdist is not the one running the test)
            return super().check(nodes)

    monkeypatch.setattr(tree_module, "WalkGuard", Interrupting)
    monkeypatch.setattr(tree_module, "CHECK_EVERY", 1000)
    game = pb.load_game(LEDUC3)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        with pytest.raises(KeyboardInterrupt) as info:
            game_tree(game)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == [1000, 2000, 3000]  # stopped within the check that saw it, not at the end of 1.8M histories
    assert any("interrupted" in note for note in getattr(info.value, "__notes__", ["interrupted"]))
    assert current - base < (peak - base) / 2  # what the walk built is freed (measured from where it started)
    assert "_tree_cache" not in game.__dict__ and not list(_own_cache.iterdir())


def test_a_long_walk_shows_progress_and_a_short_or_silenced_one_does_not(monkeypatch, capsys) -> None:
    monkeypatch.setattr(tree_module, "CHECK_EVERY", 1000)
    monkeypatch.setattr(guard_module, "PROGRESS_AFTER_SECONDS", 0.0)  # as if the walk had run a while
    tree_module.build_tree(pb.load_game("leduc_poker"), progress=True)
    err = capsys.readouterr().err
    assert "walking 'leduc_poker'" in err and "history" in err and "GB" in err
    tree_module.build_tree(pb.load_game("leduc_poker"), progress=False)
    monkeypatch.setattr(guard_module, "PROGRESS_AFTER_SECONDS", 3600.0)
    tree_module.build_tree(pb.load_game("leduc_poker"), progress=True)
    assert "walking" not in capsys.readouterr().err


def test_memory_must_be_a_positive_number_of_bytes() -> None:
    with pytest.raises(ValueError, match=r"memory must be a positive number of bytes.*got -1"):
        pb.ExactEvaluator(pb.load_game("kuhn_poker"), memory=-1)


@pytest.mark.parametrize("name", ["liars_dice(numdice=2,dice_sides=4)",
                                  "goofspiel(num_cards=7,imp_info=True,points_order=descending)"])
def test_the_large_trees_that_fit_today_are_still_accepted_on_the_issues_machine(name: str, monkeypatch) -> None:
    # 33.6 and 32.5 million histories, walked in the README on a machine like the issue's; only estimated here
    monkeypatch.setattr(tree_module, "available_memory", lambda: 23.3 * GB)
    size = check_fits(pb.load_game(name))
    assert size.high.histories > 1e7
