"""The file handshake: nonce echo, time window (timestamp and mtime), id binding, one-shot files."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from approvals.handshake import FileHandshake
from approvals.models import ApprovalRequest, Approvers, Ask
from approvals.permissions import Action
from approvals.service import ApprovalService
from approvals.testing import InMemoryApprovalStore, InMemoryAuditLog, ask_decision

DEADLINE = 10.0


@pytest.fixture
def audit() -> InMemoryAuditLog:
    return InMemoryAuditLog()


@pytest.fixture
def service(audit: InMemoryAuditLog) -> ApprovalService:
    return ApprovalService(InMemoryApprovalStore(), audit)


@pytest.fixture
def handshake(tmp_path: Path, service: ApprovalService) -> FileHandshake:
    return FileHandshake(tmp_path / "approvals", service, poll_interval=0.01)


async def ask(service: ApprovalService) -> ApprovalRequest:
    return await service.request(
        Ask(
            run_id="run-1",
            agent_id="agent1",
            requester="U_REQ",
            action=Action(kind="command", target="npm publish"),
            digest="a" * 64,
            decision=ask_decision(),
            approvers=Approvers(users=frozenset({"U_A"})),
            timeout=timedelta(minutes=5),
        )
    )


def respond(
    directory: Path,
    request: ApprovalRequest,
    *,
    file_id: str | None = None,
    mtime: datetime | None = None,
    **fields: object,
) -> Path:
    body: dict[str, object] = {
        "id": request.id,
        "nonce": request.nonce,
        "approve": True,
        "scope": "once",
        "by": "U_A",
        "at": request.created_at + timedelta(seconds=1),
    }
    body.update(fields)
    body["at"] = body["at"].isoformat() if isinstance(body["at"], datetime) else body["at"]
    path = directory / f"resp_{file_id or request.id}.json"
    path.write_text(json.dumps(body))
    if mtime is not None:
        os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


async def test_publish_writes_the_request_with_its_nonce(
    handshake: FileHandshake, service: ApprovalService
) -> None:
    request = await ask(service)
    path = await handshake.publish(request)
    body = json.loads(path.read_text())
    assert path.name == f"req_{request.id}.json"
    assert (body["id"], body["nonce"], body["action"], body["status"]) == (
        request.id,
        request.nonce,
        "command(npm publish)",
        "pending",
    )
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind


async def test_a_good_response_decides_and_is_consumed(
    handshake: FileHandshake, service: ApprovalService, audit: InMemoryAuditLog
) -> None:
    request = await ask(service)
    req_file = await handshake.publish(request)
    resp_file = respond(req_file.parent, request, reason="ship it")
    [result] = await handshake.poll_once()
    assert (result.outcome, result.detail, result.request_id) == ("decided", "decided", request.id)
    stored = await service.get(request.id)
    assert stored is not None
    assert (stored.status, stored.decided_by, stored.decision_reason) == ("approved", "U_A", "ship it")
    assert not resp_file.exists()
    assert not req_file.exists()  # closed requests are tidied away
    assert audit.entries[-1].outcome == "approved"


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"nonce": "guessed"}, "wrong nonce"),
        ({"nonce": ""}, "wrong nonce"),
        ({"at": "EARLY"}, "timestamp is before the request"),
        ({"at": "LATE"}, "timestamp is after the request expired"),
        ({"at": "2026-01-01T12:00:00"}, "no timezone"),
        ({"by": "U_EVE"}, "not_authorised"),
        ({"by": "U_REQ"}, "not_authorised"),
        ({"scope": "always"}, "scope_not_offered"),
        ({"approve": "yes please"}, "malformed"),
        ({"admin": True}, "malformed"),
    ],
)
async def test_bad_responses_are_refused_audited_and_consumed(
    handshake: FileHandshake,
    service: ApprovalService,
    audit: InMemoryAuditLog,
    fields: dict[str, Any],
    why: str,
) -> None:
    request = await ask(service)
    req_file = await handshake.publish(request)
    if fields.get("at") == "EARLY":
        fields["at"] = request.created_at - timedelta(seconds=1)
    if fields.get("at") == "LATE":
        fields["at"] = request.expires_at + timedelta(seconds=1)
    resp_file = respond(req_file.parent, request, **fields)
    [result] = await handshake.poll_once()
    assert result.outcome == "rejected"
    assert why in result.detail
    assert await service.get(request.id) == request  # nothing changed
    assert not resp_file.exists()
    assert req_file.exists()  # still pending, still published
    assert audit.entries[-1].outcome == "rejected"
    assert audit.entries[-1].request_id == request.id


@pytest.mark.parametrize(
    ("shift", "why"),
    [
        (timedelta(seconds=-5), "response file time is before the request was made"),
        (timedelta(minutes=6), "response file time is after the request expired"),
    ],
)
async def test_file_time_outside_the_window_is_refused(
    handshake: FileHandshake, service: ApprovalService, shift: timedelta, why: str
) -> None:
    request = await ask(service)
    req_file = await handshake.publish(request)
    respond(req_file.parent, request, mtime=request.created_at + shift)
    [result] = await handshake.poll_once()
    assert (result.outcome, result.detail) == ("rejected", why)
    assert await service.get(request.id) == request


async def test_a_response_cannot_decide_a_different_request(
    handshake: FileHandshake, service: ApprovalService
) -> None:
    target = await ask(service)
    other = await ask(service)
    directory = (await handshake.publish(target)).parent
    # Other's valid body (id and nonce) placed under target's file name, and vice versa.
    respond(directory, other, file_id=target.id)
    [result] = await handshake.poll_once()
    assert (result.outcome, result.detail) == ("rejected", "response id does not match its file name")
    assert await service.get(target.id) == target
    assert await service.get(other.id) == other


async def test_a_response_written_before_the_request_cannot_be_replayed(
    handshake: FileHandshake, service: ApprovalService
) -> None:
    request = await ask(service)
    directory = (await handshake.publish(request)).parent
    respond(directory, request, nonce="stale", mtime=request.created_at - timedelta(minutes=1))
    await handshake.poll_once()
    assert not list(directory.glob("resp_*"))
    respond(directory, request)  # the genuine answer still works afterwards
    [result] = await handshake.poll_once()
    assert result.outcome == "decided"


async def test_symlinked_response_is_refused(
    handshake: FileHandshake, service: ApprovalService, tmp_path: Path
) -> None:
    request = await ask(service)
    directory = (await handshake.publish(request)).parent
    outside = respond(tmp_path, request)
    (directory / f"resp_{request.id}.json").symlink_to(outside)
    [result] = await handshake.poll_once()
    assert result.outcome == "rejected"
    assert "unreadable" in result.detail
    assert outside.exists()  # the link is removed, never its target
    assert await service.get(request.id) == request


async def test_unknown_request_is_refused(handshake: FileHandshake, service: ApprovalService) -> None:
    request = await ask(service)
    directory = (await handshake.publish(request)).parent
    respond(directory, request, file_id="nope", id="nope")
    [result] = await handshake.poll_once()
    assert (result.outcome, result.detail) == ("rejected", "no such request")


async def test_run_publishes_requests_from_any_process_and_applies_responses(tmp_path: Path) -> None:
    store, audit = InMemoryApprovalStore(), InMemoryAuditLog()
    here = ApprovalService(store, audit, poll_interval=0.01)
    elsewhere = ApprovalService(store, audit)  # another replica: its events never reach `here`
    handshake = FileHandshake(tmp_path / "approvals", here, poll_interval=0.01)
    stop = asyncio.Event()
    runner = asyncio.create_task(handshake.run(stop))
    try:
        request = await ask(elsewhere)
        req_file = handshake.directory / f"req_{request.id}.json"
        async with asyncio.timeout(DEADLINE):
            while not req_file.exists():
                await asyncio.sleep(0.01)
        nonce = json.loads(req_file.read_text())["nonce"]
        respond(handshake.directory, request, nonce=nonce)
        decided = await asyncio.wait_for(here.wait(request.id), DEADLINE)
    finally:
        stop.set()
        await asyncio.wait_for(runner, DEADLINE)
    assert (decided.status, decided.decided_by) == ("approved", "U_A")
    await handshake.poll_once()
    assert not req_file.exists()  # decided requests are tidied away
