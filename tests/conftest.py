"""Suite-wide guards: no real provider or Slack traffic, no ambient credentials."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

_AMBIENT = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_API_URL",
    "DATABASE_URL",
)
# The suite's `sandbox: none` teams run commands on a development machine; the tests of the
# product's default (every unconfined command asks) remove this flag themselves.
os.environ.setdefault("MASSGEN_UNCONFINED_OK", "1")


@pytest.fixture(autouse=True)
def _no_real_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every SDK default at a closed loopback port so a forgotten base_url fails instead of leaking."""
    for name in _AMBIENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The embedded model's tests first (minutes of CPU each): under pytest-xdist (`-n 2`) one worker
    starts on them while the other takes the rest, instead of a worker picking them up last."""
    items.sort(key=lambda item: item.get_closest_marker("local_model") is None)  # stable: order kept


def postgres_url() -> str | None:
    """The throwaway server `.ci/run` starts; tests marked `postgres` skip without it."""
    return os.environ.get("DATABASE_URL_POSTGRES")


# The databases a store test runs on: `@pytest.fixture(params=SQL_DATABASES)` with `empty_database`.
SQL_DATABASES: list[Any] = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@contextlib.asynccontextmanager
async def empty_database(kind: str, sqlite_url: str) -> AsyncIterator[str]:
    """The URL of an empty database of `kind`: `sqlite_url`, or a scratch PostgreSQL database on the
    server `.ci/run` starts (dropped afterwards); the test is skipped without that server."""
    if kind == "sqlite":
        yield sqlite_url
        return
    from approvals.testing import scratch_postgres_database

    server = postgres_url()
    if server is None:
        pytest.skip("no PostgreSQL server (DATABASE_URL_POSTGRES unset)")
    async with scratch_postgres_database(server) as url:
        yield url
