"""The playground in a real browser: Debian's Chromium driven by Playwright, at a desktop and a phone size.

The requester types `/massgen ...` in the composer; the scripted provider makes an agent pipe a
download into a shell; the approval message appears in the run's thread. The requester and a third
user press Approve and are refused (visibly, "only visible to you"); the approver approves; the run
ends with its final answer on the page. Screenshots go to `$MASSGEN_SCREENSHOTS` (`make screenshots`
writes the README's) or the test's tmp dir.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from bot.playground import APPROVER, BYSTANDER, REQUESTER, Person
from bot.render import ids
from tests.bot.playground.conftest import WAIT_MS, needs_chromium
from tests.bot.playground.harness import DANGEROUS, dangerous_agent, playground

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}

pytestmark = needs_chromium


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("MASSGEN_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def _act_as(page: Page, person: Person) -> None:
    await page.select_option("#who", person.id)
    await expect(page.locator("#role")).to_contain_text(f"You are {person.name}")


async def _press_approve(page: Page) -> None:
    """Approve once, through its confirm dialog (high risk asks "are you sure?")."""
    await page.locator(f'button[data-action-id="{ids.APPROVE_ONCE}"]').click()
    await expect(page.locator("#confirm")).to_be_visible()
    await page.locator("#confirm-yes").click()


@pytest.mark.parametrize("size", list(VIEWPORTS))
async def test_only_the_approver_can_approve_from_the_page(
    tmp_path: Path, browser: Browser, size: str
) -> None:
    width, height = VIEWPORTS[size]
    shots = _shots(tmp_path)
    async with playground(tmp_path, handler=dangerous_agent()) as pg:
        context = await browser.new_context(viewport={"width": width, "height": height})
        page = await context.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{pg.url}/?user={REQUESTER.id}")
        await page.locator("#text").fill("/massgen tidy up the staging cluster")
        await page.locator("#text").press("Enter")

        approve = page.locator(f'button[data-action-id="{ids.APPROVE_ONCE}"]')
        await expect(approve).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator("#messages")).to_contain_text(DANGEROUS)

        refusals = page.locator(".ephemeral", has_text="not authorised")
        for person in (REQUESTER, BYSTANDER):
            await _act_as(page, person)
            await _press_approve(page)
            await expect(refusals).to_have_count(1)
            await expect(refusals.first).to_contain_text("Only visible to you")
            await expect(approve).to_be_visible()  # a refused click changes nothing
        await page.screenshot(path=str(shots / f"playground-{size}-refused.png"))

        await _act_as(page, APPROVER)
        await expect(refusals).to_have_count(0)  # the others' refusals were theirs alone
        await page.screenshot(path=str(shots / f"playground-{size}-approval.png"))
        await _press_approve(page)
        await expect(approve).to_have_count(0, timeout=WAIT_MS)
        await expect(page.locator("#messages")).to_contain_text("Approved")
        await expect(page.locator("#messages .blk.header", has_text="Final answer")).to_be_visible(
            timeout=WAIT_MS
        )
        status = page.locator(".msg", has_text="Task:").first  # the run's status message, edited in place
        await expect(status).to_contain_text("Finished", timeout=WAIT_MS)
        await page.mouse.move(0, 0)
        await page.screenshot(path=str(shots / f"playground-{size}-final.png"))
        await context.close()
        assert errors == []
        assert pg.slack.violations == []
