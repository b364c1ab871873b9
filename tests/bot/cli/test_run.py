"""`massgen-bot run` as a user runs it: a real process against the loopback provider server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from approvals import make_engine
from bot.cli.run import exit_code
from orchestrator import SqlRunStore
from orchestrator.events import RunCancelled, RunFailed, RunFinished, ToolDecided, from_json
from orchestrator.testing import ended
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

ROOT = Path(__file__).resolve().parents[3]


def team_file(tmp_path: Path, server: ProviderServer, extra: str = "", *, both_sdks: bool = True) -> Path:
    """Two agents; `both_sdks=False` keeps both on the OpenAI SDK (no Anthropic import: faster start)."""
    path = tmp_path / "team.yaml"
    openai = f"{{type: openai, model: gpt-4o-mini, base_url: '{server.openai_base_url}', api_key: k}}"
    claude = f"{{type: claude, model: claude-haiku-4-5, base_url: '{server.anthropic_base_url}', api_key: k}}"
    if not both_sdks:
        claude = (
            f"{{type: chatcompletion, model: slow-model, base_url: '{server.openai_base_url}', api_key: k}}"
        )
    path.write_text(
        f"agents:\n  - id: alpha\n    backend: {openai}\n  - id: beta\n    backend: {claude}\n{extra}"
    )
    return path


async def massgen_bot(
    *args: str,
    wait_requests: int = 0,
    server: ProviderServer | None = None,
    interrupt: bool = False,
    stdin: str | None = None,
    cwd: Path = ROOT,
) -> tuple[int, str, str]:
    """`massgen-bot run ARGS` in a fresh process (stdin: `stdin`, else nothing): exit code, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if k != "MASSGEN_TEAM"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", *args,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env,
    )  # fmt: skip
    if interrupt:
        assert server is not None
        await server.wait_for(requests=wait_requests, timeout=20)
        process.send_signal(signal.SIGINT)
    given = None if stdin is None else stdin.encode()
    stdout, stderr = await asyncio.wait_for(process.communicate(given), timeout=60)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


def fetch_first(request: ProviderRequest) -> Reply:
    """Ask for a URL once (an `ask` under the human policy), then follow the protocol."""
    asked = any(m.role == "assistant" and m.tool_calls for m in request.messages)
    if "fetch_url" in request.tools and not asked:
        return Reply(tool_calls=[("fetch_url", {"url": "https://example.com/flaky"})])
    return protocol_agent(request)


async def test_json_run_without_terminal_denies_asks(tmp_path: Path) -> None:
    async with ProviderServer(fetch_first) as server:
        code, out, err = await massgen_bot(
            "--json", "--team", str(team_file(tmp_path, server)), "fix the flaky test"
        )
    assert code == 0, err
    events = [from_json(line) for line in out.splitlines()]  # nothing but JSON lines on stdout
    assert events[0].kind == "started"
    assert events[-1].kind == "finished"
    denied = [e for e in events if e.kind == "tool_approval_resolved"]
    assert len(denied) >= 2  # each agent asked once while coordinating (the winner may ask again)
    assert all(e.status == "denied" and e.reason == "no terminal to ask" for e in denied)
    decided = [e for e in events if isinstance(e, ToolDecided)]
    assert decided
    assert all(not e.executed for e in decided)
    # --json shows what each asked-for action came to, linked to its request.
    assert {(e.outcome, e.request_id) for e in decided} == {("denied", r.request_id) for r in denied}
    assert (tmp_path / "state" / "massgen.db").is_file()  # MASSGEN_STATE_DIR (conftest) holds the database


async def test_asks_are_answered_at_the_terminal(tmp_path: Path) -> None:
    """With a terminal on stdin, each ask is prompted (on stderr with --json) and `y` approves it once."""
    master, slave = os.openpty()
    async with ProviderServer(fetch_first) as server:
        team = team_file(tmp_path, server, both_sdks=False)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", "--json", "--team", str(team), "task",
            stdin=slave, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        os.close(slave)
        assert process.stderr is not None
        prompts, seen = 0, ""
        stdout_task = asyncio.ensure_future(process.stdout.read())  # type: ignore[union-attr]
        while chunk := await asyncio.wait_for(process.stderr.read(4096), timeout=60):
            seen += chunk.decode()
            while seen.count("Approve?") > prompts:
                prompts += 1
                os.write(master, b"y\n")
        out = (await stdout_task).decode()
        code = await process.wait()
    os.close(master)
    assert code == 0, seen
    assert prompts >= 2
    # Legible: the choices keep their brackets, and the request's id, layer and expiry are shown.
    assert "Approve? [y] yes, once · [r] yes, for this run · [n] no:" in seen
    assert "approval needed · " in seen
    assert "layer " in seen
    assert "expires in " in seen
    resolved = [json.loads(line) for line in out.splitlines() if '"tool_approval_resolved"' in line]
    assert len(resolved) == prompts
    assert {(e["status"], e["scope"]) for e in resolved} == {("approved", "once")}
    assert all(e["decided_by"].startswith("cli:") for e in resolved)


