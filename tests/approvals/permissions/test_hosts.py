"""The hosts an egress decision opens are the ones its text names; none named opens nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions import Action, PermissionConfig, PermissionEngine
from approvals.permissions.boundaries.hosts import MAX_HOSTS, egress_hosts


@pytest.mark.parametrize(
    ("command", "hosts"),
    [
        ("curl -s https://api.example.com/v1/x", ("api.example.com",)),
        ("wget http://user:pw@Files.Example.org:8080/a.tgz", ("files.example.org",)),
        ("git clone git@github.com:acme/billing.git", ("github.com",)),
        ("pip install requests", ("pypi.org", "files.pythonhosted.org")),
        ("curl http://[::1]:8080/ && curl https://a.example.com", ("::1", "a.example.com")),
        ("ssh somewhere uptime", ()),
    ],
)
def test_hosts_are_read_from_the_text(command: str, hosts: tuple[str, ...]) -> None:
    assert egress_hosts(Action(kind="command", target=command)) == hosts


def test_hosts_are_bounded_and_linear_on_adversarial_text() -> None:
    text = " ".join(f"https://h{i}.example.com" for i in range(1000)) + "a@" * 30_000 + "://" * 20_000
    assert len(egress_hosts(Action(kind="command", target=text))) == MAX_HOSTS


def test_an_egress_decision_names_its_hosts_or_says_it_opens_nothing(tmp_path: Path) -> None:
    engine = PermissionEngine(PermissionConfig(workspace=tmp_path))
    named = engine.evaluate(Action(kind="command", target="curl -s https://api.example.com/x"))
    assert named.egress
    assert named.verdict != "allow"
    assert named.hosts == ("api.example.com",)
    assert "reaches only: api.example.com" in named.reason
    unnamed = engine.evaluate(Action(kind="command", target="git push"))
    assert unnamed.hosts == ()
    quiet = engine.evaluate(Action(kind="command", target="ls -la"))
    assert quiet.hosts == ()
    assert not quiet.egress


def test_a_fetch_names_the_host_the_engine_reads_from_its_url() -> None:
    assert egress_hosts(Action(kind="fetch", target="HTTPS://Docs.Example.com:443/a")) == (
        "docs.example.com",
    )
    assert egress_hosts(Action(kind="fetch", target="file:///etc/passwd")) == ()
