"""A newcomer's first `make run`: placeholder tokens, and a stop signal before Slack ever answers."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
from pathlib import Path

import pytest

from bot.playground.emulator import SlackEmulator
from tests.bot.cli.test_serve import CLI, _env
from tests.bot.harness import TOKEN, team_yaml
from tests.fakes.provider_server import ProviderServer

ENV_EXAMPLE = Path(__file__).resolve().parents[3] / ".env.example"


def _example_values() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#") and name.startswith("SLACK_"):
            values[name] = value
    return values


async def _finish(proc: asyncio.subprocess.Process, within: float) -> tuple[int, str]:
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), within)
    except TimeoutError:
        proc.kill()
        await proc.communicate()
        raise AssertionError(f"still running {within} s later") from None
    assert proc.returncode is not None
    return proc.returncode, stderr.decode()


async def test_placeholder_tokens_from_env_example_are_one_line(tmp_path: Path) -> None:
    values = _example_values()
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"} <= set(values)
    (tmp_path / ".env").write_text(ENV_EXAMPLE.read_text())  # `cp .env.example .env`
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "start",
        cwd=tmp_path,
        env=_env(MASSGEN_STATE_DIR=str(tmp_path / "state")),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    code, stderr = await _finish(proc, 30)
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert ".env.example" in lines[0]
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"):
        assert name in lines[0]
    assert "playground" in lines[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_signal_ends_socket_mode_that_never_connects(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """apps.connections.open keeps failing (the SDK retries for ever); the signal still stops the bot."""
    async with SlackEmulator(bot_token=TOKEN) as slack, ProviderServer() as provider:
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=1))
        env = _env(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_APP_TOKEN="xapp-1-revoked",  # the emulator answers invalid_auth
            SLACK_API_URL=slack.api_url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
            MASSGEN_HOST="127.0.0.1",
            PORT="0",
            MASSGEN_SHUTDOWN_GRACE="2",
        )
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "socket",
            "--team",
            str(team),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await slack.wait_for(lambda: bool(slack.calls_to("apps.connections.open", ok=False)), 60)
        finally:
            if proc.returncode is None:
                proc.send_signal(sig)
        code, stderr = await _finish(proc, 20)
        assert code == 0, stderr[-2000:]
        assert "stopped before the connection to Slack was made" in stderr


async def test_an_unreachable_slack_logs_one_line_per_try_not_a_traceback(tmp_path: Path) -> None:
    """Socket Mode against a closed port: each failed try is one line, and SIGTERM still stops it."""
    with socket.socket() as probe:  # a port nothing listens on: every connection is refused
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    async with ProviderServer() as provider:
        team = tmp_path / "team.yaml"
        team.write_text(team_yaml(provider, agents=1))
        env = _env(
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_APP_TOKEN="xapp-1-unreachable",
            SLACK_API_URL=f"http://127.0.0.1:{closed}/api/",
            DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}",
            MASSGEN_HOST="127.0.0.1",
            PORT="0",
            MASSGEN_SHUTDOWN_GRACE="2",
        )
        proc = await asyncio.create_subprocess_exec(
            *CLI, "socket", "--team", str(team), cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await asyncio.sleep(8)  # the first try fails after the SDK's own connection retries
        proc.send_signal(signal.SIGTERM)
        code, stderr = await _finish(proc, 20)
    assert code == 0, stderr[-2000:]
    assert "Failed to connect" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]


_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


async def _one_line(tmp_path: Path, *args: str, **env: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        cwd=tmp_path,
        env=_env(MASSGEN_STATE_DIR=str(tmp_path / "state"), **env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    code, stderr = await _finish(proc, 60)
    said = [line for line in stderr.strip().splitlines() if not _LOG_LINE.match(line)]  # not log lines
    assert (code, len(said)) == (1, 1), stderr[-3000:]
    return said[0]


@pytest.mark.parametrize(
    ("url", "says"),
    [("nosuch://x", "unsupported database URL scheme"), ("postgresql://nobody@127.0.0.1:1/x", "127.0.0.1")],
    ids=["scheme", "unreachable"],
)
async def test_a_bad_database_url_is_one_line(tmp_path: Path, url: str, says: str) -> None:
    line = await _one_line(
        tmp_path,
        "start",
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_SIGNING_SECRET="s",
        SLACK_API_URL="http://127.0.0.1:9/api/",
        DATABASE_URL=url,
    )
    assert "DATABASE_URL" in line
    assert says in line


async def test_a_bad_playground_port_is_one_line(tmp_path: Path) -> None:
    assert "0-65535, not 99999" in await _one_line(tmp_path, "start", "--playground-port", "99999")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "start",
            "--playground-port",
            str(port),
            cwd=tmp_path,
            env=_env(MASSGEN_STATE_DIR=str(tmp_path / "state")),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        code, stderr = await _finish(proc, 60)
    assert code == 1
    assert "Traceback" not in stderr
    assert f"cannot listen on 127.0.0.1:{port}" in stderr


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(p.name for p in (ENV_EXAMPLE.parent / "docs").glob("*.md"))]
)
def test_env_example_names_every_variable_the_readme_names(page: str) -> None:
    """The README and the pages it links to (`docs/`, where the long material lives) name no variable
    that `.env.example` leaves out: a newcomer copies that file and edits it."""
    root = ENV_EXAMPLE.parent
    text = (root / page if page == "README.md" else root / "docs" / page).read_text()
    named = set(re.findall(r"\b(?:MASSGEN|SLACK|DATABASE|OPENAI|ANTHROPIC)_[A-Z0-9_]+", text))
    example = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", ENV_EXAMPLE.read_text()))
    assert sorted(named - example) == []
