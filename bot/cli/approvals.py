"""`massgen-bot approvals list|approve|deny|files` and `massgen-bot audit`: the headless channel.

The CLI acts as one principal (`--as`, default `cli:$USER`) that must be listed among the
request's approvers; it decides through the same `ApprovalService` as Slack, so the first
decision still wins atomically and every attempt is audited. A bot waiting on the request sees
the decision at its next poll of the database.

Exit codes: 0 done, 1 error (database, settings), 2 usage, 3 not authorised, 4 no such request,
5 already decided (or expired, or cancelled), 6 scope not offered.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from approvals import (
    SCOPES,
    ApprovalsError,
    ApprovalService,
    AuditEntry,
    DecideResult,
    FileHandshake,
    Principal,
    Scope,
)
from bot.approval_ui import pending_for
from bot.settings import BotSettings
from bot.wiring import open_storage

EXIT_OK, EXIT_ERROR, EXIT_NOT_AUTHORISED, EXIT_NOT_FOUND, EXIT_ALREADY_DECIDED, EXIT_SCOPE = 0, 1, 3, 4, 5, 6
_EXIT_BY_KIND = {
    "decided": EXIT_OK,
    "quorum_pending": EXIT_OK,
    "not_authorised": EXIT_NOT_AUTHORISED,
    "not_found": EXIT_NOT_FOUND,
    "already_decided": EXIT_ALREADY_DECIDED,
    "already_cancelled": EXIT_ALREADY_DECIDED,
    "scope_not_offered": EXIT_SCOPE,
}


def register(subparsers: Any) -> None:
    """Add `approvals` (with list/approve/deny) and `audit`."""
    approvals = subparsers.add_parser("approvals", help="list and decide pending approval requests")
    actions = approvals.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="pending requests you may decide (--all for every one)")
    listing.add_argument("--all", action="store_true", help="every pending request, not just yours")
    listing.add_argument("--run", metavar="ID", help="only this run's requests")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    _common(listing, principal=True)
    listing.set_defaults(func=lambda args: _run(_list, args))

    show = actions.add_parser("show", help="everything about one request, the full action included")
    show.add_argument("request_id", metavar="ID")
    _common(show, principal=False)
    show.set_defaults(func=lambda args: _run(_show, args))

    approve = actions.add_parser("approve", help="approve a pending request")
    approve.add_argument("request_id", metavar="ID")
    approve.add_argument("--scope", choices=SCOPES, default="once", help="once (default), run or always")
    approve.add_argument("--reason", help="note recorded with the decision")
    _common(approve, principal=True)
    approve.set_defaults(func=lambda args: _run(_decide, args, approve=True))

    deny = actions.add_parser("deny", help="deny a pending request (a reason is required)")
    deny.add_argument("request_id", metavar="ID")
    deny.add_argument("--reason", required=True, help="why; relayed to the agent and audited")
    _common(deny, principal=True)
    deny.set_defaults(func=lambda args: _run(_decide, args, approve=False))

    files = actions.add_parser(
        "files", help="run the file handshake: publish req_<id>.json, apply resp_<id>.json (until Ctrl-C)"
    )
    files.add_argument("directory", type=Path, metavar="DIR", help="handshake directory (created 0700)")
    files.add_argument("--poll", type=float, default=0.4, metavar="SECONDS", help="poll interval (0.4)")
    _common(files, principal=False)
    files.set_defaults(func=lambda args: _run(_files, args))

    audit = subparsers.add_parser("audit", help="show the audit trail of permission decisions")
    audit.add_argument("--run", metavar="ID", help="only this run's entries")
    audit.add_argument("--jsonl", action="store_true", help="JSON lines instead of a table")
    audit.add_argument("--limit", type=int, default=None, metavar="N", help="only the last N entries")
    _common(audit, principal=False)
    audit.set_defaults(func=lambda args: _run(_audit, args))


def _common(parser: argparse.ArgumentParser, *, principal: bool) -> None:
    parser.add_argument(
        "--database-url",
        default=None,
        help="database (default $DATABASE_URL, else the bot's SQLite file, ./massgen.db)",
    )
    if principal:
        parser.add_argument(
            "--as",
            dest="principal",
            default=None,
            metavar="USER",
            help="principal id to act as (default cli:$USER); must be an approver of the request",
        )


def _principal(args: argparse.Namespace) -> Principal:
    # Groups are never taken from the command line: membership must come from a trusted lookup.
    return Principal(id=args.principal or f"cli:{getpass.getuser()}")


Command = Callable[..., Coroutine[Any, Any, int]]


def _run(command: Command, args: argparse.Namespace, **kwargs: Any) -> int:
    try:
        settings = BotSettings.load()
        if args.database_url:
            settings = settings.model_copy(update={"database_url": args.database_url})
        url = settings.resolved_database_url()
    except ValueError as exc:
        print(f"massgen-bot: invalid settings: {exc}", file=sys.stderr)
        return EXIT_ERROR
    missing = _missing_sqlite_file(url)
    if missing is not None:
        # Reading must not conjure an empty database: say where we looked instead.
        print(f"massgen-bot: no approvals database at {missing} (use --database-url)", file=sys.stderr)
        return EXIT_ERROR
    try:
        return asyncio.run(_with_service(command, settings, args, **kwargs))
    except (ApprovalsError, OSError) as exc:
        print(f"massgen-bot: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _missing_sqlite_file(url: str) -> str | None:
    try:
        parsed = make_url(url)
    except Exception:
        return None  # make_engine reports the bad URL
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return None if Path(parsed.database).exists() else parsed.database


async def _with_service(
    command: Command, settings: BotSettings, args: argparse.Namespace, **kwargs: Any
) -> int:
    from bot.engine import OutsideWaker, wake_on_decisions

    storage = await open_storage(settings)  # the bot's own stores, through its composition root
    waker = OutsideWaker(settings)  # a decision made here wakes the parked run wherever it is
    wake_on_decisions(storage.approvals, waker.send)
    try:
        return await command(storage.approvals, args, **kwargs)
    finally:
        await waker.close()
        await storage.close()


async def _list(service: ApprovalService, args: argparse.Namespace) -> int:
    if args.all:
        requests = await service.pending(run_id=args.run)
    else:  # the same "pending for this user" query as Slack; no groups: none are trusted from a terminal
        requests = await pending_for(service, _principal(args).id, run_id=args.run)
    if args.json:
        for request in requests:
            print(json.dumps(request.summary(), sort_keys=True))
        return EXIT_OK
    if not requests:
        print("no pending requests" + ("" if args.all else f" for {_principal(args).id}"))
        return EXIT_OK
    rows = [
        (
            r.id,
            r.run_id,
            r.agent_id,
            r.risk,
            _when(r.expires_at),
            ",".join(r.scopes),
            _clip(str(r.action), 80),
        )
        for r in requests
    ]
    _table(("ID", "RUN", "AGENT", "RISK", "EXPIRES (UTC)", "SCOPES", "ACTION"), rows)
    return EXIT_OK


async def _show(service: ApprovalService, args: argparse.Namespace) -> int:
    request = await service.get(args.request_id)
    if request is None:
        print(f"not found: no approval request {args.request_id!r}", file=sys.stderr)
        return EXIT_NOT_FOUND
    approvers, votes = request.approvers, ", ".join(request.approvals_so_far)
    fields = {
        "id": request.id,
        "status": request.status,
        "run": f"{request.run_id} (agent {request.agent_id}, requested by {request.requester_id or '-'})",
        "risk": f"{request.risk} ({request.layer}: {request.reason})",
        "rule": request.rule or "-",
        "digest": request.digest,
        "scopes": ", ".join(request.scopes),
        "approvers": ", ".join(sorted(approvers.users) + [f"group:{g}" for g in sorted(approvers.groups)]),
        "votes": f"{len(request.approvals_so_far)} of {approvers.quorum} needed {votes}".rstrip(),
        "created": _when(request.created_at),
        "expires": _when(request.expires_at),
    }
    if request.terminal:
        fields["decided"] = (
            f"{request.decided_by or 'engine'} at {_when(request.decided_at or request.expires_at)}"
        )
        fields["reason"] = request.decision_reason or "-"
    for key, value in fields.items():
        print(f"{key + ':':11}{value}")
    # The exact action, unclipped and on its own lines: what you approve is what will run.
    print(f"action:\n{request.action}")
    return EXIT_OK


async def _decide(service: ApprovalService, args: argparse.Namespace, *, approve: bool) -> int:
    principal = _principal(args)
    scope: Scope = args.scope if approve else "once"
    result = await service.decide(
        args.request_id, principal, approve=approve, scope=scope, reason=args.reason
    )
    stream = sys.stdout if result.kind in ("decided", "quorum_pending") else sys.stderr
    print(_describe(result, principal), file=stream)
    return _EXIT_BY_KIND[result.kind]


def _describe(result: DecideResult, principal: Principal) -> str:
    match result.kind:
        case "decided":
            request = result.request
            scope = f" ({request.decision_scope})" if request.status == "approved" else ""
            return f"{request.status}{scope}: {request.action} [{request.id}] by {principal.id}"
        case "quorum_pending":
            return f"vote counted: {result.approvals} of {result.needed} approvals [{result.request.id}]"
        case "not_authorised":
            return f"not authorised: {result.why} (the attempt was recorded)"
        case "not_found":
            return f"not found: no approval request {result.request_id!r}"
        case "already_cancelled":
            why = f" ({result.request.decision_reason})" if result.request.decision_reason else ""
            return f"already cancelled{why}: nothing changed"
        case "already_decided":
            return f"already decided: the request is {result.request.status}; nothing changed"
        case "scope_not_offered":
            return f"scope {result.scope!r} was not offered; choose one of {', '.join(result.request.scopes)}"


async def _files(service: ApprovalService, args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    handshake = FileHandshake(args.directory, service, poll_interval=args.poll)
    print(f"file handshake on {args.directory}; Ctrl-C to stop", flush=True)
    await handshake.run(stop)
    return EXIT_OK


async def _audit(service: ApprovalService, args: argparse.Namespace) -> int:
    entries = await service.audit_trail(run_id=args.run, limit=args.limit)
    if args.jsonl:
        for entry in entries:
            print(entry.to_line())
        return EXIT_OK
    if not entries:
        print("no audit entries")
        return EXIT_OK
    _table(
        ("AT (UTC)", "RUN", "AGENT", "ACTOR", "OUTCOME", "ACTION", "REASON"), [_audit_row(e) for e in entries]
    )
    return EXIT_OK


def _audit_row(entry: AuditEntry) -> tuple[str, ...]:
    outcome = entry.outcome + (f" ({entry.scope})" if entry.scope else "")
    return (
        _when(entry.at),
        entry.run_id or "-",
        entry.agent_id or "-",
        entry.actor,
        outcome,
        _clip(entry.action or "-", 60),
        _clip(entry.reason or "", 60),
    )


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())  # a newline inside a command must not break the table
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
