"""Bot settings, read once at start-up from the environment (and `.env`), then passed down."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator import CallLimit

Mode = Literal["socket", "http"]
Role = Literal["all", "frontend", "worker"]

DEFAULT_SLACK_API_URL = "https://slack.com/api/"

# Where each secret lives in the Slack app configuration (api.slack.com/apps → your app).
WHERE_TO_GET: dict[str, str] = {
    "SLACK_BOT_TOKEN": "OAuth & Permissions → Bot User OAuth Token (xoxb-…), after 'Install to Workspace'",
    "SLACK_SIGNING_SECRET": "Basic Information → App Credentials → Signing Secret",
    "SLACK_APP_TOKEN": (
        "Basic Information → App-Level Tokens → Generate Token with scope connections:write (xapp-…); "
        "enable Socket Mode under Settings → Socket Mode"
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderLimit:
    """One provider's limits, held by every worker together: requests per period, calls in flight."""

    requests: int | None = None
    period: float | None = None  # seconds
    concurrent: int | None = None


_RATE = re.compile(r"([1-9][0-9]*)/([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_LIMITS_HELP = "expected NAME=REQUESTS/PERIOD (openai=500/60s) or NAME.concurrent=N (anthropic.concurrent=8)"


def parse_provider_limits(text: str) -> dict[str, ProviderLimit]:
    """`MASSGEN_PROVIDER_LIMITS`: `openai=500/60s, anthropic=50/1m, anthropic.concurrent=8`.

    A provider is a backend type (`openai`, `anthropic` for `claude` too, `chatcompletion`, a
    preset such as `groq`, `local`). Raises `ValueError` naming the item that is wrong.
    """
    found: dict[str, dict[str, Any]] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        key, _, value = (part.strip() for part in item.partition("="))
        name, _, field = key.partition(".")
        limit = found.setdefault(name, {})
        if not name or not value or field not in ("", "concurrent") or (field or "rate") in limit:
            raise ValueError(f"{item!r}: {_LIMITS_HELP}, each once")
        if field == "concurrent":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{item!r}: the concurrent calls must be a whole number >= 1")
            limit["concurrent"] = int(value)
            continue
        rate = _RATE.fullmatch(value)
        period = float(rate.group(2)) * _UNIT[rate.group(3) or "s"] if rate else 0.0
        if rate is None or period <= 0:
            raise ValueError(f"{item!r}: {_LIMITS_HELP}")
        limit["rate"] = True
        limit["requests"], limit["period"] = int(rate.group(1)), period
    fields = ("requests", "period", "concurrent")
    return {name: ProviderLimit(**{f: v.get(f) for f in fields}) for name, v in found.items()}


def call_limits(limits: Mapping[str, ProviderLimit]) -> dict[str, CallLimit]:
    """The limits as the orchestrator's in-process limiter (`orchestrator.LocalLimits`) takes them."""
    from orchestrator import CallLimit

    return {
        name: CallLimit(requests=limit.requests, period=limit.period, concurrent=limit.concurrent)
        for name, limit in limits.items()
    }


class BotSettings(BaseSettings):
    """Everything `massgen-bot serve|socket|start` needs; secrets stay `SecretStr` until used."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    slack_bot_token: SecretStr | None = Field(default=None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default=DEFAULT_SLACK_API_URL, validation_alias="SLACK_API_URL")
    # Team (T…) and Enterprise Grid org (E…) ids whose users may use the bot, comma separated; empty:
    # the bot token's own team and org (auth.test). Users of other companies (Slack Connect) are refused.
    slack_allowed_team_ids: str = Field(default="", validation_alias="SLACK_ALLOWED_TEAM_IDS")
    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    state_dir: Path | None = Field(default=None, validation_alias="MASSGEN_STATE_DIR")
    teams_dir: Path = Field(default=Path("teams"), validation_alias="MASSGEN_TEAMS_DIR")
    team_file: Path | None = Field(default=None, validation_alias="MASSGEN_TEAM")
    port: int = Field(default=3000, ge=0, le=65535, validation_alias=AliasChoices("PORT", "MASSGEN_PORT"))
    host: str = Field(default="0.0.0.0", validation_alias="MASSGEN_HOST")  # noqa: S104 - a server binds all
    # The playground's page and local workspace (`make run` without Slack settings); it binds 127.0.0.1 only.
    playground_port: int = Field(default=8080, ge=0, le=65535, validation_alias="MASSGEN_PLAYGROUND_PORT")
    # Also show each run's final answer in the channel (reply_broadcast), not only in its thread.
    broadcast_final: bool = Field(default=False, validation_alias="MASSGEN_BROADCAST_FINAL")
    # Seconds between status-message refreshes of a run that emits nothing (e.g. waiting for approval).
    status_refresh: float = Field(default=30.0, gt=0, validation_alias="MASSGEN_STATUS_REFRESH")
    # The length of Slack's rate-limit "minute" the outbox paces by (its budgets, intervals and retry
    # window scale with it). Keep 60 against Slack; tests and benches compress time against the emulator.
    slack_minute: float = Field(default=60.0, gt=0, validation_alias="MASSGEN_SLACK_MINUTE")
    # A run posts its live progress message in the thread only once it has run this long: a quick run's
    # status message already shows each agent live, and in a busy channel every post waits ~1 s.
    progress_after: float = Field(default=20.0, ge=0, validation_alias="MASSGEN_PROGRESS_AFTER")
    # Who also gets an approval request as a DM (same buttons, kept in sync with the thread copy):
    # approvers not in the run's channel (default), every approver, or nobody.
    approval_dms: Literal["non_members", "always", "never"] = Field(
        default="non_members", validation_alias="MASSGEN_APPROVAL_DMS"
    )
    # Seconds an approver's group membership (usergroups.users.list) is trusted before asking Slack again.
    group_cache_ttl: float = Field(default=60.0, gt=0, validation_alias="MASSGEN_GROUP_CACHE_TTL")
    # Operations (issue 11). Schema at start-up: `auto` upgrades it, `check` refuses to start until
    # `massgen-bot db upgrade` ran; unset: auto on SQLite, check on PostgreSQL (many replicas).
    db_upgrade: Literal["auto", "check"] | None = Field(default=None, validation_alias="MASSGEN_DB_UPGRADE")
    # Log records as one JSON object a line (with run and request ids), or as text.
    log_format: Literal["text", "json"] = Field(default="text", validation_alias="MASSGEN_LOG_FORMAT")
    # Finished runs' event logs and workspaces are pruned after this many days (0: never); audit is kept.
    retention_days: float = Field(default=30.0, ge=0, validation_alias="MASSGEN_RETENTION_DAYS")
    # Seconds between two retention sweeps.
    retention_interval: float = Field(default=3600.0, gt=0, validation_alias="MASSGEN_RETENTION_INTERVAL")
    # Workspace snapshots in the database (a run taken over on another machine gets its files back):
    # at most this many MB per run, and per file; over either, a takeover rebuilds from the source.
    snapshot_mb: float = Field(default=256.0, gt=0, validation_alias="MASSGEN_SNAPSHOT_MB")
    snapshot_file_mb: float = Field(default=32.0, gt=0, validation_alias="MASSGEN_SNAPSHOT_FILE_MB")

    # The engine (issue 11): which part of the work this process does (`all`: the embedded default,
    # one process; `frontend`: Slack ingress only; `worker`: executes runs), and who it is.
    role: Role = Field(default="all", validation_alias="MASSGEN_ROLE")
    # Stable per machine (a StatefulSet pod name, a systemd instance): a restarted worker recovers its runs.
    executor_id: str = Field(
        default="local", min_length=1, max_length=128, validation_alias="MASSGEN_EXECUTOR_ID"
    )
    # Pinned so a deploy never strands runs waiting for a human (empty: the package version).
    app_version: str = Field(default="", validation_alias="MASSGEN_APP_VERSION")
    worker_concurrency: int = Field(default=4, ge=1, le=1000, validation_alias="MASSGEN_WORKER_CONCURRENCY")
    # Seconds between the engine's queue polls (and SQLite wake-up checks); tests shorten it.
    engine_poll: float = Field(default=1.0, gt=0, le=60, validation_alias="MASSGEN_ENGINE_POLL")
    heartbeat_interval: float = Field(default=5.0, gt=0, validation_alias="MASSGEN_HEARTBEAT_INTERVAL")
    # A worker whose heartbeat is older than this is dead for good: another worker recovers its runs.
    dead_after: float = Field(default=30.0, gt=0, validation_alias="MASSGEN_DEAD_AFTER")

    # Per-provider limits held by all workers together (see `parse_provider_limits`); empty: none.
    provider_limits: str = Field(default="", validation_alias="MASSGEN_PROVIDER_LIMITS")
    # Seconds between a waiting call's tries for a provider's permit (`bot.engine.limits`).
    provider_poll: float = Field(default=0.05, gt=0, le=10, validation_alias="MASSGEN_PROVIDER_POLL")

    # SIGTERM: seconds short runs get to end; longer ones are left pending in the engine (they resume).
    shutdown_grace: float = Field(default=10.0, ge=0, validation_alias="MASSGEN_SHUTDOWN_GRACE")

    @field_validator("provider_limits")
    @classmethod
    def _limits_parse(cls, value: str) -> str:
        parse_provider_limits(value)
        return value

    def limits(self) -> dict[str, ProviderLimit]:
        """The parsed `MASSGEN_PROVIDER_LIMITS`, by provider."""
        return parse_provider_limits(self.provider_limits)

    @classmethod
    def load(cls, *, env_file: str | None = ".env") -> BotSettings:
        """Read the environment (and `env_file` when it exists, which also feeds the SDKs' keys)."""
        if env_file is not None:
            load_env_file(env_file)
        return cls(_env_file=None)  # type: ignore[call-arg]

    @classmethod
    def with_values(cls, **values: Any) -> BotSettings:
        """Explicit values (by variable name, e.g. `SLACK_BOT_TOKEN=...`) over the environment; no `.env`."""
        return cls(_env_file=None, **values)  # type: ignore[call-arg]

    def resolved_database_url(self) -> str:
        """`DATABASE_URL`, else SQLite under `MASSGEN_STATE_DIR`, else `./massgen.db`."""
        if self.database_url:
            return self.database_url
        if self.state_dir is not None:
            return f"sqlite:///{(self.state_dir / 'massgen.db').as_posix()}"
        return "sqlite:///./massgen.db"

    def upgrade_policy(self) -> Literal["auto", "check"]:
        """`MASSGEN_DB_UPGRADE`, else `auto` on SQLite and `check` on PostgreSQL."""
        if self.db_upgrade is not None:
            return self.db_upgrade
        return "auto" if self.resolved_database_url().startswith("sqlite") else "check"

    def api_url(self) -> str:
        """The Web API base URL with the trailing slash slack_sdk expects."""
        url = self.slack_api_url.strip() or DEFAULT_SLACK_API_URL
        return url if url.endswith("/") else url + "/"

    def missing(self, mode: Mode) -> list[str]:
        """Names of the variables `mode` needs that are unset or blank."""
        needed = (
            ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]
            if mode == "socket"
            else [
                "SLACK_BOT_TOKEN",
                "SLACK_SIGNING_SECRET",
            ]
        )
        values = {
            "SLACK_BOT_TOKEN": self.slack_bot_token,
            "SLACK_SIGNING_SECRET": self.slack_signing_secret,
            "SLACK_APP_TOKEN": self.slack_app_token,
        }
        return [name for name in needed if not _present(values[name])]

    def start_mode(self) -> Mode | None:
        """What `start` runs: Socket Mode when its tokens are set, else HTTP when its are, else nothing."""
        if not self.missing("socket"):
            return "socket"
        if not self.missing("http"):
            return "http"
        return None


def settings_problem(error: ValidationError) -> str:
    """One line naming each bad variable and what is wrong with it (pydantic's text spans many)."""
    parts = []
    for found in error.errors():
        name = ".".join(str(x) for x in found["loc"]) or "settings"
        message = str(found["msg"]).removeprefix("Value error, ")
        parts.append(f"{name}: {message}")
    return "; ".join(parts)


def _present(value: SecretStr | None) -> bool:
    return value is not None and bool(value.get_secret_value().strip())


def secret(value: SecretStr | None) -> str:
    """The plain value of an optional secret ("" when unset)."""
    return "" if value is None else value.get_secret_value().strip()


def missing_settings_help(settings: BotSettings) -> str:
    """What `make run` prints on a fresh machine: which variables are missing, where to get them."""
    socket_missing = settings.missing("socket")
    http_missing = settings.missing("http")
    names = sorted(set(socket_missing) | set(http_missing), key=list(WHERE_TO_GET).index)
    lines = [
        "massgen-bot: Slack settings are missing, so the bot cannot connect to Slack.",
        "",
        "Set these in the environment or in a .env file (copy .env.example):",
    ]
    lines += [f"  {name:<22} {WHERE_TO_GET[name]}" for name in names]
    lines += [
        "",
        "All of them are under https://api.slack.com/apps → your app. To create the app in one step,",
        "use 'Create New App → From a manifest' with deploy/slack-manifest.yml.",
        "",
        "Socket Mode (no public URL needed) needs SLACK_BOT_TOKEN + SLACK_APP_TOKEN;",
        "HTTP mode (`massgen-bot serve`) needs SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET.",
        "",
        "Meanwhile, try the bot without Slack: `massgen-bot start` (`make run`) with no Slack settings",
        "serves a local workspace in the browser (the playground), or run the agents in the terminal:",
        '  .venv/bin/massgen-bot run "write a haiku about flaky tests"',
        "(set OPENAI_API_KEY / ANTHROPIC_API_KEY, or pass --team FILE).",
    ]
    return "\n".join(lines)


def load_env_file(path: str) -> None:
    """Put `path`'s variables (provider keys such as `OPENAI_API_KEY`, `DATABASE_URL`, ...) into the
    environment, where the model SDKs read them too; a variable already set wins, and a missing file
    is fine."""
    from dotenv import dotenv_values

    if not Path(path).is_file():
        return
    for name, value in dotenv_values(path).items():
        if value is not None:
            os.environ.setdefault(name, value)
