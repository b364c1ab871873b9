"""Shared fixtures for the approval store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import SQL_DATABASES, empty_database


@pytest.fixture(params=SQL_DATABASES)
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh database per test: a SQLite file, and a scratch PostgreSQL database when a server runs."""
    async with empty_database(request.param, f"sqlite:///{tmp_path}/approvals.db") as url:
        yield url
