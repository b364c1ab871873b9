"""View diff through Bolt and the emulator: the exact patch apply-back binds; a forged click shows nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bot.approval_ui.diff import sha256
from bot.render import ids
from tests.bot.harness import APPROVER, INTRUDER, BotHarness, bot_harness
from tests.bot.runs.test_scenarios_apply import _approve_button
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply

_FENCED = re.compile(r"```\n(.*)\n```", re.S)
CONTENT = "<script>alert(1)</script> & friends\n"


def writes_markup(request: ProviderRequest) -> Reply:
    wrote = any(m.role == "assistant" and m.tool_calls for m in request.messages)
    if "write_file" in request.tools and "new_answer" in request.tools and not wrote:
        return Reply(tool_calls=[("write_file", {"path": "page.html", "content": CONTENT})])
    return protocol_agent(request)


def _diff_views(bot: BotHarness) -> list[dict[str, Any]]:
    """Every modal filled in after a click (a refusal is a notice modal, the diff its own)."""
    return [c.params["view"] for c in bot.slack.calls_to("views.update", ok=True)]


def _unescape(shown: str) -> str:
    return shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


async def test_apply_backs_view_diff_shows_the_exact_patch_it_binds(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    source.mkdir()
    (source / "README.md").write_text("demo\n")
    extra = f"workspace: {{source: '{source}', apply: ask}}\n"
    async with bot_harness(
        tmp_path, handler=writes_markup, agents=1, tools="real", team_extra=extra, state_dir=tmp_path / "s"
    ) as bot:
        await bot.command("add a page")
        await bot.wait_for(lambda: any(_approve_button(c.params.get("blocks")) for c in bot.posts()), 30)
        ask = next(c for c in bot.posts() if _approve_button(c.params.get("blocks")))
        request_id = _approve_button(ask.params["blocks"])
        assert request_id is not None
        assert f'"action_id": "{ids.VIEW_DIFF}"' in json.dumps(ask.params["blocks"])
        request = await bot.services.approvals.get(request_id)
        assert request is not None
        patch = request.context["diff"]
        assert request.context["diff_sha256"] == sha256(patch)

        await bot.click(ids.VIEW_DIFF, request_id, user=INTRUDER, channel="C0ELSEWHERE")  # forged
        await bot.wait_for(lambda: bool(_diff_views(bot)))
        refused = json.dumps(_diff_views(bot))
        assert "page.html" not in refused
        assert "That approval request no longer exists." in refused

        await bot.click(ids.VIEW_DIFF, request_id, user=APPROVER)
        await bot.wait_for(lambda: len(_diff_views(bot)) == 2)
        view = _diff_views(bot)[-1]
        assert view["callback_id"] == ids.DIFF_MODAL
        texts = [b["text"]["text"] for b in view["blocks"] if b["type"] == "section"]
        shown = "".join(m.group(1) for t in texts if (m := _FENCED.fullmatch(t)))
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; friends" in shown
        assert "<script>" not in json.dumps(view)
        assert _unescape(shown) == patch
        assert sha256(patch) in json.dumps(view)
        await bot.click(ids.DENY, request_id, user=APPROVER)
        await bot.settle(30)
        assert not (source / "page.html").exists()
