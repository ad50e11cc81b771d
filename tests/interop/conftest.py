"""Fixtures of the interop tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def inspect_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """inspect_ai quiet, with its response cache under ``tmp_path``."""
    pytest.importorskip("inspect_ai")
    monkeypatch.setenv("INSPECT_LOG_LEVEL", "error")
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "inspect-cache"))
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    return tmp_path
