"""The browser tests' gate: skipped with the install command where Chromium is missing, failed under CI=true."""

from __future__ import annotations

import shutil

import browser_lab
import pytest


def test_missing_browser_skips_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium chromium-driver") as skipped:
        browser_lab.require_browser()
    assert "chromium, chromedriver" in str(skipped.value)


def test_missing_browser_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the browser tests cannot run: needs chromium"):
        browser_lab.require_browser()


def test_present_browser_passes_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setenv("CI", "true")
    pytest.importorskip("selenium")
    pytest.importorskip("jupyterlab")
    assert browser_lab.missing_browser() is None
    browser_lab.require_browser()  # neither skips nor fails