async def test_bad_team_file_exits_1_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "team.yaml"
    bad.write_text("agents:\n  - id: a\n    backend: {type: foo, model: m}\n")
    code, out, err = await massgen_bot("--team", str(bad), "task")
    assert code == 1
    assert out == ""
    assert f"{bad}:3: agents[0].backend.type: unknown backend 'foo'" in err


async def test_a_missing_key_is_a_config_error_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "agents:\n"
        "  - {id: a, backend: {type: groq, model: m}}\n"
        "  - {id: b, backend: {type: ollama, model: m}}\n"  # a local server needs no key
    )
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    code, out, err = await massgen_bot("--json", "--team", str(team), "task")
    assert (code, out) == (1, "")
    assert err.strip().splitlines() == [
        f"massgen-bot run: no API key: agent a needs GROQ_API_KEY; set it in the environment or .env, "
        f"or api_key in the team file {team}"
    ]
    assert not (tmp_path / "state").exists()  # refused before anything was opened


async def test_all_agents_failing_exits_2(tmp_path: Path) -> None:
    async with ProviderServer(lambda request: Reply(error=401)) as server:
        code, out, _ = await massgen_bot("--json", "--team", str(team_file(tmp_path, server)), "task")
    assert code == 2
    last = json.loads(out.splitlines()[-1])
    assert last["kind"] == "failed"
    assert set(last["reasons"]) == {"alpha", "beta"}


async def test_a_bad_database_url_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as closed:  # bound, never listening: the connection is refused
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://massgen:s3cret@127.0.0.1:{closed.getsockname()[1]}/massgen"
        async with ProviderServer() as server:
            team = team_file(tmp_path, server, both_sdks=False)
            code, out, err = await massgen_bot("--team", str(team), "--database-url", url, "task")
    assert (code, out) == (1, "")
    (line,) = [line for line in err.splitlines() if not line.startswith("warning: ")]  # no traceback
    assert line.startswith(f"massgen-bot run: cannot open the database {url.replace('s3cret', '***')}: ")
    assert "s3cret" not in err
    assert not server.requests


async def test_dotenv_stdin_task_and_plain_lines_without_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`.env` gives the key, the server and the database; the task comes from stdin; stdout is plain."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DATABASE_URL"):  # a variable set would win
        monkeypatch.delenv(name, raising=False)
    database = tmp_path / "from-dotenv.db"
    async with ProviderServer(fetch_first) as server:
        (tmp_path / ".env").write_text(
            f"OPENAI_API_KEY=k\nOPENAI_BASE_URL={server.openai_base_url}\nDATABASE_URL=sqlite:///{database}\n"
        )
        team = tmp_path / "team.yaml"  # no key and no URL in the file: both come from `.env`
        team.write_text("agents:\n  - {id: a, backend: {type: openai, model: gpt-4o-mini}}\n")
        code, out, err = await massgen_bot(
            "--team", str(team), "-", stdin="fix the flaky test\n", cwd=tmp_path
        )
    assert code == 0, err
    assert "fix the flaky test" in server.requests[0].messages[0].text
    run_id = err.split("run ", 1)[1].split()[0]
    assert f"massgen-bot audit --run {run_id}" in err
    engine = make_engine(f"sqlite:///{database}")
    summary = await SqlRunStore(engine).get(run_id)
    await engine.dispose()
    assert summary is not None
    assert summary.status == "finished"
    assert "\x1b" not in out  # no colours, no cursor moves: a file or a pipe gets plain lines
    lines = out.splitlines()
    assert "agent1 (a) answered: agent1.1" in lines
    # The ask was denied (nobody at a terminal): said when it happened, and again in the final panel.
    denied = [
        line for line in lines if line.startswith("agent1 (a) · denied · fetch(https://example.com/flaky)")
    ]
    assert denied
    assert any("asked for but not done, or failed:" in line for line in lines)
    assert any("denied · fetch(https://example.com/flaky)" in line and line.startswith("│") for line in lines)
    # `massgen-bot audit` in the same folder reads the same `.env`, so it finds the run's asks.
    audit = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "audit", "--run", run_id, "--jsonl",
        stdout=asyncio.subprocess.PIPE, cwd=tmp_path, env=dict(os.environ),
    )  # fmt: skip
    trail, _ = await asyncio.wait_for(audit.communicate(), timeout=60)
    entries = [json.loads(line) for line in trail.decode().splitlines()]
    assert {(e["run_id"], e["outcome"]) for e in entries} == {(run_id, "ask"), (run_id, "denied")}


