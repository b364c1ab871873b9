"""`bot.slack.parse`: slash text → command, payload → user/conversation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.slack.parse import (
    MAX_TASK_CHARS,
    Cancel,
    Conversation,
    Help,
    History,
    ListApprovals,
    OpenSettings,
    StartRun,
    Status,
    UsageError,
    action_value,
    conversation,
    parse_command,
    parse_task,
    strip_mentions,
    unescape_slack,
    user_id,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Help()),
        ("   ", Help()),
        ("help", Help()),
        ("HELP", Help()),
        ("status", Status()),
        ("status r-123", Status(run_id="r-123")),
        ("cancel r-123", Cancel(run_id="r-123")),
        ("approvals", ListApprovals()),
        ("history", History()),
        ("fix the flaky test", StartRun(task="fix the flaky test")),
        ("help me fix the flaky test", StartRun(task="help me fix the flaky test")),
        ("status of billing is broken", StartRun(task="status of billing is broken")),
        ("cancel the release please", StartRun(task="cancel the release please")),
        ("--team infra deploy it", StartRun(task="deploy it", team="infra")),
        ("--team=infra deploy it", StartRun(task="deploy it", team="infra")),
        ("--agents a,b --policy deny-all go", StartRun(task="go", agents=("a", "b"), policy="deny-all")),
        ("x &lt;b&gt; &amp;amp; y", StartRun(task="x <b> &amp; y")),
        ("fix it --team infra", StartRun(task="fix it --team infra")),
        ("settings", OpenSettings()),
        ("settings for billing", StartRun(task="settings for billing")),
        ("--repo billing fix the flaky test", StartRun(task="fix the flaky test", repo="billing")),
        ("--repo=web --team infra go", StartRun(task="go", repo="web", team="infra")),
        ("repo=billing fix it", StartRun(task="repo=billing fix it")),  # only a mention reads repo=
    ],
)
def test_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cancel", "cancel RUN"),
        ("cancel a/b", "cancel RUN"),
        ("status ../x", "status [RUN]"),
        ("--bogus 1 task", "Unknown option `--bogus`"),
        ("--<!channel> 1 task", "Unknown option `--channel`"),
        ("--team", "needs a value"),
        ("--team ../../etc task", "team name"),
        ("--policy yolo task", "must be one of"),
        ("--agents ,, task", "agent ids"),
        ("--team infra", "Give me a task"),
        ("--repo ../etc task", "repository name"),
        ("--repo", "needs a value"),
        ("x" * (MAX_TASK_CHARS + 1), "limit is 12,000"),
    ],
)
def test_usage_errors(text: str, fragment: str) -> None:
    result = parse_command(text)
    assert isinstance(result, UsageError)
    assert fragment in result.message
    assert "<!" not in result.message


def test_task_at_the_limit_is_accepted() -> None:
    assert parse_command("y" * MAX_TASK_CHARS) == StartRun(task="y" * MAX_TASK_CHARS)


@given(st.text(max_size=200))
def test_parse_never_raises_and_usage_errors_never_echo_control_characters(text: str) -> None:
    result = parse_command(text)
    if isinstance(result, UsageError):
        assert "<" not in result.message
        assert "&" not in result.message
    if isinstance(result, StartRun):
        assert 0 < len(result.task) <= MAX_TASK_CHARS


@pytest.mark.parametrize(
    ("raw", "plain"),
    [("&lt;!channel&gt;", "<!channel>"), ("&amp;lt;", "&lt;"), ("a &amp; b", "a & b")],
)
def test_unescape(raw: str, plain: str) -> None:
    assert unescape_slack(raw) == plain


def test_strip_mentions_removes_only_the_bots_own() -> None:
    assert strip_mentions("<@U0BOT> run   the <@U22|bob> tests", "U0BOT") == "run the <@U22|bob> tests"
    assert strip_mentions("<@U0BOT|massgen> ask <@U22> and <@U0BOT>", "U0BOT") == "ask <@U22> and"
    assert strip_mentions("<@U0BOT> ask <@U22> about it") == "ask <@U22> about it"  # bot id unknown


@pytest.mark.parametrize(
    ("body", "user", "conv"),
    [
        (
            {"user": {"id": "U1"}, "channel": {"id": "C1"}, "message": {"ts": "1.0", "thread_ts": "0.5"}},
            "U1",
            Conversation(channel="C1", thread_ts="0.5"),
        ),
        ({"user_id": "U2", "channel_id": "C2"}, "U2", Conversation(channel="C2")),
        (
            {"user": "U3", "channel": "C3", "thread_ts": "9.9"},
            "U3",
            Conversation(channel="C3", thread_ts="9.9"),
        ),
        ({"user": {}}, None, None),
    ],
)
def test_payload_fields(body: dict[str, object], user: str | None, conv: Conversation | None) -> None:
    assert user_id(body) == user
    assert conversation(body) == conv


def test_action_value() -> None:
    assert action_value({"actions": [{"value": "req-1"}]}) == "req-1"
    assert action_value({"actions": []}) is None
    assert action_value({}) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("repo=billing fix the flaky test", StartRun(task="fix the flaky test", repo="billing")),
        ("repo=billing --team infra go", StartRun(task="go", repo="billing", team="infra")),
        ("fix repo=billing please", StartRun(task="fix repo=billing please")),  # leading only
        ("repo=billing", UsageError(message="Give me a task: `/massgen [--team NAME] <task>`.")),
    ],
)
def test_a_mention_names_its_repository_with_repo_equals(text: str, expected: object) -> None:
    assert parse_task(text, mention=True) == expected


def test_a_mentions_repo_name_is_checked_like_the_option() -> None:
    result = parse_task("repo=<!channel> go", mention=True)
    assert isinstance(result, UsageError)
    assert "repository name" in result.message
