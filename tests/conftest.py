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
