"""One progress bar for an experiment: trials done, running and failed (a Ray Tune progress reporter, in the driver).

Counted from the trials' statuses each time Tune's loop asks, so a restored experiment starts at
the trials already done and a retried trial counts once. It is Tune's ``RunConfig(progress_reporter=)``
rather than a callback: a run config with callbacks makes Tune import its MLflow and W&B
integrations (and so MLflow and W&B themselves, where installed) to count them for its usage
statistics, about a second of CPU at each experiment's start. Imported only when an experiment runs.
"""

from __future__ import annotations

from typing import Any

from ray.tune import ProgressReporter

from pbmarl.progress import progress_bar

__all__ = ["TrialProgress"]


class TrialProgress(ProgressReporter):
    """A tqdm bar over the experiment's trials (`progress` as in `Run.run`: None shows it when interactive)."""

    def __init__(self, total: int, *, progress: bool | None = None) -> None:
        self.total, self.progress = total, progress
        self.bar: Any = None
        self.seen = (0, 0, 0)

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles its run config, the reporter included: not the bar
        return {"total": self.total, "progress": self.progress, "bar": None, "seen": (0, 0, 0)}

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        return done or self._counts(trials) != self.seen

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        now = self._counts(trials)
        if now != self.seen and self.progress is not False:
            if self.bar is None:
                self.bar = progress_bar(self.progress, total=self.total, desc="trials", unit="trial")
                if self.bar is None:
                    self.progress = False
            if self.bar is not None:
                self.bar.update(now[0] - self.seen[0])
                self.bar.set_postfix_str(f"running {now[1]}, failed {now[2]}")
        self.seen = now
        if done:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
            self.seen = (0, 0, 0)

    @staticmethod
    def _counts(trials: list[Any]) -> tuple[int, int, int]:
        status = [t.status for t in trials]
        return status.count("TERMINATED"), status.count("RUNNING"), status.count("ERROR")
