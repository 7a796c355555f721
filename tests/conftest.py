"""Shared pytest fixtures."""

from __future__ import annotations

import os
import re

os.environ.setdefault("PBMARL_SMOKE", "1")  # notebooks executed by nbmake use small budgets
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """One embedded local Ray instance (2 CPUs, no dashboard) for the whole test session."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # before the first `import ray`, as in every process
    import ray

    context = ray.init(address="local", num_cpus=2, include_dashboard=False)
    yield context
    ray.shutdown()


@pytest.fixture
def ctrl_c():
    """``ctrl_c(obj, "next", at=2)``: the `at`-th call of ``obj.next`` raises KeyboardInterrupt, as a
    user's Ctrl-C would land there; earlier calls run the real method."""

    def patch(obj, name, at=1):
        real, calls = getattr(obj, name), []

        def interrupted(*args, **kwargs):
            calls.append(1)
            if len(calls) == at:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        setattr(obj, name, interrupted)

    return patch


#: test files whose tests start or join a Ray instance, or drive JupyterLab in a browser
_SERIAL_FILES = {"test_distributed_ray.py", "test_hardening.py", "test_notebooks_render.py", "test_p2sro.py",
                 "test_ray.py", "test_ray_head_lost.py", "test_ray_pettingzoo.py", "test_ray_start_cleanup.py",
                 "test_browser.py", "test_env_batch.py", "test_multiagent_collect.py", "test_distributed.py"}


#: a notebook cell that starts Ray (the notebook's JSON escapes the quotes)
_RAY_CELL = re.compile(r"init_ray\(|ray\.init\(|backend=\\?[\"']ray")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n 2 --dist loadgroup``), every test that starts or joins Ray, every notebook
    that may, and the browser tests run in one worker, one after another: one Ray instance at a time."""
    for item in items:
        name = item.path.name
        if ("ray_session" in getattr(item, "fixturenames", ()) or item.get_closest_marker("ray") is not None
                or name in _SERIAL_FILES or (name.endswith(".ipynb") and _RAY_CELL.search(item.path.read_text()) is not None)):
            item.add_marker(pytest.mark.xdist_group("ray"))
