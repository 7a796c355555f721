"""Shared pytest fixtures."""

from __future__ import annotations

import os

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
