"""The bot's rooms: each door's sorted `__all__` is exactly its public API."""

from __future__ import annotations

import pytest

from tests.doors import assert_door

DOORS = {
    "bot.approval_ui": [
        "ApprovalUseCases",
        "ApprovalsUI",
        "ApproverDMs",
        "ThreadApprovalPort",
        "pending_for",
    ],
    "bot.cli": ["build_parser", "main"],
    "bot.engine": [
        "PARKED",
        "RUNS_QUEUE",
        "SUSPENDED",
        "SUSPEND_RETRY",
        "WAKE",
        "Action",
        "Control",
        "Engine",
        "EngineConfig",
        "OutsideWaker",
        "Role",
        "RunExecutor",
        "engine_config",
        "engine_metadata",
        "package_version",
        "system_database_url",
        "wake_on_decisions",
        "wake_settled",
    ],
    "bot.home": ["ChannelAccess", "HomeTab", "RecentRuns"],
    "bot.listeners": ["actions", "commands", "events", "views"],
    "bot.render": [
        "code",
        "code_block",
        "escape",
        "markdown_to_mrkdwn",
        "modal",
        "plain",
        "redact",
        "safe",
        "split_message",
        "truncate",
        "user_mention",
    ],
    "bot.runs": [
        "ANSWER_GONE",
        "ActiveRun",
        "RunHistory",
        "RunRequest",
        "RunSupervisor",
        "RunUseCases",
        "SharedModels",
        "SlackRun",
        "TeamCatalog",
        "TeamChoice",
        "TeamNotFound",
        "ToolsBuilder",
        "Where",
        "apply_line",
        "help_text",
        "retire_status",
    ],
    "bot.slack": [
        "BotStore",
        "GiveUp",
        "GroupResolver",
        "MessageRef",
        "Outbox",
        "OutboxStore",
        "RunCoordinates",
        "bot_metadata",
    ],
    "bot.ops": [
        "CONTENT_TYPE",
        "Metrics",
        "PruneReport",
        "RedactFilter",
        "bind_request",
        "bind_run",
        "bound_request",
        "configure_logging",
        "observer",
        "prune",
        "retention_loop",
        "subscribe_all",
    ],
    "bot.migrations": [
        "BASELINE",
        "HEAD",
        "UPGRADE_COMMAND",
        "SchemaBehindError",
        "UpgradePolicy",
        "alembic_config",
        "downgrade",
        "ensure_schema",
        "known_revisions",
        "schema_revision",
        "upgrade",
    ],
}


@pytest.mark.parametrize("module", sorted(DOORS))
def test_front_door_exports_exactly_its_api(module: str) -> None:
    assert_door(module, DOORS[module])


def test_the_cli_door_imports_no_subcommand() -> None:
    """`massgen-bot run` must not pay for the Slack side: the door loads only the chosen module."""
    import subprocess
    import sys

    code = "import sys, bot.cli; print(sorted(m for m in sys.modules if m.startswith('bot.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['bot.cli']"


def test_the_terminal_runner_and_its_storage_never_load_slack() -> None:
    """`massgen-bot run` builds its stores through the composition root without the Slack SDK."""
    import subprocess
    import sys

    code = (
        "import sys, bot.cli.run, bot.cli.run_view, bot.wiring; "
        "print([m for m in ('slack_sdk', 'slack_bolt', 'aiohttp', 'dbos') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
