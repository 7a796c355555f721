"""The watch kept over a tree walk: its memory against a budget, and a progress bar when it is long.

The walk (`pbmarl.games.tree`) calls `WalkGuard.check` every `CHECK_EVERY` histories, a few
times a second. Each check reads the process's resident memory (`resident_memory`, a few
microseconds) and, once it has grown by more than the budget since the walk began, returns
the refusal to raise: what it measured, the budget, where the budget came from and how to
raise it (``memory=``). Once the walk has run `PROGRESS_AFTER_SECONDS`, a progress bar
(`pbmarl.progress.progress_bar`) counts histories against the estimate, with the memory grown
beside the budget.

Ctrl-C needs no help here: the walk is a Python loop, so KeyboardInterrupt arrives within
a history or two; the walk then frees what it built and keeps and caches nothing.

Resident memory is what the machine sees, so it counts what the walk's Python objects
really cost. It misses memory the process freed earlier and now reuses (the walk then
grows less than it allocates) and counts what other threads allocate meanwhile.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from pbmarl.games.tree_size import resident_memory

#: histories between two checks (about 0.05-0.15 s of walking)
CHECK_EVERY = 8192
#: a walk that has run this long shows a progress bar (where bars are shown, see `progress_bar`)
PROGRESS_AFTER_SECONDS = 3.0

_GB = 2.0**30


class WalkGuard:
    """Measures one walk; see the module doc.

    Args:
        name: the game's name, for the bar and the refusal.
        budget: bytes the process's resident memory may grow by during the walk.
        origin: how `budget` was set, for the refusal (``"memory=..."`` or the share of what was available).
        expected: the estimated number of histories (the bar's total).
        progress: True shows the bar, False never; None shows it in a notebook or a terminal.
    """

    def __init__(self, name: str, *, budget: float, origin: str, expected: float, progress: bool | None) -> None:
        self.name, self.budget, self.origin = name, float(budget), origin
        self.expected, self.progress = expected, progress
        self.start_memory = resident_memory()
        if self.start_memory is None:
            warnings.warn(f"{name!r}: this platform does not tell a process's memory, so the tree walk is held to its "
                          "estimate only, not watched", stacklevel=4)
        self.start = time.perf_counter()
        self.grown = 0.0  # the largest growth seen so far, in bytes
        self._bar: Any = None
        self._bar_asked = progress is False
        self._shown = 0

    def check(self, nodes: int) -> str | None:
        """Measure after `nodes` histories: None while within budget, else the refusal's message."""
        now = resident_memory()
        if now is not None and self.start_memory is not None:
            self.grown = max(self.grown, now - self.start_memory)
        if self.grown > self.budget:
            return self.refusal(nodes)
        if not self._bar_asked and time.perf_counter() - self.start > PROGRESS_AFTER_SECONDS:
            from pbmarl.progress import progress_bar

            self._bar_asked = True
            self._bar = progress_bar(self.progress, total=max(int(self.expected), 1), desc=f"walking {self.name!r}",
                                     unit="history")
        if self._bar is not None:
            self._bar.update(nodes - self._shown)
            self._shown = nodes
            self._bar.set_postfix_str(f"{self.grown / _GB:.2f} of {self.budget / _GB:.2f} GB", refresh=False)
        return None

    def refusal(self, nodes: int) -> str:
        seconds = time.perf_counter() - self.start
        if nodes < self.expected:  # grown so far, scaled to the whole estimated tree
            need = self.grown * self.expected / max(nodes, 1)
            scale = f"at that rate all {self.expected:.2g} estimated histories need about {need / _GB:.3g} GB"
        else:
            need = 2 * self.grown
            scale = f"the tree is larger than its estimate of {self.expected:.2g} histories"
        return (
            f"game {self.name!r}: the tree walk was stopped after {nodes:,} histories ({seconds:.1f} s) because this "
            f"process's resident memory grew by {self.grown / _GB:.2f} GB, past the walk's budget of "
            f"{self.budget / _GB:.2f} GB ({self.origin}); {scale}. What the walk built was freed. To allow more, "
            f"pass memory= in bytes, e.g. pb.ExactEvaluator(game, memory={1.25 * need:.2g}); or use a sampling "
            "evaluator (pb.RolloutPool) and an RL oracle (pb.DQN, pb.PPO)"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
