"""Experiments on Ray Tune: the example specs end to end at tiny budgets, retries with errors kept, restore,
a trial reopening its run folder, and a two-node `ray.cluster_utils.Cluster` matching a local loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml

import pbmarl as pb
from pbmarl.cli import main

pytestmark = pytest.mark.ray
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "experiments"
SHARED = ["experiment", "trial", "game", "method", "options", "seed", "iteration", "env_steps", "episodes", "wall_time"]
TINY = {
    "pendulum_sac_td3": ({"env_steps": 100}, {"num_envs": 1, "steps_per_round": 50, "learning_starts": 20,
                                              "batch_size": 16, "hidden": [8], "budget": 100}),
    "spread_mappo_ippo": ({"env_steps": 80}, {"num_envs": 2}),
}


def _tiny(name: str, tmp_path: Path) -> Path:
    """The example spec with one seed and a budget of seconds (same grid otherwise)."""
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    data["seeds"] = [0]
    data["loggers"] = ["tensorboard"]
    if name == "leduc_psro":
        data["game"], data["stop"] = ["kuhn_poker"], {"iterations": 2}
        data["run"] = data["run"][:2]
    else:
        stop, options = TINY[name]
        data["stop"] = stop
        for run in data["run"]:
            if run["type"] == "MARL":
                run["learners"]["team"].update(steps_per_round=40, hidden=[16], epochs=1)
                run.update(options)
            else:
                run.update(options)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_psro_spec_runs_from_the_cli_and_reports(ray_session, tmp_path, capsys) -> None:
    spec = _tiny("leduc_psro", tmp_path)
    assert main(["experiment", str(spec), "--root", str(tmp_path), "--quiet"]) == 0
    folder = tmp_path / "leduc-psro"
    assert json.loads((folder / "experiment.json").read_text())["name"] == "leduc-psro"
    exp = pb.Experiment.load(folder)
    assert (exp.status["state"] == "finished").all()
    results = exp.results
    assert list(results.columns[:10]) == SHARED and len(results) == 2 * 3  # iterations 0, 1, 2 per trial
    run = pb.load_run(exp.trial_dir(0) / "run")
    assert isinstance(run, pb.PSRO) and run.iteration == 2
    assert {"params.json", "progress.csv", "result.json", "tensorboard", "finished.json"} <= \
        {p.name for p in exp.trial_dir(0).iterdir()}
    tune_rows = pd.read_csv(exp.trial_dir(0) / "progress.csv")  # Tune's own rows: at most one a second, the last kept
    assert tune_rows["iteration"].iloc[-1] == 2 and tune_rows["iteration"].is_monotonic_increasing
    assert json.loads((exp.trial_dir(0) / "result.json").read_text().splitlines()[-1])["iteration"] == 2
    assert main(["report", str(folder), "--reps", "50"]) == 0
    report = (folder / "report" / "report.md").read_text()
    assert "| kuhn_poker | PSRO(solver=nash) | 1 |" in report and "![Interval estimates](intervals.png)" in report
    assert (folder / "report" / "curves_iteration.png").stat().st_size > 1000


def test_the_progress_bar_counts_trials_done_running_and_failed(capsys) -> None:
    import pickle
    from types import SimpleNamespace

    from pbmarl.experiments.progress import TrialProgress

    reporter = TrialProgress(3, progress=True)
    trials = [SimpleNamespace(status="PENDING") for _ in range(3)]
    assert not reporter.should_report(trials)  # nothing to show yet
    trials[0].status = trials[1].status = "RUNNING"
    assert reporter.should_report(trials)
    reporter.report(trials, False)
    assert reporter.bar.n == 0 and "running 2, failed 0" in str(reporter.bar)
    trials[0].status, trials[1].status, trials[2].status = "TERMINATED", "ERROR", "RUNNING"
    reporter.report(trials, False)
    assert reporter.bar.n == 1 and "running 1, failed 1" in str(reporter.bar)
    assert not reporter.should_report(trials) and reporter.should_report(trials, done=True)
    assert pickle.loads(pickle.dumps(reporter)).bar is None  # Tune pickles its run config: the bar stays behind
    trials[2].status = "TERMINATED"
    reporter.report(trials, True)
    assert reporter.bar is None and "2/3" in capsys.readouterr().err
    quiet = TrialProgress(3, progress=False)
    quiet.report(trials, False)
    assert quiet.bar is None and not quiet.should_report(trials)  # off, but still counting: no report each step


@pytest.mark.parametrize("name", ["pendulum_sac_td3", "spread_mappo_ippo"])
def test_the_control_and_marl_specs_run_at_a_tiny_budget(ray_session, tmp_path, name) -> None:
    exp = pb.Experiment.from_yaml(_tiny(name, tmp_path), root=tmp_path).run(progress=False)
    assert (exp.status["state"] == "finished").all(), exp.status
    results = exp.results
    assert set(results["method"]) == {r.label for r in exp.grid.runs}
    assert (results.groupby("trial")["env_steps"].max() >= TINY[name][0]["env_steps"]).all()
    assert any(c.startswith("return/") for c in results.columns)


def test_a_failed_trial_is_retried_its_errors_kept_and_a_restore_reruns_only_it(ray_session, tmp_path) -> None:
    exp = pb.Experiment("fails", "kuhn_poker", [pb.spec(pb.PSRO, solver="nash"),
                                                pb.spec(pb.PSRO, name="broken", initial_policies=[1])],
                        seeds=[0], stop=pb.Stop(iterations=2), root=tmp_path, max_failures=1).run(progress=False)
    status = exp.status
    assert status["state"].tolist() == ["finished", "failed"]
    broken = exp.trial_dir(1)
    assert (broken / "errors.txt").read_text().count("initial_policies needs one entry per player") == 2  # tried twice
    assert "initial_policies" in exp.errors[exp.trials[1].key]
    done = exp.trial_dir(0) / "finished.json"
    stamp = done.stat().st_mtime_ns
    again = pb.Experiment.load(tmp_path / "fails").run(progress=False)  # Tune's restore
    assert done.stat().st_mtime_ns == stamp  # the finished trial is not rerun
    assert (broken / "errors.txt").read_text().count("initial_policies") > 2  # the failed one is tried again
    assert again.status["state"].tolist() == ["finished", "failed"]


def test_a_trial_reopens_its_run_folder_and_ends_where_one_run_through_would(ray_session, tmp_path) -> None:
    spec = pb.spec(pb.PSRO, solver="nash", evaluator="rollout", eval_episodes=100)
    exp = pb.Experiment("resume", "kuhn_poker", [spec], seeds=[3], stop={"iterations": 4}, root=tmp_path)
    part = spec.build("kuhn_poker", seed=3)
    part.run(2, progress=False)
    part.save(exp.trial_dir(0) / "run")  # as a trial interrupted after its save at iteration 2 leaves it
    exp.run(progress=False)
    whole = spec.build("kuhn_poker", seed=3)
    whole.run(until=pb.Stop(iterations=4), progress=False)
    got = exp.results.set_index("iteration")
    assert list(got.index) == [0, 1, 2, 3, 4]
    pd.testing.assert_series_equal(got["exploitability"], whole.history["exploitability"], check_names=False)


CLUSTER = """
import json, os
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
import sys
import ray
from ray.cluster_utils import Cluster
import pbmarl as pb

