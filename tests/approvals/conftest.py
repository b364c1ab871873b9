"""Shared fixtures for the approval store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from approvals.testing import scratch_postgres_database
from tests.conftest import postgres_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh database per test: a SQLite file, and a scratch PostgreSQL database when a server runs."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/approvals.db"
        return
    server = postgres_url()
    if server is None:
        pytest.skip("no PostgreSQL server (DATABASE_URL_POSTGRES unset)")
    async with scratch_postgres_database(server) as url:
        yield url
