"""Where DBOS keeps its state, and who this process is, from the bot's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine import engine_config, package_version, system_database_url
from bot.settings import BotSettings


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"DATABASE_URL": "sqlite:////srv/bot/massgen.db"}, "sqlite:////srv/bot/dbos.sqlite"),
        ({"DATABASE_URL": "sqlite+aiosqlite:////srv/bot/massgen.db"}, "sqlite:////srv/bot/dbos.sqlite"),
        ({"DATABASE_URL": "sqlite:///massgen.db"}, "sqlite:///dbos.sqlite"),
        ({"MASSGEN_STATE_DIR": "/var/lib/massgen"}, "sqlite:////var/lib/massgen/dbos.sqlite"),
        ({}, "sqlite:///dbos.sqlite"),
        (
            {"DATABASE_URL": "postgresql+asyncpg://bot:pw@db:5432/massgen"},
            "postgresql://bot:pw@db:5432/massgen",
        ),
        ({"DATABASE_URL": "postgresql://bot@db/massgen"}, "postgresql://bot@db/massgen"),
    ],
)
def test_the_system_database_sits_beside_sqlite_or_in_the_same_postgres(
    values: dict[str, str], expected: str
) -> None:
    assert system_database_url(BotSettings.with_values(**values)) == expected


def test_defaults_are_the_embedded_single_process() -> None:
    config = engine_config(BotSettings.with_values())
    assert (config.role, config.executor_id, config.executes) == ("all", "local", True)
    # Pinned to the package version, never DBOS's hash of the code: a deploy must not strand runs.
    assert config.application_version == package_version() != ""
    assert config.dbos()["application_version"] == package_version()


def test_settings_choose_role_identity_version_and_concurrency(tmp_path: Path) -> None:
    settings = BotSettings.with_values(
        MASSGEN_ROLE="frontend",
        MASSGEN_EXECUTOR_ID="worker-3",
        MASSGEN_APP_VERSION="2026.12.1",
        MASSGEN_WORKER_CONCURRENCY="8",
        MASSGEN_STATE_DIR=str(tmp_path),
    )
    config = engine_config(settings)
    assert (config.role, config.executes) == ("frontend", False)
    assert config.dbos()["executor_id"] == "worker-3"
    assert config.application_version == "2026.12.1"
    assert config.worker_concurrency == 8
    assert engine_config(settings, role="worker").executes


def test_a_bad_role_fails_at_boot_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="MASSGEN_ROLE"):
        BotSettings.with_values(MASSGEN_ROLE="both")