async def test_budget_salvage_exits_3(tmp_path: Path) -> None:
    async with ProviderServer() as server:
        prices = "prices: {gpt-4o-mini: {input_per_mtok: 1000000, output_per_mtok: 0}}\n"
        team = team_file(tmp_path, server, "orchestrator: {budget_usd: 0.5}\n" + prices, both_sdks=False)
        database = f"sqlite:///{tmp_path / 'runs.db'}"
        code, out, _ = await massgen_bot("--json", "--team", str(team), "--database-url", database, "task")
    assert code == 3
    last = json.loads(out.splitlines()[-1])
    assert (last["kind"], last["salvage"]) == ("finished", "budget:latest_answer")
    engine = make_engine(database)
    store = SqlRunStore(engine)  # the run was persisted, event for event
    summary = await store.get(last["run_id"])
    stored = await store.events(last["run_id"])
    await engine.dispose()
    assert summary is not None
    assert (summary.status, summary.salvage, summary.team) == ("finished", "budget:latest_answer", "team")
    assert len(stored) == len(out.splitlines())
    usage = [json.loads(line) for line in out.splitlines() if '"kind": "usage"' in line]
    # Both first calls may have been in flight when one crossed the cap (the other is then cancelled);
    # no call started after it: every request the server saw is an agent's opening call.
    assert 1 <= len(usage) <= len(server.requests) <= 2
    assert all(len(request.messages) == 1 for request in server.requests)
    assert usage[-1]["run_cost_usd"] >= 0.5


@pytest.mark.parametrize(
    ("terminal", "code"),
    [
        (RunFinished(winner="a", answer="x"), 0),
        (RunFinished(winner="a", answer="x", salvage="timeout:most_voted"), 3),
        (RunFinished(winner="a", answer="x", salvage="budget:latest_answer"), 3),
        (RunFailed(reasons={"run": "x"}), 2),
        (RunCancelled(by="cli:me"), 4),
    ],
)
def test_exit_codes(terminal: RunFinished | RunFailed | RunCancelled, code: int) -> None:
    assert exit_code(terminal) == code


async def test_live_view_renders_cards_and_final_panels() -> None:
    from rich.console import Console

    from bot.cli.run_view import agent_table, final_panel
    from orchestrator import RunView, start_run
    from orchestrator.testing import ScriptedModels, scripted_team

    events: list[object] = []
    handle = await start_run(scripted_team(2), "task", models=ScriptedModels(), subscribers=[events.append])
    result = await ended(handle)
    state = RunView.of(events).with_agent("a0", tail="some streamed text")  # type: ignore[arg-type]
    console = Console(record=True, width=160)
    console.print(agent_table(state))
    console.print(final_panel(result, state))
    salvaged = RunFinished(winner="a0", answer="best so far", tally={}, salvage="timeout:latest_answer")
    console.print(final_panel(salvaged, state))
    console.print(final_panel(RunFailed(reasons={"a0": "quota exceeded"}), state))
    console.print(final_panel(RunCancelled(by="cli:me"), None))
    text = console.export_text()
    for needle in ("agent1 (a0)", "some streamed", "Final answer: the task is done.", "NO CONSENSUS",
                   "timed out, with the latest answer", "quota exceeded", "Cancelled by cli:me"):  # fmt: skip
        assert needle in text


def test_start_up_turns_the_collector_back_on_after_a_config_error(tmp_path: Path) -> None:
    import gc

    from bot.cli import main

    bad = tmp_path / "team.yaml"
    bad.write_text("agents:\n  - id: a\n    backend: {type: foo, model: m}\n")
    assert gc.isenabled()
    assert main(["run", "--team", str(bad), "task"]) == 1
    assert gc.isenabled()
