"""Experiments: grids of runs on Ray Tune, trackers for every run, and statistics a reviewer accepts.

    import pbmarl as pb
    exp = pb.Experiment("leduc", game="leduc_poker", run=[pb.spec(pb.PSRO, solver="nash")],
                        seeds=range(5), stop=pb.Stop(iterations=20))
    exp.run()
    pb.compare(exp.results, metric="exploitability")

The top "faces" layer: it may import anything in pbmarl, and nothing in pbmarl imports it back
(but ``pbmarl/__init__.py``'s lazy exports and the command line). Ray Tune, rliable, TensorBoard,
MLflow and W&B are imported only when used.
"""

from pbmarl.experiments.experiment import Experiment
from pbmarl.experiments.loggers import CSVLogger, MLflowLogger, TensorBoardLogger, WandbLogger
from pbmarl.experiments.saved import SavedResults, save_results
from pbmarl.experiments.spec import RunSpec, spec

__all__ = ["CSVLogger", "Experiment", "MLflowLogger", "RunSpec", "SavedResults", "TensorBoardLogger", "WandbLogger",
           "save_results", "spec"]
