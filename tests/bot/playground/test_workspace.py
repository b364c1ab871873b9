"""The playground over HTTP as the page uses it: a run from the composer, approvals, the guards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.playground import APPROVER, BYSTANDER, CHANNEL, REQUESTER, Playground
from bot.render import ids
from tests.bot.playground.harness import DANGEROUS, dangerous_agent, playground, ui_post


def _approval(pg: Playground) -> dict[str, Any] | None:
    for msg in pg.slack.messages.get(CHANNEL, {}).values():
        for block in msg.get("blocks") or []:
            for element in block.get("elements") or []:
                if element.get("action_id") == ids.APPROVE_ONCE:
                    return {
                        "ts": msg["ts"],
                        "block_id": block["block_id"],
                        "value": element["value"],
                        "msg": msg,
                    }
    return None


def _final(pg: Playground) -> bool:
    return any(
        "final answer" in (str(m.get("text")) + str(m.get("blocks"))).lower()
        for m in pg.slack.messages.get(CHANNEL, {}).values()
    )


async def test_a_run_from_the_composer_asks_and_only_the_approver_may_approve(tmp_path: Path) -> None:
    async with playground(tmp_path, handler=dangerous_agent()) as pg:
        status, answer = await ui_post(
            pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen tidy the cluster"}
        )
        assert (status, answer["ok"]) == (200, True)
        await pg.slack.wait_for(lambda: _approval(pg) is not None, 30)
        ask = _approval(pg)
        assert ask is not None
        assert DANGEROUS in str(ask["msg"]["blocks"])
        click = {
            "action_id": ids.APPROVE_ONCE,
            "block_id": ask["block_id"],
            "value": ask["value"],
            "message_ts": ask["ts"],
        }
        for intruder in (REQUESTER, BYSTANDER):
            status, _ = await ui_post(pg, "/ui/click", {"user": intruder.id, **click})
            assert status == 200
            await pg.slack.wait_for(lambda u=intruder.id: bool(pg.workspace.state(u)["ephemerals"]), 10)  # type: ignore[misc]
            shown = pg.workspace.state(intruder.id)["ephemerals"]
            assert "not authorised" in str(shown).lower()
        assert _approval(pg) is not None, "a refused click must leave the buttons"
        await ui_post(pg, "/ui/click", {"user": APPROVER.id, **click})
        await pg.slack.wait_for(lambda: _final(pg), 60)
        assert pg.workspace.state(APPROVER.id)["ephemerals"] == [] or all(
            "not authorised" not in str(e).lower() for e in pg.workspace.state(APPROVER.id)["ephemerals"]
        )
        assert pg.slack.violations == []
