"""A newcomer's bad inputs, each in a real `massgen-bot` process: one line on stderr, a non-zero exit.

Issue 19: a bad `DATABASE_URL`, a port out of range or in use, a missing model file, a state folder
that cannot be written, `run --cancel` without keys. Each ends the process before any run starts,
with one line that names what to fix and no traceback.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Slack settings that select HTTP mode; the Web API at a closed port answers at once (no internet).
SLACK = {
    "SLACK_BOT_TOKEN": "xoxb-1-test",
    "SLACK_SIGNING_SECRET": "s3cret",
    "SLACK_API_URL": "http://127.0.0.1:1/api/",
}
KEYS = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
# A log record that is not a problem (start-up progress); everything else on stderr counts as a line.
_PROGRESS = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ (DEBUG|INFO|WARNING) ")


def massgen_bot(*args: str, **env: str) -> tuple[int, list[str]]:
    """`massgen-bot ARGS` with only `env`'s Slack, provider and database settings: exit code, problems."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "OPENAI_", "ANTHROPIC_", "DATABASE_", "MASSGEN_TEAM"))
    }
    done = subprocess.run(
        [sys.executable, "-m", "bot", *args],
        env={**keep, **env},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip() and not _PROGRESS.match(line)]
    return done.returncode, lines


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port this test listens on (on every address), so the bot cannot bind it."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.parametrize("url", ["postgresql://nobody@127.0.0.1:1/x", "notaurl"])
@pytest.mark.parametrize("command", [["start", "--port", "0"], ["run", "hello"]])
def test_a_bad_database_url_is_one_line(command: list[str], url: str) -> None:
    code, lines = massgen_bot(*command, DATABASE_URL=url, **SLACK, **KEYS)
    assert code == 1
    assert len(lines) == 1, lines
    assert "database" in lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["start", "--playground-port", "99999"],
        ["playground", "--playground-port", "-1"],
        ["serve", "--port", "99999"],
    ],
)
def test_a_port_out_of_range_is_one_line(args: list[str]) -> None:
    code, lines = massgen_bot(*args, **(SLACK if args[0] == "serve" else {}))
    assert code == 1
    assert len(lines) == 1, lines
    assert "port" in lines[0]


def test_a_port_that_is_not_a_number_is_a_usage_error() -> None:
    code, lines = massgen_bot("start", "--playground-port", "abc")
    assert code == 2
    assert lines[-1].endswith("invalid int value: 'abc'")


@pytest.mark.parametrize("command", ["serve", "worker", "playground"])
def test_a_port_in_use_is_one_line(command: str, busy_port: int, tmp_path: Path) -> None:
    flag = "--playground-port" if command == "playground" else "--port"
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    code, lines = massgen_bot(command, flag, str(busy_port), DATABASE_URL=database, **SLACK)
    assert code == 1
    assert len(lines) == 1, lines
    assert str(busy_port) in lines[0]
    assert "in use" in lines[0]


def _missing_model_team(tmp_path: Path) -> Path:
    team = tmp_path / "team.yaml"
    team.write_text("agents:\n  - id: a1\n    backend: {type: local, model_path: ./missing.gguf}\n")
    return team


@pytest.mark.parametrize(
    "command", [["run", "hello"], ["playground", "--playground-port", "0"], ["serve", "--port", "0"]]
)
def test_a_missing_model_file_is_a_config_error_before_the_run(command: list[str], tmp_path: Path) -> None:
    team = _missing_model_team(tmp_path)
    code, lines = massgen_bot(*command, "--team", str(team), **SLACK)
    assert code == 1
    assert len(lines) == 1, lines
    assert str(tmp_path / "missing.gguf") in lines[0]
    assert "a1" in lines[0]


@pytest.mark.parametrize(
    "command",
    [["run", "hello"], ["start", "--playground-port", "0"], ["serve", "--port", "0"], ["db", "current"]],
)
def test_a_state_folder_that_cannot_be_written_is_one_line(command: list[str], tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    folder = a_file / "state"  # a real OS error even for root, whom no permission bit stops
    env = {**SLACK, **KEYS} if command[0] != "start" else KEYS
    code, lines = massgen_bot(*command, MASSGEN_STATE_DIR=str(folder), **env)
    assert code == 1
    assert len(lines) == 1, lines
    assert str(folder) in lines[0]
    assert "MASSGEN_STATE_DIR" in lines[0]


def test_cancel_needs_no_api_key(tmp_path: Path) -> None:
    code, lines = massgen_bot("run", "--cancel", "run-nothere", DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}")
    assert code == 1  # no such run: but not "no API key"
    assert lines == ["massgen-bot run: no run run-nothere in this database"]
