"""The guided first run: the suggested tasks on the sample repository, the model line, the time per run."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
from playwright.async_api import Browser, expect

from bot.playground import APPROVER, CHANNEL, REQUESTER, SUGGESTIONS, Guide, Playground, playground_team
from bot.playground.forge import demo_remote
from bot.playground.guide import FIRST_LOCAL_RUN, team_line, timing_line
from bot.render import ids
from orchestrator import local_team
from tests.bot.playground.conftest import WAIT_MS, needs_chromium
from tests.bot.playground.harness import playground, ui_post
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import Handler, ProviderRequest, Reply


async def _guide(pg: Playground) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(pg.url + "/ui/state") as r:
        assert r.status == 200
        guide: dict[str, Any] = (await r.json())["guide"]
        return guide


async def _timing_once_stored(pg: Playground) -> str:
    """The time line once the run's end is in the store (stored around its last posts, not before them)."""
    deadline = time.monotonic() + 30
    while (timing := (await _guide(pg))["timing"]) == "" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return str(timing)


def test_the_model_line_names_each_model_and_where_it_runs(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "agents:\n  - {id: a, backend: {type: local}}\n  - {id: b, backend: {type: local}}\n"
        "  - {id: c, backend: {type: openai, model: gpt-4o}}\n"
    )
    pick = playground_team({}, team)
    assert team_line(pick.team) == "3 agents: SmolLM2-135M-Instruct (local, llama.cpp), gpt-4o (openai)"


def test_the_time_per_run_is_measured_and_only_the_local_team_gets_a_first_run_hint() -> None:
    assert timing_line([], local=True) == FIRST_LOCAL_RUN
    assert timing_line([], local=False) == ""
    assert timing_line([4.2, 30.0, 7.6], local=True) == "a run took about 8 s here"  # the median
    assert timing_line([0.2], local=False) == "a run took about 1 s here"


async def test_only_an_all_local_team_gets_the_first_run_hint(tmp_path: Path) -> None:
    local = await Guide(team=local_team()).state()
    assert (local["team"], local["timing"]) == (
        "3 agents: SmolLM2-135M-Instruct (local, llama.cpp)",
        FIRST_LOCAL_RUN,
    )
    team = tmp_path / "team.yaml"
    team.write_text(
        "agents:\n  - {id: a, backend: {type: local}}\n  - {id: c, backend: {type: claude, model: x}}\n"
    )
    assert (await Guide(team=playground_team({}, team).team).state())["timing"] == ""


def test_the_suggestions_name_files_the_sample_repository_has(tmp_path: Path) -> None:
    remote = demo_remote(tmp_path)
    listed = subprocess.run(
        ["git", f"--git-dir={remote}", "ls-tree", "--name-only", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    named = {name for s in SUGGESTIONS for name in re.findall(r"[\w.]+\.py", s.text)}
    assert named == {"billing.py", "test_billing.py"}
    assert named <= set(listed)
    assert all(s.text.startswith("/massgen --repo demo ") for s in SUGGESTIONS)


async def test_the_page_serves_the_suggestions_the_team_and_then_the_measured_time(tmp_path: Path) -> None:
    async with playground(tmp_path) as pg:
        guide = await _guide(pg)
        assert [s["text"] for s in guide["suggestions"]] == [s.text for s in SUGGESTIONS]
        assert len(guide["suggestions"]) == 3
        assert guide["team"] == "2 agents: gpt-test (openai), claude-test (claude)"
        assert guide["timing"] == ""  # not the local model, and nothing measured yet
        status, answer = await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": SUGGESTIONS[0].text})
        assert (status, answer["ok"]) == (200, True)
        await pg.slack.wait_for(lambda: "Final answer" in str(pg.slack.messages.get(CHANNEL)), 60)
        assert re.fullmatch(r"a run took about \d+ s here", await _timing_once_stored(pg))


def _fixes_billing() -> Handler:
    """The scripted provider: each agent writes the fixed `billing.py` once, then follows the protocol."""

    def handler(request: ProviderRequest) -> Reply:
        wrote = any(m.role == "assistant" and m.tool_calls for m in request.messages)
        if "write_file" in request.tools and "new_answer" in request.tools and not wrote:
            fixed = "def total(prices):\n    return sum(prices)\n"
            return Reply(tool_calls=[("write_file", {"path": "billing.py", "content": fixed})])
        return protocol_agent(request)

    return handler


async def test_the_push_suggestion_reaches_an_approval_card(tmp_path: Path) -> None:
    """On the sample repository the winner's edit is pushed behind one approval: the card avery decides."""
    async with playground(tmp_path, handler=_fixes_billing()) as pg:
        await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": SUGGESTIONS[2].text})

        def card() -> bool:
            shown = str(pg.slack.messages.get(CHANNEL))
            return ids.APPROVE_ONCE in shown and "publish_pull_request demo:" in shown

        await pg.slack.wait_for(card, 60)
        assert f"<@{APPROVER.id}>" in str(pg.slack.messages.get(CHANNEL))  # the card names who decides


@needs_chromium
async def test_clicking_the_first_suggestion_starts_a_run_on_the_page(
    tmp_path: Path, browser: Browser
) -> None:
    async with playground(tmp_path) as pg:
        page = await browser.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{pg.url}/?user={REQUESTER.id}")
        await expect(page.locator(".guide")).to_contain_text("2 agents: gpt-test (openai)")
        buttons = page.locator("#suggestions button")
        await expect(buttons).to_have_count(3)
        await buttons.first.click()
        status = page.locator(".msg", has_text="Task:").first  # the run's status message
        await expect(status).to_contain_text("What does billing.py do?")
        await expect(page.locator("#text")).to_have_value("")  # sent, as a typed task is
        await expect(status).to_contain_text("Finished")
        await expect(page.locator(".guide")).to_contain_text("a run took about")
        await page.close()
        assert errors == []
        assert pg.slack.violations == []
