"""The compiled-tree cache keeps a refused game's message, never the frames it was raised through (issue 47)."""

from __future__ import annotations

import gc
import weakref

import pytest

from pbmarl.games.registry import load_game
from pbmarl.rollout.compiled import _CACHE, NotCompilable, compiled_tree


class _Held:
    """Stands for what a caller's frame holds (a learner's snapshot, a replay buffer)."""


def _ask(game: object, held: _Held) -> NotCompilable:
    try:
        compiled_tree(game, max_nodes=10)  # type: ignore[arg-type]
    except NotCompilable as exc:
        return exc
    raise AssertionError("liars_dice compiled within 10 nodes")


def test_refused_game_keeps_no_frames() -> None:
    game = load_game("liars_dice")
    first = _ask(game, _Held())
    cached = _CACHE[game]
    assert isinstance(cached, NotCompilable) and cached.__traceback__ is None
    held = _Held()
    ref = weakref.ref(held)
    second = _ask(game, held)  # answered from the cache
    assert second is not cached and second is not first
    assert second.args == first.args and "more than 10 nodes" in str(second)
    assert cached.__traceback__ is None  # re-raising the cached object would have grown this by each caller's frames
    del held, second
    gc.collect()
    assert ref() is None, "the cache kept a caller's frame (and its locals) alive"


def test_larger_limit_compiles_again() -> None:
    game = load_game("kuhn_poker")
    with pytest.raises(NotCompilable, match="more than 3 nodes"):
        compiled_tree(game, max_nodes=3)
    assert compiled_tree(game).num_nodes > 3
