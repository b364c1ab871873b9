"""Pure translation of Slack input into commands, principals and conversation references.

Nothing here awaits or touches Slack; listeners call these right after `ack()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# Long enough for a pasted stack trace; Slack itself keeps message text up to 40,000 characters.
MAX_TASK_CHARS: Final = 12_000
POLICIES: Final = ("human", "risk-based", "deny-all", "allow-all")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
# `repo=NAME` leading a mention's task (a whole word: "repo=billing", not "repo=billing's").
_REPO_WORD = re.compile(r"repo=(\S{1,64})(?:\s+|$)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Help:
    """`/massgen` or `/massgen help`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    run_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListApprovals:
    """`/massgen approvals`: what waits for me."""


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """`/massgen history`: recent runs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenSettings:
    """`/massgen settings`: the channel's defaults (repository, team, policy, approvers), in a modal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun:
    task: str
    team: str | None = None
    agents: tuple[str, ...] = ()
    policy: str | None = None
    repo: str | None = None  # a repository by name (`--repo NAME`, `repo=NAME` in a mention)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageError:
    """Bad input: shown to the invoker only; starts nothing."""

    message: str


Command = Help | Status | Cancel | ListApprovals | History | OpenSettings | StartRun | UsageError


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """Where a request came from: a channel and, inside a thread, the thread's root ts."""

    channel: str
    thread_ts: str | None = None


def unescape_slack(text: str) -> str:
    """Undo Slack's `&amp; &lt; &gt;` escaping of incoming text (`&amp;` last: `&amp;lt;` stays `&lt;`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def strip_mentions(text: str, bot_user_id: str | None = None) -> str:
    """Remove the bot's own mentions from a mention event's text; other people's stay in the task.

    "@massgen ask @alice about the outage" is about Alice. Without the bot's id (auth.test failed)
    only the leading mention, the one that addressed the bot, is removed.
    """
    if bot_user_id:
        own = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>")
        text = own.sub(" ", text)
    else:
        text = re.sub(rf"^\s*{_MENTION.pattern}", " ", text)
    return " ".join(text.split())


def parse_command(text: str, *, mention: bool = False) -> Command:
    """Parse the text after `/massgen` or a mention (`mention=True`), still Slack-escaped."""
    words = text.split()
    if not words:
        return Help()
    head, rest = words[0].lower(), words[1:]
    keyword = _keyword(head, rest)
    if keyword is not None:
        return keyword
    return parse_task(text, mention=mention)


def _keyword(head: str, rest: list[str]) -> Command | None:
    """Keyword commands match only with the arity they take, so "status of billing is broken" is a task."""
    if head == "help" and not rest:
        return Help()
    if head in {"approvals", "history"} and not rest:
        return ListApprovals() if head == "approvals" else History()
    if head == "settings" and not rest:
        return OpenSettings()
    if head == "status" and len(rest) <= 1:
        if rest and not _RUN_ID.fullmatch(rest[0]):
            return UsageError(message="Usage: `/massgen status [RUN]` (RUN is a run id).")
        return Status(run_id=rest[0] if rest else None)
    if head == "cancel" and len(rest) <= 1:
        if not rest or not _RUN_ID.fullmatch(rest[0]):
            return UsageError(
                message="Usage: `/massgen cancel RUN` (RUN is a run id, see `/massgen status`)."
            )
        return Cancel(run_id=rest[0])
    return None


def parse_task(text: str, *, mention: bool = False) -> StartRun | UsageError | Help:
    """Leading `--team NAME`, `--agents a,b`, `--policy NAME`, `--repo NAME` options, then the task.

    In a mention (`mention=True`) a leading `repo=NAME` also names the repository, the way people
    write it to a bot in a channel ("@massgen repo=billing fix the flaky test").
    """
    options: dict[str, str] = {}
    remaining = text.strip()
    if mention and (found := _REPO_WORD.match(remaining)):
        options["repo"], remaining = found.group(1), remaining[found.end() :].lstrip()
    while remaining.startswith("--"):
        token, _, remaining = remaining.partition(" ")
        remaining = remaining.lstrip()
        name, eq, value = token[2:].partition("=")
        if not eq:
            value, _, remaining = remaining.partition(" ")
            remaining = remaining.lstrip()
        if name not in {"team", "agents", "policy", "repo"}:
            return UsageError(
                message=f"Unknown option `--{_plain(name)}`. Options: --repo, --team, --agents, --policy."
            )
        if not value:
            return UsageError(message=f"Option `--{name}` needs a value.")
        options[name] = value
    return _start_run(unescape_slack(remaining).strip(), options)


def _start_run(task: str, options: Mapping[str, str]) -> StartRun | UsageError | Help:
    if not task:
        return UsageError(message="Give me a task: `/massgen [--team NAME] <task>`.") if options else Help()
    if len(task) > MAX_TASK_CHARS:
        return UsageError(
            message=(
                f"That task is {len(task):,} characters; the limit is {MAX_TASK_CHARS:,}. "
                "Trim it to the part that matters (for a long log: the error and the lines around it)."
            )
        )
    team = options.get("team")
    if team is not None and not _NAME.fullmatch(team):
        return UsageError(message="`--team` takes a team name (letters, digits, `-`, `_`, `.`).")
    repo = options.get("repo")
    if repo is not None and not _NAME.fullmatch(repo):
        return UsageError(message="`--repo` takes a repository name (letters, digits, `-`, `_`, `.`).")
    policy = options.get("policy")
    if policy is not None and policy not in POLICIES:
        return UsageError(message=f"`--policy` must be one of: {', '.join(POLICIES)}.")
    agents: tuple[str, ...] = ()
    if "agents" in options:
        agents = tuple(a for a in options["agents"].split(",") if a)
        if not agents or not all(_NAME.fullmatch(a) for a in agents):
            return UsageError(
                message="`--agents` takes agent ids separated by commas, e.g. `--agents alpha,beta`."
            )
    return StartRun(task=task, team=team, agents=agents, policy=policy, repo=repo)


def _plain(text: str) -> str:
    """Echo-safe fragment of user input for an ephemeral error (no mrkdwn control characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "", text)[:40]


