"""The page renders what the bot sends: every Block Kit block it may use, safely, plus modals and Home.

Messages are posted through the real `AsyncWebClient` into the playground's emulator (so they pass
Slack's checks first), then read in Chromium. Text that looks like HTML is shown, never run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Route, expect
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import APPROVER, BYSTANDER, CHANNEL, REQUESTER, Playground
from bot.render import ids
from tests.bot.playground.conftest import WAIT_MS, needs_chromium
from tests.bot.playground.harness import dangerous_agent, playground, ui_post

pytestmark = needs_chromium

HOSTILE = '<img src=x onerror="window.pwned=1"> & <script>window.pwned=2</script>'

BLOCKS: list[dict[str, Any]] = [
    {"type": "header", "text": {"type": "plain_text", "text": "Deploy report"}},
    {
        "type": "section",
        "block_id": "s1",
        "text": {
            "type": "mrkdwn",
            "text": "*bold* _it_ ~gone~ `code` <https://example.com|a link> <@U0APPROVER>",
        },
        "fields": [{"type": "mrkdwn", "text": "*Risk*\nhigh"}, {"type": "plain_text", "text": HOSTILE}],
        "accessory": {"type": "button", "action_id": "acc", "text": {"type": "plain_text", "text": "Look"}},
    },
    {"type": "divider"},
    {"type": "context", "elements": [{"type": "mrkdwn", "text": "ctx <!date^1800000000^{date}|fallback>"}]},
    {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_section",
                "elements": [
                    {"type": "text", "text": "plain "},
                    {"type": "text", "text": "strong", "style": {"bold": True}},
                ],
            },
            {
                "type": "rich_text_list",
                "style": "bullet",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": "first item"}]}
                ],
            },
            {"type": "rich_text_quote", "elements": [{"type": "text", "text": "quoted words"}]},
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "rm -rf build"}]},
        ],
    },
    {
        "type": "actions",
        "block_id": "a1",
        "elements": [
            {
                "type": "button",
                "action_id": "danger_btn",
                "style": "danger",
                "text": {"type": "plain_text", "text": "Drop it"},
                "confirm": {
                    "title": {"type": "plain_text", "text": "Really drop?"},
                    "text": {"type": "mrkdwn", "text": "This *cannot* be undone."},
                    "confirm": {"type": "plain_text", "text": "Drop"},
                    "deny": {"type": "plain_text", "text": "Keep"},
                },
            }
        ],
    },
]


async def test_every_block_renders_and_agent_text_is_never_markup(tmp_path: Path, browser: Browser) -> None:
    async with playground(tmp_path) as pg:
        client = AsyncWebClient(token=pg.slack.bot_token, base_url=pg.slack.api_url)
        await client.chat_postMessage(channel=CHANNEL, text="Deploy report", blocks=BLOCKS)
        await client.chat_postMessage(
            channel=CHANNEL, text=f"plain *text* with {HOSTILE.replace('<', '&lt;')}"
        )
        page = await (await browser.new_context(viewport={"width": 390, "height": 844})).new_page()
        page.set_default_timeout(WAIT_MS)
        await page.goto(f"{pg.url}/?user={APPROVER.id}")
        messages = page.locator("#messages")
        await expect(messages.locator("h3", has_text="Deploy report")).to_be_visible()
        for selector, text in [
            ("b", "bold"),
            ("i", "it"),
            ("s", "gone"),
            ("code", "code"),
            ("a", "a link"),
            (".mention.me", "@avery"),
            (".fields", "high"),
            ("hr.divider", ""),
            (".context", "ctx"),
            (".rich b", "strong"),
            (".rich ul li", "first item"),
            (".rich blockquote", "quoted words"),
            (".rich pre", "rm -rf build"),
            ("button.btn.danger", "Drop it"),
            (".section button", "Look"),
        ]:
            await expect(messages.locator(selector).filter(has_text=text).first).to_be_attached()
        assert await messages.locator("a").first.get_attribute("href") == "https://example.com"
        await expect(messages).to_contain_text('<img src=x onerror="window.pwned=1">')
        await expect(messages).to_contain_text("<script>window.pwned=2</script>")
        assert await messages.locator("img, script").count() == 0
        assert await page.evaluate("window.pwned === undefined")

        await messages.locator("button.btn.danger").click()
        await expect(page.locator("#confirm")).to_contain_text("Really drop?")
        await page.locator("#confirm-no").click()  # "Keep": nothing is sent
        await expect(page.locator("#confirm")).to_be_hidden()
        assert not [c for c in pg.slack.calls if c.method == "response_url"]


def _approval(pg: Playground) -> bool:
    return ids.DETAILS in str(pg.slack.messages.get(CHANNEL, {}))


async def test_a_modal_opens_for_its_user_and_the_home_tab_lists_what_waits(
    tmp_path: Path, browser: Browser
) -> None:
    async with playground(tmp_path, handler=dangerous_agent()) as pg:
        await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen tidy the cluster"})
        await pg.slack.wait_for(lambda: _approval(pg), 30)
        page = await (await browser.new_context(viewport={"width": 390, "height": 844})).new_page()
        page.set_default_timeout(WAIT_MS)
        await page.goto(f"{pg.url}/?user={BYSTANDER.id}")
        await page.locator(f'#messages button[data-action-id="{ids.DETAILS}"]').click()
        modal = page.locator("#modal")
        await expect(modal).to_be_visible()
        await expect(modal).to_contain_text("curl -fsSL")
        await page.locator("#modal-close").click()
        await expect(modal).to_be_hidden()

        await page.select_option("#who", APPROVER.id)
        await page.locator("#tab-home").click()
        await expect(page.locator("#home-view")).to_contain_text("curl -fsSL")
        await expect(page.locator("#home-view")).to_contain_text("#playground")  # a channel by its name
        await expect(page.locator("#composer")).to_be_hidden()


async def test_switching_people_while_a_refresh_is_under_way_keeps_the_one_chosen(
    tmp_path: Path, browser: Browser
) -> None:
    async with playground(tmp_path) as pg:
        page = await (await browser.new_context()).new_page()
        page.set_default_timeout(WAIT_MS)
        await page.goto(f"{pg.url}/?user={BYSTANDER.id}")
        await expect(page.locator("#role")).to_contain_text(f"You are {BYSTANDER.name}")
        asked = asyncio.Event()
        answer = asyncio.Event()

        async def hold(route: Route) -> None:  # the bystander's state comes back after the switch
            if BYSTANDER.id in route.request.url and not answer.is_set():
                asked.set()
                await answer.wait()
            await route.continue_()

        await page.route("**/ui/state*", hold)
        await page.evaluate("() => { refresh(); }")  # as a change in the channel makes it
        await asyncio.wait_for(asked.wait(), 10)
        await page.select_option("#who", APPROVER.id)
        answer.set()
        await expect(page.locator("#role")).to_contain_text(f"You are {APPROVER.name}")
        await page.wait_for_timeout(500)  # any late render of the old state would have landed
        assert await page.locator("#who").input_value() == APPROVER.id
        await expect(page.locator("#role")).to_contain_text(f"You are {APPROVER.name}")
