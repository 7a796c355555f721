"""A timed-out embedded Ray start leaves no daemon behind (`ray.shutdown()` does not know them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pbmarl.hosting import ray as hosting_ray

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux only)")


def _named_sleep(tmp_path: Path, name: str) -> Path:
    exe = tmp_path / name
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    return exe


def test_child_processes_sees_a_child_and_stop_processes_ends_it(tmp_path: Path) -> None:
    child = subprocess.Popen([str(_named_sleep(tmp_path, "raylet")), "60"])
    try:
        assert hosting_ray.child_processes().get(child.pid) == "raylet"
        hosting_ray.stop_processes([child.pid], grace_s=2.0)
        assert child.pid not in hosting_ray.child_processes()
    finally:
        child.kill()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    child = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & wait"])
    hosting_ray.stop_processes([child.pid], grace_s=0.3)
    assert child.pid not in hosting_ray.child_processes()
    assert child.poll() is not None


class _FakeRay:
    """A Ray whose init launches a 'gcs_server' and then times out, as an overloaded machine does."""

    def __init__(self, exe: Path) -> None:
        self.exe, self.started = exe, []

    def init(self, **_: object) -> None:
        self.started.append(subprocess.Popen([str(self.exe), "60"]).pid)
        raise Exception("The current node timed out during startup.")

    def shutdown(self) -> None:  # like Ray's: knows nothing of the half-started daemons
        return None


def test_timed_out_starts_leave_no_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    fake = _FakeRay(_named_sleep(tmp_path, "gcs_server"))
    with pytest.raises(RuntimeError, match="did not start on this machine, twice"):
        hosting_ray._start_embedded(fake, 1, True)
    assert len(fake.started) == 2
    alive = hosting_ray.child_processes()
    assert not [pid for pid in fake.started if pid in alive]
