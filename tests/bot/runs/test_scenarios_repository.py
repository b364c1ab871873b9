"""In Slack: a run on a named repository ends, after one click, in one pull request; a follow-up in its
thread adds a commit to the same pull request; a denied click pushes nothing.

A local bare remote and the project's GitHub stand-in (`bot/playground/forge.py`); no forge is called.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.playground.emulator import SlackEmulator
from bot.playground.forge import DEMO_PROJECT, ForgeStandIn, demo_remote
from bot.render import ids
from orchestrator import RunFinished
from orchestrator.repos import branch_for
from tests.bot.harness import APPROVER, REQUESTER, TOKEN, BotHarness, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply

TOKEN_ENV = "MASSGEN_TEST_FORGE_TOKEN"
FIXED = "def total(prices):\n    return sum(prices)\n"
COMMENTED = 'def total(prices):\n    """The sum of the prices."""\n    return sum(prices)\n'


def edits(content: str) -> Any:
    """An agent that writes billing.py once, then follows the protocol."""

    def handler(request: ProviderRequest) -> Reply:
        wrote = any(m.role == "assistant" and m.tool_calls for m in request.messages)
        if "write_file" in request.tools and "new_answer" in request.tools and not wrote:
            return Reply(tool_calls=[("write_file", {"path": "billing.py", "content": content})])
        return protocol_agent(request)

    return handler


@contextmanager
def forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ForgeStandIn, Path, str]]:
    """The remote, the GitHub stand-in over it, and the team file's `repositories:` section."""
    remote = demo_remote(tmp_path / "forge")
    monkeypatch.setenv(TOKEN_ENV, "t0ken")
    with ForgeStandIn({DEMO_PROJECT: remote}, token="t0ken") as stand_in:
        section = (
            "repositories:\n"
            f"  - {{name: demo, url: 'file://{remote}', api_url: '{stand_in.url}', "
            f"project: {DEMO_PROJECT}, credentials: {{token_env: {TOKEN_ENV}}}}}\n"
        )
        yield stand_in, remote, section


def _requests(bot: BotHarness) -> list[str]:
    """Approval request ids posted so far, oldest first."""
    found: list[str] = []
    for call in bot.posts():
        for block in call.params.get("blocks") or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("action_id") == ids.APPROVE_ONCE and element["value"] not in found:
                    found.append(str(element["value"]))
    return found


