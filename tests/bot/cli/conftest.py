"""CLI tests: every subcommand keeps its state (the SQLite file) under the test's own directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`MASSGEN_STATE_DIR` in the test's tmp_path, so `massgen-bot run` never writes ./massgen.db."""
    monkeypatch.setenv("MASSGEN_STATE_DIR", str(tmp_path / "state"))
