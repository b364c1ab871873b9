"""Engine v2, round 2: a URL path servers may decode differently never passes a path rule.

Dot segments are resolved after one decoding pass (`/public/%2E%2e/admin` is `/admin`); double
encoding, `..;/` path parameters, encoded slashes and backslashes, NUL and `%u` escapes make the
path ambiguous: an allow rule naming paths does not apply, and a deny or ask rule naming paths
on that host does (fail closed).
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, PermissionConfig, PermissionEngine, PolicyName, load_rules
from approvals.permissions.model.urls import normalise

RULES = {
    "allow": ["fetch(https://api.example.com/public/**)", "fetch(domain:docs.example.com)"],
    "deny": ["fetch(https://docs.example.com/admin/**)"],
}


@functools.cache
def _engine(policy: PolicyName) -> PermissionEngine:
    from pathlib import Path

    return PermissionEngine(
        PermissionConfig(
            workspace=Path("/tmp/ws-fetch"), home=Path("/home/tester"), policy=policy, rules=load_rules(RULES)
        )
    )


_TRAVERSALS = [
    "%2e%2e", "%2E%2E", "%2e%2E", ".%2e", "%2e.", "%252e%252e", "%252E%252E", "%25252e%25252e", "..;",
    "..%3b", "..%3B", "%2e%2e;", "..;jsessionid=1", "..%00", "%2e%2e%00", "%u002e%u002e", "..%2f..",
    "..%5c..", "..%255c..", "..%252f..",
]  # fmt: skip


@pytest.mark.parametrize("traversal", _TRAVERSALS)
@pytest.mark.parametrize("policy", ["human", "risk-based"])
def test_an_ambiguous_traversal_out_of_an_allowed_path_is_not_allowed(
    traversal: str, policy: PolicyName
) -> None:
    url = f"https://api.example.com/public/{traversal}/admin"
    decision = _engine(policy).evaluate(Action(kind="fetch", target=url))
    assert decision.verdict != "allow", (url, decision.reason)


@pytest.mark.parametrize("traversal", _TRAVERSALS)
def test_an_ambiguous_traversal_into_a_denied_path_is_denied(traversal: str) -> None:
    url = f"https://docs.example.com/guide/{traversal}/admin/users"
    decision = _engine("allow-all").evaluate(Action(kind="fetch", target=url))
    assert decision.resolved == "deny", (url, decision.reason)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/public/a/../../admin",
        "https://api.example.com/public/%2e%2e/admin",
        "https://api.example.com/public/.%2E/admin",
        "https://api.example.com/public/x/%2e%2e/%2e%2e/admin",
        "https://api.example.com/public\\..\\admin",
    ],
)
def test_dot_segments_after_one_decoding_are_resolved_before_matching(url: str) -> None:
    decision = _engine("human").evaluate(Action(kind="fetch", target=url))
    assert decision.verdict != "allow", (url, decision.reason)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/public/x",
        "https://api.example.com/public/my%20file.pdf",
        "https://api.example.com/public/a%2Bb",
        "https://api.example.com/public/%7Euser/page",
        "https://api.example.com/public/v1/items?q=a%2Fb",
        "https://api.example.com/public/a/./b",
        "https://docs.example.com/guide/install",
        "https://docs.example.com/x;y",
    ],
)
def test_plain_urls_under_an_allowed_path_stay_allowed(url: str) -> None:
    decision = _engine("human").evaluate(Action(kind="fetch", target=url))
    assert decision.verdict == "allow", (url, decision.reason)


def test_the_normalised_path_resolves_decoded_dots() -> None:
    url = normalise("https://a.example.com/x/%2E%2e/y")
    assert not isinstance(url, str)
    assert url.path == "/y"
    tricky = normalise("https://a.example.com/x/%252e%252e/y")
    assert not isinstance(tricky, str)
    assert tricky.path_tricky is not None


_SEGMENT = st.sampled_from(
    ["a", "..", ".", "%2e", "%2E", "%25", "%2f", "%5c", ";", "%3b", "x%00", "%u002e", "b"]
)


@settings(max_examples=200, deadline=None)
@given(segments=st.lists(_SEGMENT, min_size=1, max_size=8))
def test_no_spelling_leaves_the_allowed_path_and_is_allowed(segments: list[str]) -> None:
    url = "https://api.example.com/public/" + "/".join(segments) + "/admin"
    decision = _engine("human").evaluate(Action(kind="fetch", target=url))
    parsed = normalise(url)
    assert not isinstance(parsed, str)
    if decision.verdict == "allow":
        assert parsed.tricky is None
        assert all(p.startswith("/public/") for p in (parsed.path, *parsed.readings)), parsed


_COMMAND_RULES = {
    "allow": ["command(curl *)", "command(wget *)", "fetch(https://api.example.com/public/**)"],
    "deny": ["fetch(https://docs.example.com/admin/**)"],
}


@functools.cache
def _command_engine() -> PermissionEngine:
    from pathlib import Path

    return PermissionEngine(
        PermissionConfig(
            workspace=Path("/tmp/ws-fetch"), home=Path("/home/tester"), rules=load_rules(_COMMAND_RULES)
        )
    )


@pytest.mark.parametrize(
    "command",
    [
        "curl https://docs.example.com/admin/users",
        "curl -s https://docs.example.com/x/%252e%252e/admin/users",
        "curl 'https://docs.example.com/x/..;/admin/users'",
        "curl https://docs.example.com/%61dmin/users",
        "wget -q https://DOCS.example.com/admin/x",
        "curl --url=https://docs.example.com/admin/x",
        "curl -o out.html https://docs.example.com/x/%2e%2e/admin/",
        "curl http://169.254.169.254/latest/meta-data/",
    ],
)
def test_fetch_deny_rules_hold_for_urls_in_commands(command: str) -> None:
    decision = _command_engine().evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision.reason)


@pytest.mark.parametrize(
    "command", ["curl https://docs.example.com/guide", "curl -s https://api.example.com/public/x | jq ."]
)
def test_other_urls_in_commands_keep_the_command_rules(command: str) -> None:
    decision = _command_engine().evaluate(Action(kind="command", target=command))
    assert decision.resolved == "allow", (command, decision.reason)