def is_user_id(value: str) -> bool:
    """True for a Slack user id we may mention (`<@U123>`)."""
    return bool(_USER_ID.fullmatch(value))


def user_id(body: Mapping[str, Any]) -> str | None:
    """The acting user from a signed payload: interactive `user.id`, command `user_id`, or event `user`."""
    user = body.get("user")
    if isinstance(user, Mapping):
        value = user.get("id")
        return value if isinstance(value, str) and value else None
    for key in ("user_id", "user"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def team_id(body: Mapping[str, Any]) -> str | None:
    """The workspace id of a payload (`team.id` or `team_id`)."""
    team = body.get("team")
    if isinstance(team, Mapping) and isinstance(team.get("id"), str):
        return str(team["id"])
    value = body.get("team_id")
    return value if isinstance(value, str) else None


def action_value(body: Mapping[str, Any]) -> str | None:
    """The `value` of the clicked button (a request or run id only; everything else is looked up)."""
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], Mapping):
        return None
    value = actions[0].get("value")
    return value if isinstance(value, str) and value else None


def conversation(body: Mapping[str, Any]) -> Conversation | None:
    """Channel and thread of a command, an interactive payload, or an event."""
    channel = body.get("channel")
    if isinstance(channel, Mapping):
        channel = channel.get("id")
    if not isinstance(channel, str):
        channel = body.get("channel_id")
    if not isinstance(channel, str) or not channel:
        return None
    thread = body.get("thread_ts")
    message = body.get("message")
    if thread is None and isinstance(message, Mapping):
        thread = message.get("thread_ts")
    return Conversation(channel=channel, thread_ts=thread if isinstance(thread, str) else None)
