"""What every run shares: the `Run` base, `Stop`, records and history, and the run folder.

    import pbmarl as pb
    run = pb.PSRO("kuhn_poker", seed=0)
    run.run(until=pb.Stop(iterations=10, exploitability=0.01))
    run.save("runs/kuhn"); run = pb.load_run("runs/kuhn")

A run's options are checked by `pbmarl.config` and its progress bar is `pbmarl.progress`'s, one layer down.
"""

from pbmarl.runs.base import Run
from pbmarl.runs.folder import RunFolderError, SavedRun, State, load_run, save_run
from pbmarl.runs.records import MeasuredRecord, Record, Records, history_frame, shared_row
from pbmarl.runs.stop import Stop

__all__ = ["MeasuredRecord", "Record", "Records", "Run", "RunFolderError", "SavedRun", "State", "Stop", "history_frame", "load_run",
           "save_run", "shared_row"]
