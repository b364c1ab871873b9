"""The page's own routes: its files, its guards against other sites, modals, the Home tab, mentions."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.playground import APPROVER, BYSTANDER, CHANNEL, REQUESTER, Playground
from bot.render import ids
from tests.bot.playground.harness import dangerous_agent, playground, ui_post


def _approval(pg: Playground) -> dict[str, Any] | None:
    for msg in pg.slack.messages.get(CHANNEL, {}).values():
        for block in msg.get("blocks") or []:
            for element in block.get("elements") or []:
                if element.get("action_id") == ids.DENY:
                    return {"message_ts": msg["ts"], "block_id": block["block_id"], "value": element["value"]}
    return None


async def test_the_page_and_its_files_are_served_with_a_strict_policy(tmp_path: Path) -> None:
    async with playground(tmp_path) as pg, aiohttp.ClientSession() as session:
        async with session.get(pg.url + "/") as r:
            assert r.status == 200
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert '<script src="/static/app.js">' in await r.text()
        for name in ("app.js", "blocks.js", "style.css"):
            async with session.get(f"{pg.url}/static/{name}") as r:
                assert r.status == 200
        async with session.get(pg.url + "/static/../run.py") as r:
            assert r.status == 404
        async with session.get(pg.url + "/ui/state", params={"user": BYSTANDER.id}) as r:
            state = await r.json()
        assert state["me"]["role"] == "someone else"
        assert [p["role"] for p in state["people"]] == ["requester", "approver", "someone else"]


@pytest.mark.parametrize(
    ("headers", "as_json", "problem"),
    [
        ({"Host": "evil.example:8080"}, True, "wrong Host"),
        ({"Origin": "http://evil.example"}, True, "cross-origin request"),
        ({}, False, "actions must be JSON"),
    ],
)
async def test_another_site_cannot_act_as_anyone(
    tmp_path: Path, headers: dict[str, str], as_json: bool, problem: str
) -> None:
    async with playground(tmp_path) as pg, aiohttp.ClientSession() as session:
        body = {"user": APPROVER.id, "text": "/massgen help"}
        kwargs: dict[str, Any] = {"json": body} if as_json else {"data": body}
        async with session.post(pg.url + "/ui/send", headers=headers, **kwargs) as r:
            assert (r.status, (await r.json())["error"]) == (403, problem)
        assert pg.slack.hooks == {}, "the workspace acted on a refused request"  # each command makes one


async def test_bad_requests_are_refused_without_reaching_the_bot(tmp_path: Path) -> None:
    async with playground(tmp_path) as pg:
        assert (await ui_post(pg, "/ui/send", {"user": "U0NOBODY", "text": "hi"}))[0] == 400
        status, answer = await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": "/deploy now"})
        assert status == 200
        assert "not a valid command" in answer["problem"]
        click = {"user": REQUESTER.id, "action_id": ids.DENY, "value": "x", "message_ts": "1.2"}
        assert (await ui_post(pg, "/ui/click", click))[0] == 400
        submit = {"user": REQUESTER.id, "view_id": "V404", "values": {}}
        assert (await ui_post(pg, "/ui/submit", submit))[0] == 400
        assert pg.slack.hooks == {}  # the workspace made no request of the bot (each one makes a hook)


async def test_a_mention_starts_a_run_and_help_is_only_for_the_asker(tmp_path: Path) -> None:
    async with playground(tmp_path) as pg:
        await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen help"})
        await pg.slack.wait_for(lambda: bool(pg.workspace.state(REQUESTER.id)["ephemerals"]), 10)
        assert pg.workspace.state(BYSTANDER.id)["ephemerals"] == []
        status, answer = await ui_post(
            pg, "/ui/send", {"user": BYSTANDER.id, "text": "@massgen say hi & <bye>"}
        )
        assert (status, answer["ok"]) == (200, True)
        said = pg.workspace.state(BYSTANDER.id)["messages"][0]
        assert said["text"] == "<@U0BOT> say hi &amp; &lt;bye&gt;"  # what Slack would store
        await pg.slack.wait_for(lambda: "Final answer" in str(pg.slack.messages), 30)


async def test_deny_opens_a_modal_for_the_approver_only_and_its_reason_is_submitted(tmp_path: Path) -> None:
    async with playground(tmp_path, handler=dangerous_agent()) as pg:
        await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen tidy the cluster"})
        await pg.slack.wait_for(lambda: _approval(pg) is not None, 30)
        ask = _approval(pg)
        assert ask is not None
        await ui_post(pg, "/ui/click", {"user": APPROVER.id, "action_id": ids.DENY, **ask})
        await pg.slack.wait_for(
            lambda: (pg.workspace.state(APPROVER.id)["modal"] or {}).get("callback_id") == ids.DENY_MODAL, 10
        )
        assert pg.workspace.state(REQUESTER.id)["modal"] is None
        view = pg.workspace.state(APPROVER.id)["modal"]
        values = {
            ids.DENY_REASON_BLOCK: {ids.DENY_REASON_INPUT: {"type": "plain_text_input", "value": "not today"}}
        }
        status, answer = await ui_post(
            pg, "/ui/submit", {"user": APPROVER.id, "view_id": view["id"], "values": values}
        )
        assert (status, answer["ok"]) == (200, True)
        assert pg.workspace.state(APPROVER.id)["modal"] is None
        await pg.slack.wait_for(lambda: "not today" in str(pg.slack.messages), 10)


async def test_details_modal_closes_and_the_home_tab_opens(tmp_path: Path) -> None:
    async with playground(tmp_path, handler=dangerous_agent()) as pg:
        await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen tidy the cluster"})
        await pg.slack.wait_for(lambda: _approval(pg) is not None, 30)
        ask = _approval(pg)
        assert ask is not None
        await ui_post(pg, "/ui/click", {"user": BYSTANDER.id, "action_id": ids.DETAILS, **ask})
        await pg.slack.wait_for(lambda: pg.workspace.state(BYSTANDER.id)["modal"] is not None, 10)
        view = pg.workspace.state(BYSTANDER.id)["modal"]
        assert (await ui_post(pg, "/ui/close", {"user": BYSTANDER.id, "view_id": view["id"]}))[0] == 200
        assert pg.workspace.state(BYSTANDER.id)["modal"] is None
        await ui_post(pg, "/ui/home", {"user": APPROVER.id})
        await pg.slack.wait_for(lambda: pg.workspace.state(APPROVER.id)["home"] is not None, 10)
        home = pg.workspace.state(APPROVER.id)["home"]
        assert "curl" in str(home["blocks"])  # the approver's Home lists what waits for them
        await ui_post(
            pg,
            "/ui/click",
            {
                "user": APPROVER.id,
                "action_id": ids.DENY,
                **{k: ask[k] for k in ("block_id", "value")},
                "view_id": home["id"],
            },
        )
        await pg.slack.wait_for(lambda: _approval(pg) is None, 10)


async def test_a_closed_tab_ends_its_event_stream_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bot.playground.page")
    async with playground(tmp_path) as pg:
        session = aiohttp.ClientSession()
        response = await session.get(pg.url + "/ui/events")
        assert (await response.content.readline()).startswith(b"event: change")
        response.close()  # the tab closes: the connection goes, the server's stream is still open
        await session.close()
        await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen help"})  # a change to send

        def ended() -> bool:
            return any("closed its event stream" in r.getMessage() for r in caplog.records)

        await pg.slack.wait_for(ended, 10)
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
    said = [r for r in caplog.records if r.name == "bot.playground.page"]
    assert [(r.levelno, r.getMessage()) for r in said] == [
        (logging.DEBUG, "playground: a page closed its event stream")
    ]  # a closed tab is ordinary: one debug line, no more


@pytest.mark.parametrize(
    ("text", "answer"),
    [("@massgen status", "No runs are active"), ("@massgen status run-0000beef", "No run with id")],
)
async def test_a_mention_of_status_answers_it_and_starts_no_run(
    tmp_path: Path, text: str, answer: str
) -> None:
    async with playground(tmp_path) as pg:
        status, sent = await ui_post(pg, "/ui/send", {"user": REQUESTER.id, "text": text})
        assert (status, sent["ok"]) == (200, True)
        await pg.slack.wait_for(lambda: answer in str(pg.workspace.state(REQUESTER.id)), 20)
        assert "*Task:*" not in str(pg.slack.messages)  # no run status message
