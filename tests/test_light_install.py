"""Item 19 of the hardening issue: the core works in a virtual environment without the extras.

A real venv with only `pip install -e .` (no torch, Ray, PettingZoo or notebook packages) runs
PSRO on Kuhn poker to its equilibrium and the command-line main job. About 30 s with a warm pip
cache; it needs the package index (or the cache) like the README's own install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CHECK = """
import importlib.util, json, sys
import pbmarl as pb
psro = pb.PSRO(pb.load_game("kuhn_poker"), solver="nash")
records = list(psro.run(12))
absent = [m for m in ("torch", "ray", "pettingzoo", "mpe2", "ipywidgets") if importlib.util.find_spec(m) is None]
try:
    pb.DQN(pb.load_game("kuhn_poker"))
    refused = ""
except Exception as exc:
    refused = str(exc)
print(json.dumps({"exploitability": records[-1].exploitability, "absent": absent, "refused": refused}))
"""


@pytest.mark.slow
def test_the_core_runs_psro_in_a_venv_without_the_extras(tmp_path: Path) -> None:
    env_dir = tmp_path / "light"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"),
                              "-e", str(REPO)], capture_output=True, text=True, env=environ, timeout=900)
    assert install.returncode == 0, install.stderr[-2000:]
    run = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, env=environ, timeout=600,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["absent"] == ["torch", "ray", "pettingzoo", "mpe2", "ipywidgets"]
    assert abs(out["exploitability"]) < 1e-6
    assert "torch" in out["refused"], out["refused"]  # an RL oracle names the extra it needs
    cli = subprocess.run([str(env_dir / "bin" / "pbmarl"), "psro", "--game", "kuhn_poker", "--iterations", "3",
                          "--out", str(tmp_path / "run"), "--quiet"], capture_output=True, text=True, env=environ,
                         timeout=600, cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert (tmp_path / "run" / "history.csv").exists()
    assert sys.executable != str(python)  # the check ran in the light venv, not in this one
