"""`massgen-bot approvals list|approve|deny` and `massgen-bot audit` against a real SQLite database."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from approvals import Ask
from approvals.audit import AuditEntry
from approvals.models import ApprovalRequest, Approvers
from approvals.permissions import Action
from approvals.service import ApprovalService
from approvals.sql import SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from approvals.testing import ask_decision
from bot.cli import main

REPO = Path(__file__).resolve().parents[3]

T = TypeVar("T")
Cli = Callable[..., tuple[int, str, str]]


class Db:
    """A SQLite database the bot would use; helpers run the async service from sync tests."""

    def __init__(self, path: Path) -> None:
        self.url = f"sqlite:///{path}"

    async def _service(self, work: Callable[[ApprovalService], Awaitable[T]]) -> T:
        engine = make_engine(self.url)
        try:
            await create_schema(engine)
            return await work(ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine)))
        finally:
            await engine.dispose()

    def ask(self, *, run_id: str = "run-1", target: str = "make deploy", **overrides: Any) -> ApprovalRequest:
        arguments: dict[str, Any] = {
            "run_id": run_id,
            "agent_id": "agent1",
            "requester": "U_REQ",
            "action": Action(kind="command", target=target),
            "digest": "c" * 64,
            "decision": ask_decision(),
            "approvers": Approvers(users=frozenset({"cli:alice", "cli:carol", "U_B"})),
            "timeout": timedelta(minutes=10),
        }
        arguments.update(overrides)
        return asyncio.run(self._service(lambda s: s.request(Ask(**arguments))))

    def get(self, request_id: str) -> ApprovalRequest:
        found = asyncio.run(self._service(lambda s: s.get(request_id)))
        assert found is not None
        return found

    def audit(self) -> list[AuditEntry]:
        return asyncio.run(self._service(lambda s: s.audit_trail()))


@pytest.fixture
def db(tmp_path: Path) -> Db:
    return Db(tmp_path / "massgen.db")


@pytest.fixture
def cli(db: Db, capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--database-url", db.url])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_approve_as_a_listed_principal(db: Db, cli: Cli) -> None:
    request = db.ask()
    code, out, _ = cli("approvals", "approve", request.id, "--as", "cli:alice", "--reason", "lgtm")
    assert code == 0
    assert out.startswith(f"approved (once): command(make deploy) [{request.id}] by cli:alice")
    stored = db.get(request.id)
    assert (stored.status, stored.decided_by, stored.decision_reason) == ("approved", "cli:alice", "lgtm")
    assert [(e.outcome, e.actor) for e in db.audit()] == [("ask", "engine"), ("approved", "cli:alice")]


def test_default_principal_is_cli_user(db: Db, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "carol")
    request = db.ask()
    assert cli("approvals", "approve", request.id)[0] == 0
    assert db.get(request.id).decided_by == "cli:carol"


@pytest.mark.parametrize(
    ("overrides", "argv", "code", "message"),
    [
        ({}, ("approve", "--as", "cli:mallory"), 3, "not authorised: cli:mallory is not an approver"),
        ({}, ("deny", "--as", "cli:mallory", "--reason", "x"), 3, "not authorised"),
        ({"requester": "cli:alice"}, ("approve", "--as", "cli:alice"), 3, "may not approve their own"),
        ({}, ("approve", "--as", "cli:alice", "--scope", "always"), 6, "scope 'always' was not offered"),
    ],
)
def test_refusals_exit_non_zero_and_change_nothing(
    db: Db, cli: Cli, overrides: dict[str, Any], argv: tuple[str, ...], code: int, message: str
) -> None:
    request = db.ask(**overrides)
    action, *rest = argv
    result = cli("approvals", action, request.id, *rest)
    assert result[0] == code
    assert message in result[2]
    assert db.get(request.id) == request
    assert db.audit()[-1].outcome == "rejected"


def test_deny_needs_a_reason(db: Db, cli: Cli) -> None:
    request = db.ask()
    with pytest.raises(SystemExit) as exc:
        cli("approvals", "deny", request.id, "--as", "cli:alice")
    assert exc.value.code == 2
    code, out, _ = cli("approvals", "deny", request.id, "--as", "cli:alice", "--reason", "not today")
    assert code == 0
    assert out.startswith("denied: command(make deploy)")
    assert (db.get(request.id).status, db.get(request.id).decision_reason) == ("denied", "not today")


def test_second_decision_and_unknown_id(db: Db, cli: Cli) -> None:
    request = db.ask()
    assert cli("approvals", "approve", request.id, "--as", "cli:alice")[0] == 0
    code, _, err = cli("approvals", "deny", request.id, "--as", "cli:carol", "--reason", "late")
    assert (code, err.strip()) == (5, "already decided: the request is approved; nothing changed")
    code, _, err = cli("approvals", "approve", "no-such-id", "--as", "cli:alice")
    assert code == 4
    assert "not found" in err
    assert db.get(request.id).status == "approved"


def test_list_shows_what_the_principal_may_decide(db: Db, cli: Cli) -> None:
    mine = db.ask(run_id="run-a", target="make deploy")
    theirs = db.ask(run_id="run-b", target="rm -rf build", approvers=Approvers(users=frozenset({"U_B"})))
    code, out, _ = cli("approvals", "list", "--as", "cli:alice")
    assert code == 0
    assert mine.id in out
    assert theirs.id not in out
    assert out.splitlines()[0].split() == [
        "ID",
        "RUN",
        "AGENT",
        "RISK",
        "EXPIRES",
        "(UTC)",
        "SCOPES",
        "ACTION",
    ]
    _, out, _ = cli("approvals", "list", "--all", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [mine.id, theirs.id]
    _, out, _ = cli("approvals", "list", "--all", "--run", "run-b", "--json")
    assert [json.loads(line)["action"] for line in out.splitlines()] == ["command(rm -rf build)"]
    _, out, _ = cli("approvals", "list", "--as", "cli:nobody")
    assert out.strip() == "no pending requests for cli:nobody"


def test_show_prints_the_full_action_and_the_outcome(db: Db, cli: Cli) -> None:
    long_command = "make deploy ENV=prod && " + "echo x; " * 40
    request = db.ask(target=long_command)
    code, out, _ = cli("approvals", "show", request.id)
    assert code == 0
    assert out.rstrip().endswith(f"command({long_command})")  # never clipped: approve what you read
    assert "status:    pending" in out
    cli("approvals", "deny", request.id, "--as", "U_B", "--reason", "too broad")
    _, out, _ = cli("approvals", "show", request.id)
    assert "status:    denied" in out
    assert "reason:    too broad" in out
    assert cli("approvals", "show", "apr_nope")[0] == 4


def test_audit_table_and_jsonl(db: Db, cli: Cli) -> None:
    first = db.ask(run_id="run-a")
    db.ask(run_id="run-b")
    cli("approvals", "approve", first.id, "--as", "cli:alice", "--scope", "run")
    cli("approvals", "approve", first.id, "--as", "cli:mallory")
    code, out, _ = cli("audit", "--run", "run-a", "--jsonl")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(e["outcome"], e["actor"], e["scope"]) for e in lines] == [
        ("ask", "engine", None),
        ("approved", "cli:alice", "run"),
        ("rejected", "cli:mallory", None),
    ]
    assert {e["run_id"] for e in lines} == {"run-a"}
    code, out, _ = cli("audit")
    table = out.splitlines()
    assert table[0].split()[:3] == ["AT", "(UTC)", "RUN"]
    assert len(table) == 1 + 4
    assert "approved (run)" in out
    assert "not an approver" in out
    _, out, _ = cli("audit", "--limit", "1", "--jsonl")
    assert [json.loads(line)["actor"] for line in out.splitlines()] == ["cli:mallory"]


def test_missing_database_is_an_error_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert main(["audit", "--database-url", f"sqlite:///{missing}"]) == 1
    assert "no approvals database" in capsys.readouterr().err
    assert not missing.exists()


def test_database_url_from_the_environment(
    db: Db, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    request = db.ask()
    monkeypatch.setenv("DATABASE_URL", db.url)
    monkeypatch.chdir(db.url.removeprefix("sqlite:///").rsplit("/", 1)[0])  # no stray .env is read
    assert main(["approvals", "list", "--all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == request.id


async def test_a_bot_waiting_in_one_process_sees_the_cli_decide_in_another(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/massgen.db"
    engine = make_engine(url)
    await create_schema(engine)
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine), poll_interval=0.05)
    try:
        request = await service.request(
            Ask(
                run_id="run-1",
                agent_id="agent1",
                requester="U_REQ",
                action=Action(kind="command", target="make release"),
                digest="b" * 64,
                decision=ask_decision(),
                approvers=Approvers(users=frozenset({"cli:ops"})),
                timeout=timedelta(minutes=5),
            )
        )
        waiter = asyncio.create_task(service.wait(request.id))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "approvals", "approve", request.id, "--as", "cli:ops",
            "--database-url", url, cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        assert out.decode().startswith("approved (once)")
        decided = await asyncio.wait_for(waiter, 10)
        assert (decided.status, decided.decided_by) == ("approved", "cli:ops")
    finally:
        await engine.dispose()


async def test_files_command_runs_the_handshake_until_terminated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/massgen.db"
    engine = make_engine(url)
    await create_schema(engine)
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine), poll_interval=0.05)
    directory = tmp_path / "handshake"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "approvals", "files", str(directory), "--poll", "0.05",
        "--database-url", url, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        request = await service.request(
            Ask(
                run_id="run-1",
                agent_id="agent1",
                requester="U_REQ",
                action=Action(kind="command", target="make release"),
                digest="b" * 64,
                decision=ask_decision(),
                approvers=Approvers(users=frozenset({"ext:bob"})),
                timeout=timedelta(minutes=5),
            )
        )
        req_file = directory / f"req_{request.id}.json"
        async with asyncio.timeout(60):
            while not req_file.exists():
                assert process.returncode is None
                await asyncio.sleep(0.02)
        published = json.loads(req_file.read_text())
        response = {
            "id": published["id"],
            "nonce": published["nonce"],
            "approve": False,
            "by": "ext:bob",
            "at": published["created_at"],
            "reason": "not from a file",
        }
        (directory / f"resp_{request.id}.json").write_text(json.dumps(response))
        decided = await asyncio.wait_for(service.wait(request.id), 30)
        assert (decided.status, decided.decided_by, decided.decision_reason) == (
            "denied",
            "ext:bob",
            "not from a file",
        )
    finally:
        if process.returncode is None:
            process.terminate()
        out, err = await asyncio.wait_for(process.communicate(), 30)
        await engine.dispose()
    assert process.returncode == 0, err.decode()
    assert out.decode().startswith("file handshake on")