def _commits(remote: Path, branch: str) -> list[str]:
    done = subprocess.run(
        ["git", "--git-dir", str(remote), "rev-list", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.split() if done.returncode == 0 else []


async def _finished(bot: BotHarness, run_id: str) -> RunFinished:
    terminal = (await bot.services.run_store.events(run_id))[-1]
    assert isinstance(terminal, RunFinished), terminal
    return terminal


async def test_a_run_on_a_repository_ends_in_one_pull_request_and_a_follow_up_adds_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with forge(tmp_path, monkeypatch) as (stand_in, remote, section):
        async with bot_harness(
            tmp_path,
            handler=edits(FIXED),
            agents=2,
            tools="real",
            team_extra=section,
            state_dir=tmp_path / "s",
        ) as bot:
            await bot.command("--repo demo fix the off-by-one in total")
            await bot.wait_for(lambda: len(_requests(bot)) == 1, 30)
            ask = next(c for c in bot.posts() if _requests(bot)[0] in str(c.params.get("blocks")))
            assert "demo" in str(ask.params["blocks"]), "the approver sees the repository"
            assert stand_in.state.requests == [], "nothing is pushed before the click"
            await bot.click(ids.APPROVE_ONCE, _requests(bot)[0], user=APPROVER)
            await bot.settle(30)

            first = (await bot.services.runs.history.recent())[0]
            made = (await _finished(bot, first.run_id)).pull_request
            assert made is not None
            assert made.created
            [opened] = stand_in.state.requests
            assert opened.head == branch_for(first.run_id)
            assert "-    return sum(prices) + 1  # off by one" in stand_in.diff(opened)
            assert "+    return sum(prices)" in stand_in.diff(opened)
            assert len(_commits(remote, opened.head)) == 2  # the base and the run's one commit
            link = f"<{made.url}|"
            assert any(link in str(c.params.get("blocks")) for c in bot.posts()), "the thread links it"
            root_updates = [
                c for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == first.root_ts
            ]
            assert link in str(root_updates[-1].params["blocks"]), "the status message links it"

            bot.provider.handler = edits(COMMENTED)
            assert await bot.mention("document total()", thread_ts=first.thread_ts) == 200
            await bot.wait_for(lambda: len(_requests(bot)) == 2, 30)
            await bot.click(ids.APPROVE_ONCE, _requests(bot)[1], user=APPROVER)
            await bot.settle(30)

            follow_up = (await bot.services.runs.history.recent())[0]
            assert follow_up.run_id != first.run_id
            again = (await _finished(bot, follow_up.run_id)).pull_request
            assert again is not None
            assert not again.created
            assert again.branch == opened.head
            assert len(stand_in.state.requests) == 1, "the same pull request, not a second one"
            assert len(_commits(remote, opened.head)) == 3
            assert '"""The sum of the prices."""' in stand_in.diff(opened)


async def test_a_denied_publish_pushes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with forge(tmp_path, monkeypatch) as (stand_in, remote, section):
        async with bot_harness(
            tmp_path,
            handler=edits(FIXED),
            agents=2,
            tools="real",
            team_extra=section,
            state_dir=tmp_path / "s",
        ) as bot:
            await bot.command("--repo demo fix the off-by-one in total")
            await bot.wait_for(lambda: len(_requests(bot)) == 1, 30)
            await bot.click(ids.DENY, _requests(bot)[0], user=APPROVER)
            await bot.settle(30)
            run = (await bot.services.runs.history.recent())[0]
            assert (await _finished(bot, run.run_id)).pull_request is None
            assert stand_in.state.requests == []
            assert _commits(remote, branch_for(run.run_id)) == []


async def test_a_repository_that_cannot_be_fetched_fails_the_run_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = f"repositories:\n  - {{name: gone, url: 'file://{tmp_path / 'nowhere.git'}', forge: none}}\n"
    async with bot_harness(
        tmp_path, agents=1, tools="real", team_extra=section, state_dir=tmp_path / "s"
    ) as bot:
        await bot.command("--repo gone fix it")
        await bot.settle(30)
        shown = [str(c.params.get("blocks")) for c in bot.slack.calls_to("chat.update", ok=True)]
        assert any("Failed" in b and "could not start (git fetch failed" in b for b in shown), shown
        assert bot.provider.requests == [], "no agent ran on a repository that is not there"


async def test_a_run_parked_on_its_publish_resumes_after_a_restart_from_the_base_it_started_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binding is stored: the next process publishes from the same base commit, even though the
    default branch moved on meanwhile."""
    with forge(tmp_path, monkeypatch) as (stand_in, remote, section):
        state, db = tmp_path / "s", f"sqlite:///{tmp_path / 'bot.db'}"
        async with SlackEmulator(bot_token=TOKEN, allowed_mentions={APPROVER, REQUESTER}) as slack:
            options: dict[str, Any] = {
                "handler": edits(FIXED), "agents": 2, "tools": "real", "team_extra": section,
                "state_dir": state, "database_url": db, "slack": slack, "grace": 0.5,
            }  # fmt: skip
            async with bot_harness(tmp_path, **options) as bot:
                await bot.command("--repo demo fix the off-by-one in total")
                await bot.wait_for(lambda: len(_requests(bot)) == 1, 30)
                run = (await bot.services.runs.history.recent())[0]
                base = _commits(remote, "main")[0]
            _push_to_main(tmp_path, remote)  # the default branch moves while the run waits
            async with bot_harness(tmp_path, **options) as bot:
                await bot.click(ids.APPROVE_ONCE, _requests(bot)[0], user=APPROVER)
                await bot.settle(30)
                made = (await _finished(bot, run.run_id)).pull_request
            assert made is not None
            [opened] = stand_in.state.requests
            commits = _commits(remote, opened.head)
            assert commits[1] == base, "published on the base the agents worked from"
            assert len(commits) == 2


def _push_to_main(tmp_path: Path, remote: Path) -> None:
    clone = tmp_path / "other-clone"
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    ident = ["-c", "user.name=someone", "-c", "user.email=s@local"]
    for args in (
        ["clone", "-q", str(remote), str(clone)],
        ["-C", str(clone), *ident, "commit", "-q", "--allow-empty", "-m", "meanwhile"],
        ["-C", str(clone), "push", "-q", "origin", "main"],
    ):
        subprocess.run(["git", *args], env=env, check=True, capture_output=True)
