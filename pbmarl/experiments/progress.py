"""One progress bar for an experiment: trials done, running and failed (a Ray Tune callback, in the driver).

Counted from the trials' statuses at each step of Tune's loop, so a restored experiment starts at
the trials already done and a retried trial counts once. Imported only when an experiment runs.
"""

from __future__ import annotations

from typing import Any

from ray.tune import Callback

from pbmarl.progress import progress_bar

__all__ = ["TrialProgress"]


class TrialProgress(Callback):
    """A tqdm bar over the experiment's trials (`progress` as in `Run.run`: None shows it when interactive)."""

    def __init__(self, total: int, *, progress: bool | None = None) -> None:
        self.total, self.progress = total, progress
        self.bar: Any = None
        self.seen = (0, 0, 0)

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles its run config, callbacks included: not the bar
        return {"total": self.total, "progress": self.progress, "bar": None, "seen": (0, 0, 0)}

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        status = [t.status for t in trials]
        now = (status.count("TERMINATED"), status.count("RUNNING"), status.count("ERROR"))
        if now == self.seen:
            return
        if self.bar is None:
            self.bar = progress_bar(self.progress, total=self.total, desc="trials", unit="trial")
            if self.bar is None:
                self.progress = False
                return
        self.bar.update(now[0] - self.seen[0])
        self.bar.set_postfix_str(f"running {now[1]}, failed {now[2]}")
        self.seen = now

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.on_step_end(0, trials)
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.seen = (0, 0, 0)
