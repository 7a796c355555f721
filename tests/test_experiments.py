"""Experiments without Ray: specs refused before any trial, loggers read back with each tool's own reader,
rliable statistics, plots and the report (the Tune side is in test_experiments_ray.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbmarl as pb
from pbmarl.experiments.grid import Grid

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "experiments"


# -- bad specs are refused before any trial starts ---------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    ({"game": "leduc_pokr"}, "game entry 0 'leduc_pokr': unknown game 'leduc_pokr'; did you mean 'leduc_poker'"),
    ({"run": [pb.spec("PSR")]}, "run PSR: unknown run type 'PSR'; did you mean 'PSRO'? Known run types: PSRO"),
    ({"run": [pb.spec(pb.PSRO, solvr="nash")]}, "unknown option 'solvr' for PSRO; did you mean 'solver'? Accepted"),
    ({"run": [pb.spec(pb.PSRO, solver="nsh")]}, "option 'solver': unknown meta-solver 'nsh'; did you mean 'nash'"),
    ({"run": [pb.spec(pb.SAC, lr=-1.0)]}, "run SAC(lr=-1.0): lr must be a positive number, got -1.0"),
    ({"run": [pb.spec(pb.MARL, learners={"team": pb.spec("MAPO")})]}, "unknown part type 'MAPO'; did you mean 'MAPPO'"),
    ({"stop": {"iteration": 3}}, "unknown stop condition 'iteration'; did you mean 'iterations'? Accepted"),
    ({"run": []}, "empty grid: run= has no entries"),
    ({"seeds": []}, "empty grid: seeds= has no entries"),
    ({"seeds": [0, 0]}, "duplicate trial: seeds entries 0 and 1 are both 0"),
    ({"run": [pb.spec(pb.PSRO), pb.spec("PSRO")]}, "duplicate trial: run entries 0 and 1 are both 'PSRO'"),
    ({"run": [pb.spec(pb.PSRO, solver="rm"), pb.spec(pb.PSRO, solver="rm", name="regret")]},
     "duplicate trial: run entries 0 and 1 are both 'regret'"),
    ({"loggers": ["tensorbord"]}, "unknown logger 'tensorbord'; did you mean 'tensorboard'"),
    ({"run": [pb.spec(pb.PSRO, learner=pb.ExactBestResponse)]}, "option 'learner' must be plain data"),
])
def test_a_bad_spec_is_refused_naming_the_entry(tmp_path, kwargs, message) -> None:
    args = {"game": "kuhn_poker", "run": [pb.spec(pb.PSRO, solver="nash")], "seeds": [0], "stop": {"iterations": 2}}
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError)) as err:
        pb.Experiment("bad", args.pop("game"), args.pop("run"), root=tmp_path, **args)
    assert message in str(err.value)
    assert not (tmp_path / "bad").exists()


def test_a_yaml_spec_refuses_an_unknown_key(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown experiment key 'seed'; did you mean 'seeds'"):
        pb.Experiment.from_dict({"name": "x", "game": "kuhn_poker", "run": {"type": "PSRO"}, "seed": [0]})


@pytest.mark.parametrize("name", ["leduc_psro", "pendulum_sac_td3", "spread_mappo_ippo"])
def test_the_example_specs_check_and_round_trip_through_json(tmp_path, name) -> None:
    exp = pb.Experiment.from_yaml(EXAMPLES / f"{name}.yaml", root=tmp_path)
    assert len(exp.trials) == len(exp.grid.games) * len(exp.grid.runs) * len(exp.grid.seeds) >= 10
    data = json.loads(json.dumps(exp.grid.to_dict()))
    again = Grid.from_dict(data)
    assert again.to_dict() == exp.grid.to_dict()
    assert len({t.key for t in exp.trials}) == len(exp.trials)


def test_a_spec_builds_the_run_it_names() -> None:
    s = pb.spec(pb.MARL, learners={"team": pb.spec(pb.learners.IPPO, steps_per_round=40, hidden=[16])}, num_envs=2)
    assert s.label == "MARL(learners={team: IPPO(hidden=[16], steps_per_round=40)}, num_envs=2)"
    run = pb.experiments.RunSpec.from_dict(json.loads(json.dumps(s.to_dict()))).build(
        "pettingzoo:simple_spread_v3(N=2, max_cycles=5)", seed=3)
    try:
        assert type(run.learners["team"]).__name__ == "IPPO" and run.seed == 3 and run.config.num_envs == 2
    finally:
        run.close()


# -- loggers: every run takes loggers=, read back with each tool's own reader ----------------------------------
def test_tensorboard_events_read_back_with_tensorboards_reader(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = pb.PSRO("kuhn_poker", seed=0)
    with pb.experiments.TensorBoardLogger(tmp_path / "tb") as tb:
        run.run(3, progress=False, loggers=[tb])
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    assert {"exploitability", "nash_conv", "env_steps", "wall_time", "time/oracle"} <= set(acc.Tags()["scalars"])
    events = acc.Scalars("exploitability")
    assert [e.step for e in events] == [1, 2, 3]  # exact PSRO plays no env steps: it steps by iteration
    assert np.allclose([e.value for e in events], run.history["exploitability"].iloc[1:], rtol=1e-6)
    assert {"payoff_table/text_summary", "meta_strategy/text_summary"} <= set(acc.Tags()["tensors"])


def test_a_control_run_logs_against_env_steps_and_the_attribute_form_works(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = pb.SAC("gym:Pendulum-v1", seed=0, num_envs=1, steps_per_round=50, learning_starts=20, batch_size=16,
                 hidden=(8,))
    run.loggers = [pb.experiments.TensorBoardLogger(tmp_path / "tb"), pb.experiments.CSVLogger(tmp_path / "history.csv")]
    run.run(2, progress=False)
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    returns = [t for t in acc.Tags()["scalars"] if t.startswith("return/")]
    assert returns and [e.step for e in acc.Scalars(returns[0])] == list(run.history["env_steps"])
    assert pd.read_csv(tmp_path / "history.csv")["env_steps"].tolist() == list(run.history["env_steps"])
    with pytest.raises(TypeError, match="loggers must be pbmarl loggers"):
        run.run(1, progress=False, loggers=["tensorboard"])  # type: ignore[list-item]


def test_mlflow_store_read_back_through_its_client(tmp_path) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    run = pb.PSRO("kuhn_poker", seed=0)
    logger = pb.experiments.MLflowLogger(tmp_path / "mlruns", experiment="kuhn", run_name="nash-s0")
    run.run(2, progress=False, loggers=[logger])
    logger.close()
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    history = client.get_metric_history(logger.run_id, "exploitability")
    assert [m.step for m in history] == [1, 2]
    assert np.allclose([m.value for m in history], run.history["exploitability"].iloc[1:])
    files = {f.path for f in client.list_artifacts(logger.run_id, "payoff_table")}
    assert files == {"payoff_table/iteration_0001.csv", "payoff_table/iteration_0002.csv"}
    assert client.get_run(logger.run_id).info.status == "FINISHED"


def test_wandb_offline_run_holds_the_same_names(tmp_path) -> None:
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    run = pb.PSRO("kuhn_poker", seed=0)
    logger = pb.experiments.WandbLogger(tmp_path, project="kuhn", name="nash-s0")
    run.run(2, progress=False, loggers=[logger])
    logger.close()
    expected = len(run.history["exploitability"].iloc[1:])
    deadline = time.monotonic() + 30
    while True:  # W&B's service process writes the file after finish() returns: wait for the rows, a while at most
        paths = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
        rows = []
        for data in _wandb_records(paths[0].read_bytes()) if len(paths) == 1 else []:
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(data)
            if rec.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): item.value_json for item in rec.history.item})
        scalars = [r for r in rows if "exploitability" in r]
        if len(scalars) >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(paths) == 1
    assert [float(r["exploitability"]) for r in scalars] == pytest.approx(list(run.history["exploitability"].iloc[1:]))
    assert {"nash_conv", "time/oracle", "iteration"} <= set(scalars[0])


def _wandb_records(raw: bytes) -> list[bytes]:
    """The protobuf records of a ``.wandb`` file: W&B's 7-byte header, then LevelDB's log format (32 KiB
    blocks; each chunk a 7-byte header of CRC, little-endian length and type: full 1, first 2, middle 3, last 4)."""
    assert raw[:4] == b":W&B"
    out, part, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(raw[pos + 4:pos + 6], "little"), raw[pos + 6]
        chunk, pos = raw[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            continue
        part = chunk if kind in (1, 2) else part + chunk
        if kind in (1, 4):
            out.append(part)
    return out


def test_a_missing_extra_says_what_to_install(monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_mlflow(name, *args, **kwargs):
        if name.startswith("mlflow"):
            raise ImportError("No module named 'mlflow'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mlflow)
    with pytest.raises(ImportError, match=r"pip install 'pbmarl\[tracking\]'"):
        pb.experiments.MLflowLogger("unused")


# -- statistics, plots, report -------------------------------------------------------------------------------
def _results(runs: dict[str, int]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for method, n in runs.items():
        base = {"a": 0.05, "b": 0.2, "c": 0.4}[method]
        for seed in range(n):
            for it in range(1, 11):
                rows.append({"experiment": "e", "trial": f"{method}-{seed}", "game": "g", "method": method,
                             "seed": seed, "iteration": it, "env_steps": 100 * it, "wall_time": 0.1 * it,
                             "exploitability": base * (1 + rng.random()) * 10 ** (-it / 5)})
    return pd.DataFrame(rows)


def test_compare_matches_rliable_and_orders_methods() -> None:
    from pbmarl.experiments.rliable_compat import load, seeded

    results = _results({"a": 5, "b": 5, "c": 5})
    comp = pb.compare(results, metric="exploitability", reps=300, poi_reps=50)
    rly, metrics = load()
    finals = results.sort_values("iteration").groupby("trial").last()
    a = finals[finals["method"] == "a"]["exploitability"].to_numpy().reshape(-1, 1)
    with seeded(0):
        point, interval = rly.get_interval_estimates({"a": a}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=300)
    assert comp.table.loc[("g", "a"), "iqm"] == pytest.approx(point["a"][0])
    assert comp.table.loc[("g", "a"), "iqm_low"] <= comp.table.loc[("g", "a"), "iqm"] <= comp.table.loc[("g", "a"), "iqm_high"]
    assert comp.improvement.loc[("g", "a", "c"), "probability"] == 1.0  # lower exploitability is better
    # one game is one task: the median is the median run (rliable's aggregate_median would repeat the mean)
    assert comp.table.loc[("g", "a"), "median"] == pytest.approx(np.median(a))
    assert np.median(a) != pytest.approx(a.mean())
    assert comp.table.loc[("g", "a"), "median_low"] <= np.median(a) <= comp.table.loc[("g", "a"), "median_high"]
    early = pb.compare(results, metric="exploitability", env_steps=350, reps=100, poi_reps=10)
    assert (early.table["mean"] > comp.table["mean"]).all()  # at 300 env steps, before the end
    assert comp.improvement.loc[("g", "c", "a"), "probability"] == 0.0
    assert pb.compare(results, metric="exploitability", reps=100, poi_reps=10).table.equals(
        pb.compare(results, metric="exploitability", reps=100, poi_reps=10).table)  # seeded resampling


def test_compare_refuses_unequal_run_counts_unless_told() -> None:
    results = _results({"a": 5, "b": 3})
    with pytest.raises(ValueError, match="unequal numbers of runs on 'g': a 5, b 3"):
        pb.compare(results, metric="exploitability")
    assert pb.compare(results, metric="exploitability", allow_unequal=True, reps=100, poi_reps=10).table["runs"].tolist() == [5, 3]


def test_plots_stay_legible_with_eight_methods() -> None:
    import matplotlib.pyplot as plt

    from pbmarl.experiments import plots

    frames = []
    for k in range(8):
        r = _results({"a": 3})
        r["method"], r["trial"] = f"method-{k}", r["trial"] + f"-{k}"
        r["exploitability"] *= k + 1
        frames.append(r)
    results = pd.concat(frames)
    comp = pb.compare(results, reps=50, poi_reps=10)
    for fig in (plots.curves(results), plots.intervals(comp), plots.profiles(comp, reps=20),
                plots.probability_matrix(comp)):
        fig.canvas.draw()
        assert len(fig.axes[0].get_lines()) in (0, 8) or fig.axes[0].images or fig.axes[0].patches
        plt.close(fig)
    fig = plots.curves(results)
    assert fig.axes[0].get_yscale() == "log" and len(fig.axes[0].get_legend_handles_labels()[1]) == 8
    plt.close(fig)
