"""`bot.settings`: env → typed settings, start mode, and the fresh-machine guidance."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import BotSettings, missing_settings_help, secret


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> BotSettings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return BotSettings.load(env_file=None)


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, None),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, None),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}, "http"),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, "socket"),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "SLACK_SIGNING_SECRET": "s"}, "socket"),
        ({"SLACK_BOT_TOKEN": "  ", "SLACK_SIGNING_SECRET": "s"}, None),
    ],
)
def test_start_mode(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], mode: str | None) -> None:
    assert _settings(monkeypatch, **env).start_mode() == mode


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({}, "sqlite:///./massgen.db"),
        ({"MASSGEN_STATE_DIR": "/var/lib/mg"}, "sqlite:////var/lib/mg/massgen.db"),
        ({"DATABASE_URL": "postgresql://x@h/db", "MASSGEN_STATE_DIR": "/s"}, "postgresql://x@h/db"),
    ],
)
def test_database_url(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str) -> None:
    assert _settings(monkeypatch, **env).resolved_database_url() == url


def test_values_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _settings(
        monkeypatch, SLACK_API_URL="http://127.0.0.1:5/api", PORT="4111", SLACK_SIGNING_SECRET="sss"
    )
    assert s.api_url() == "http://127.0.0.1:5/api/"
    assert s.port == 4111
    assert s.teams_dir == Path("teams")
    assert secret(s.slack_signing_secret) == "sss"
    assert "sss" not in repr(s)


def test_bad_port_fails_at_boot_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="PORT"):
        _settings(monkeypatch, PORT="seventy")


def test_help_names_exactly_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    text = missing_settings_help(_settings(monkeypatch, SLACK_BOT_TOKEN="xoxb-1"))
    assert "SLACK_BOT_TOKEN " not in text.split("Set these")[1].split("All of them")[0]
    assert "Signing Secret" in text
    assert "connections:write" in text
    assert "api.slack.com/apps" in text
    assert "massgen-bot run" in text


def test_env_file_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"):  # `.env` fills the environment: undone after
        monkeypatch.delenv(name, raising=False)
    env = tmp_path / ".env"
    env.write_text("SLACK_BOT_TOKEN=xoxb-file\nSLACK_SIGNING_SECRET=from-file\n")
    s = BotSettings.load(env_file=str(env))
    assert s.start_mode() == "http"


def test_env_file_gives_the_sdks_their_keys_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bot's agents read provider keys from the environment: `.env` puts them there."""
    import os

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # restored (removed) after the test
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-the-environment")
    env = tmp_path / ".env"
    env.write_text("OPENAI_API_KEY=sk-from-file\nANTHROPIC_API_KEY=from-file\n")
    BotSettings.load(env_file=str(env))
    assert os.environ["OPENAI_API_KEY"] == "sk-from-file"
    assert os.environ["ANTHROPIC_API_KEY"] == "from-the-environment"


def test_env_example_names_every_setting() -> None:
    """`.env.example` lists every variable the bot reads (the README points people at it)."""
    example = (Path(__file__).parents[2] / ".env.example").read_text()
    missing = []
    for name, field in BotSettings.model_fields.items():
        alias = field.validation_alias
        names = [alias] if isinstance(alias, str) else [str(c) for c in getattr(alias, "choices", [name])]
        if not any(n in example for n in names):
            missing.append(names[0])
    assert not missing, f".env.example lacks {missing}"