root = sys.argv[1]
spec = pb.spec(pb.PSRO, solver="nash", evaluator="rollout", eval_episodes=100)
local = {}
for seed in range(6):
    run = spec.build("kuhn_poker", seed=seed)
    run.run(until=pb.Stop(iterations=3), progress=False)
    local[seed] = run.history["exploitability"].tolist()


def hold_each_build_until_both_nodes_have_a_trial():
    # Ray runs this in every worker of the job as it starts. A trial's run is built only once trials have
    # reached the gate on both nodes: else, with trials this short, the node whose worker started first can
    # finish all six (Tune hands them to its reused actor) before the other node's worker is up.
    import time
    from pbmarl.experiments.spec import RunSpec
    build = RunSpec.build

    def gated(self, game, *, seed):
        gate, node = ray.get_actor("gate"), ray.get_runtime_context().get_node_id()
        deadline = time.monotonic() + 120  # a guard against a hang, not a wait: the gate opens when both arrive
        while ray.get(gate.arrive.remote(node)) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("no trial reached the gate from the other node within 120 s")
            time.sleep(0.02)
        return build(self, game, seed=seed)

    RunSpec.build = gated


@ray.remote(num_cpus=0)
class Gate:
    def __init__(self):
        self.nodes = set()

    def arrive(self, node):
        self.nodes.add(node)
        return len(self.nodes)

    def count(self):
        return len(self.nodes)


cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
try:
    ray.init(address=cluster.address, namespace="two-nodes", logging_level="ERROR",
             runtime_env={"worker_process_setup_hook": hold_each_build_until_both_nodes_have_a_trial})
    gate = Gate.options(name="gate").remote()
    exp = pb.Experiment("two-nodes", "kuhn_poker", [spec], seeds=range(6), stop={"iterations": 3}, root=root)
    exp.run(address=cluster.address, progress=False)
    gated = ray.get(gate.count.remote())  # the nodes whose trials reached the gate
    alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    nodes = [json.loads((exp.trial_dir(t) / "finished.json").read_text())["node"] for t in exp.trials]
    got = {s: g["exploitability"].tolist() for s, g in exp.results.groupby("seed")}
    print("RESULT", json.dumps({"alive": alive, "nodes": nodes, "local": local, "cluster": got, "gated": gated}))
finally:
    ray.shutdown()
    cluster.shutdown()
"""


def test_a_two_node_cluster_runs_trials_on_both_nodes_and_matches_a_local_loop(tmp_path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CLUSTER), str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))[len("RESULT "):])
    assert out["gated"] == 2  # every trial's build went through the gate (its hook reached the trial workers)
    assert len(out["alive"]) == 2 and set(out["nodes"]) == set(out["alive"])
    assert {int(k): v for k, v in out["cluster"].items()} == {int(k): v for k, v in out["local"].items()}
