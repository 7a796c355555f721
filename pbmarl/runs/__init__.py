"""What every run shares: the `Run` base, `Stop`, records and history, configs, and the run folder.

    import pbmarl as pb
    run = pb.PSRO("kuhn_poker", seed=0)
    run.run(until=pb.Stop(iterations=10, exploitability=0.01))
    run.save("runs/kuhn"); run = pb.load_run("runs/kuhn")
"""

from pbmarl.runs.base import Run, progress_bar
from pbmarl.runs.config import Config, build_config, check_seed
from pbmarl.runs.folder import RunFolderError, SavedRun, State, load_run, save_run
from pbmarl.runs.records import Record, Records, history_frame, shared_row
from pbmarl.runs.stop import Stop

__all__ = ["Config", "Record", "Records", "Run", "RunFolderError", "SavedRun", "State", "Stop", "build_config",
           "check_seed", "history_frame", "load_run", "progress_bar", "save_run", "shared_row"]
