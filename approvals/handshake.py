"""File handshake for external approvers: `req_<id>.json` out, `resp_<id>.json` back.

Closes the holes of MassGen's file channel (reference 4.12.8): ids are random, every request
carries a random nonce the response must echo, a response dated (by its own timestamp or by the
file's mtime) before the request or after its deadline is refused, a response can only decide the
request named by its file name, and request files are written atomically and removed once the
request is decided. The responder names itself in `by` and must be an approver of the request.

Response format::

    {"id": "<request id>", "nonce": "<nonce>", "approve": true, "scope": "once",
     "by": "<principal id>", "at": "2026-01-01T12:00:00Z", "reason": "optional"}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from approvals.errors import HandshakeError
from approvals.models import ApprovalRequest, DecideResult, Principal, Scope
from approvals.service import ApprovalService

MAX_RESPONSE_BYTES = 16_384
ZERO = timedelta(0)
# File times come from the kernel's coarse clock, which may trail the wall clock by one tick
# (4-10 ms), so a response written right after the request can look a few ms older than it.
MTIME_SLACK = timedelta(milliseconds=20)


class _Response(BaseModel):
    """The only shape a response file may have; anything else is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    nonce: str
    approve: bool
    scope: Scope = "once"
    by: str
    at: datetime
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeResult:
    """What became of one response file (it is deleted either way)."""

    file: str
    request_id: str
    outcome: Literal["decided", "rejected"]
    detail: str
    result: DecideResult | None = None


class FileHandshake:
    """Publishes pending requests as files and applies the responses that external tools write."""

    def __init__(self, directory: Path, service: ApprovalService, *, poll_interval: float = 0.4) -> None:
        self._dir = directory
        self._service = service
        self._poll_interval = poll_interval

    @property
    def directory(self) -> Path:
        """The folder the request and response files are exchanged in."""
        return self._dir

    def _ensure_dir(self) -> None:
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self._dir.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise HandshakeError(f"{self._dir} is not a directory (symlinks are refused)")

    async def publish(self, request: ApprovalRequest) -> Path:
        """Write `req_<id>.json` atomically (temporary file, then rename)."""
        self._ensure_dir()
        # The nonce goes only here: a response must echo it to prove it answers this very request.
        body = {**request.summary(), "nonce": request.nonce, "status": request.status}
        final = self._dir / f"req_{request.id}.json"
        temporary = self._dir / f".req_{request.id}.{secrets.token_hex(4)}.tmp"
        temporary.write_text(json.dumps(body, indent=2, sort_keys=True))
        os.chmod(temporary, 0o600)
        os.replace(temporary, final)
        return final

    async def poll_once(self) -> list[HandshakeResult]:
        """Apply every response file present, delete it, and tidy request files of closed requests."""
        self._ensure_dir()
        results = [await self._consume(path) for path in sorted(self._dir.glob("resp_*.json"))]
        for path in sorted(self._dir.glob("req_*.json")):
            request = await self._service.get(path.stem.removeprefix("req_"))
            if request is None or request.terminal:
                path.unlink(missing_ok=True)
        return results

    async def run(self, stop: asyncio.Event) -> None:
        """Publish pending requests and apply responses until `stop` is set.

        Every round publishes whatever is pending without a file, so requests made by other
        processes (another bot replica) appear too, and a deleted request file comes back.
        """
        while not stop.is_set():
            await self.publish_pending()
            await self.poll_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._poll_interval)

    async def publish_pending(self) -> list[Path]:
        """Write a request file for every pending request that has none yet."""
        self._ensure_dir()
        written = []
        for request in await self._service.pending():
            if not (self._dir / f"req_{request.id}.json").exists():
                written.append(await self.publish(request))
        return written

    async def _consume(self, path: Path) -> HandshakeResult:
        file_id = path.stem.removeprefix("resp_")
        taken = _take_response(path)
        if isinstance(taken, str):
            return await self._refuse(path, file_id, "file:handshake", taken)
        mtime, raw = taken
        try:
            response = _Response.model_validate_json(raw)
        except ValidationError as exc:
            detail = f"malformed response: {exc.error_count()} error(s)"
            return await self._refuse(path, file_id, "file:handshake", detail)
        # The file name picks the request; the body must agree, so a response for one request
        # can never be renamed or copied into a decision on another.
        if response.id != file_id:
            return await self._refuse(path, file_id, response.by, "response id does not match its file name")
        request = await self._service.get(file_id)
        if request is None:
            return await self._refuse(path, file_id, response.by, "no such request")
        if not secrets.compare_digest(response.nonce.encode(), request.nonce.encode()):
            return await self._refuse(path, file_id, response.by, "wrong nonce")
        why = _outside_window(request, response.at, mtime)
        if why is not None:
            return await self._refuse(path, file_id, response.by, why)
        principal = Principal(id=response.by)
        result = await self._service.decide(
            file_id, principal, approve=response.approve, scope=response.scope, reason=response.reason
        )
        outcome: Literal["decided", "rejected"] = (
            "decided" if result.kind in ("decided", "quorum_pending") else "rejected"
        )
        return HandshakeResult(
            file=path.name, request_id=file_id, outcome=outcome, detail=result.kind, result=result
        )

    async def _refuse(self, path: Path, request_id: str, by: str, why: str) -> HandshakeResult:
        await self._service.reject(request_id, by, f"file handshake: {why}")
        return HandshakeResult(file=path.name, request_id=request_id, outcome="rejected", detail=why)


def _take_response(path: Path) -> tuple[datetime, bytes] | str:
    """Read and delete a response file: its mtime and bytes, or why it cannot be read.

    One shot: a response is never read twice, whatever becomes of it. Symlinks, non-regular and
    oversized files are refused. The files are tiny, so plain blocking I/O is fine here.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return "response is not a regular file"
            if info.st_size > MAX_RESPONSE_BYTES:
                return "response is too large"
            return datetime.fromtimestamp(info.st_mtime, UTC), handle.read(MAX_RESPONSE_BYTES)
    except OSError as exc:
        return f"unreadable response: {exc.strerror}"
    finally:
        path.unlink(missing_ok=True)


def _outside_window(request: ApprovalRequest, at: datetime, mtime: datetime) -> str | None:
    """Why a response dated `at`, written at `mtime`, cannot answer `request` (None if it can)."""
    if at.tzinfo is None:
        return "response timestamp has no timezone"
    for label, when, slack in (("timestamp", at, ZERO), ("file time", mtime, MTIME_SLACK)):
        if when + slack < request.created_at:
            return f"response {label} is before the request was made"
        if when > request.expires_at:
            return f"response {label} is after the request expired"
    return None
