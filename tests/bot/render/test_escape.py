"""Escaping and redaction: tables of known cases plus properties over arbitrary text."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.playground.blockkit import find_mentions
from bot.render import (
    code,
    code_block,
    escape,
    markdown_to_mrkdwn,
    plain,
    redact,
    safe,
    truncate,
    user_mention,
)
from bot.render.redact import redact_every_pattern

# Text that looks like Slack markup: angle brackets, bangs, ats and ids mixed with anything.
slackish = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "<",
                ">",
                "&",
                "!",
                "@",
                "^",
                "|",
                "#",
                "`",
                "*",
                "_",
                "~",
                " ",
                "\n",
                "```",
                "channel",
                "here",
                "everyone",
                "subteam^S1",
                "U123",
                "&lt;",
                "&amp;",
            ]
        ),
        st.text(max_size=5),
    ),
    max_size=60,
).map("".join)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<!channel> ping", "&lt;!channel&gt; ping"),
        ("<@U123> & <https://evil|click>", "&lt;@U123&gt; &amp; &lt;https://evil|click&gt;"),
        ("a &lt; b", "a &amp;lt; b"),
        ("@here and @Channel", "@\u2060here and @\u2060Channel"),
        ("mail ops@here.io", "mail ops@\u2060here.io"),
        ("plain text", "plain text"),
    ],
)
def test_escape(raw: str, expected: str) -> None:
    assert escape(raw) == expected


@given(slackish)
@settings(max_examples=300, deadline=None)
def test_escaped_text_never_contains_a_live_mention(text: str) -> None:
    out = escape(text)
    assert "<" not in out
    assert ">" not in out
    assert find_mentions([out]) == []
    unescaped = out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert unescaped.replace("@\u2060", "@") == text.replace("@\u2060", "@")  # nothing else changed


@given(slackish)
@settings(max_examples=300, deadline=None)
def test_converted_markdown_never_contains_a_live_mention(text: str) -> None:
    out = markdown_to_mrkdwn(text)
    assert find_mentions([out]) == []
    # The only angle brackets left are links we built, to http(s) or mailto targets.
    for link in re.findall(r"<([^>]*)>", out):
        assert re.match(r"(https?://|mailto:)", link, re.IGNORECASE), out


@given(st.text(alphabet="ab&<> ", max_size=80), st.integers(min_value=2, max_value=60))
def test_truncate_never_cuts_an_entity(text: str, limit: int) -> None:
    out = truncate(escape(text), limit)
    assert len(out) <= limit
    body = out.removesuffix("…")
    assert re.search(r"&[a-z]*$", body) is None


@pytest.mark.parametrize(
    ("helper", "raw", "check"),
    [
        (code, "rm -rf `whoami` <!here>", lambda s: s.count("`") == 2 and "<" not in s),
        (code_block, "x\n```\n<!channel>", lambda s: s.count("```") == 2 and "<" not in s),
        (lambda t: plain(t, 150), "<@U1> header", lambda s: "<" not in s and ">" not in s),
        (safe, "token xoxb-1234567890-abcdef <b>", lambda s: "xoxb" not in s and "<" not in s),
    ],
)
def test_helpers_keep_untrusted_text_inert(
    helper: Callable[[str], str], raw: str, check: Callable[[str], bool]
) -> None:
    assert check(helper(raw))


@pytest.mark.parametrize(
    ("user", "expected"),
    [("U0ABC", "<@U0ABC>"), ("W0ABC", "<@W0ABC>"), ("<!here>", "&lt;!here&gt;"), ("u0abc", "u0abc")],
)
def test_user_mention_only_for_valid_ids(user: str, expected: str) -> None:
    assert user_mention(user) == expected


SECRETS = [
    ("openai", "key=sk-proj-abcdefghijklmnopqrstuvwxyz012345", "sk-proj-abcdefghij"),
    ("openai legacy", "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "sk-abcdefghij"),
    ("anthropic", "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-_wx", "sk-ant-api03"),
    ("slack bot", "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxb-1234567890"),
    ("slack user", "xoxp-1234567890-0987654321-AbCdEfGhIjKl", "xoxp-1234567890"),
    ("slack app", "xapp-1-A0123456789-1234567890-abcdef0123", "xapp-1-A0123"),
    ("github classic", "ghp_" + "A1b2C3d4E5" * 4, "ghp_A1b2"),
    ("github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11"),
    ("aws id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7"),
    ("aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    (
        "pem",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNz",
    ),
    ("pem unterminated", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", "MIIEpAIB"),
    ("bearer", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJI"),
    ("url password", "postgres://app:s3cr3t-pw@db.internal:5432/prod", "s3cr3t-pw"),
    ("query password", "https://host/login?user=a&password=hunter2&x=1", "hunter2"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_redact_removes_secrets(kind: str, text: str, secret: str) -> None:
    out = redact(f"before {text} after")
    assert secret not in out
    assert "[redacted" in out
    assert out.startswith("before ")


@pytest.mark.parametrize(
    "text",
    [
        "the sky is blue; sk-learn is a library",
        "ask-ant-colony algorithm",
        "see https://example.com/docs?page=2",
        "password reset instructions",
        "AKIA is a prefix",
    ],
)
def test_redact_leaves_ordinary_text(text: str) -> None:
    assert redact(text) == text


def test_redaction_keeps_the_label_so_readers_know_something_was_there() -> None:
    assert redact("Bearer abcdefghijkl") == "Bearer [redacted bearer token]"
    assert redact("https://u:pw12345@h/x") == "https://u:[redacted url password]@h/x"


# The secrets' pieces, in any case, with characters whose case folds oddly (Kelvin sign, long s,
# dotted I), so text holding a secret in a spelling the triggers miss would be found.
secretish = st.lists(
    st.one_of(
        st.sampled_from([s for _, text, _ in SECRETS for s in (text, text.upper(), text.lower())]),
        st.sampled_from(["sk-", "ant-", "xox", "b-", "gh", "p_", "aws", "_secret", "_key", "=", " ", "://"]),
        st.sampled_from(["\u212a", "\u017f", "\u0130", "K", "s", "I", "bearer ", "BASIC ", "@", ":", "tok"]),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/+.=", max_size=24),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(secretish)
def test_redact_finds_what_every_pattern_scanned_finds(text: str) -> None:
    """The triggers only skip scans that could not match: the result is that of all the scans."""
    assert redact(text) == redact_every_pattern(text)
