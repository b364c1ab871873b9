"""`massgen-bot run` parks like the bot: killed (or Ctrl-C) while waiting, `--resume RUN_ID` goes on.

Real processes against the loopback provider server; the approval is answered at the resumed
process's terminal (a pty). The command's side effect is counted in a file, the model calls at the
provider server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from approvals import SqlApprovalStore, make_engine
from orchestrator import SqlRunStore
from orchestrator.events import ToolStarted
from tests.bot.cli.test_run import ROOT, massgen_bot, team_file
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply

DEADLINE_S = 60.0


def writer(count: Path) -> str:
    """A command that asks (inline Python touching a file outside the workspace) and appends a line."""
    return f"python3 -c \"open('{count}', 'a').write('ran\\n')\""


def command_first(count: Path):  # type: ignore[no-untyped-def]
    """alpha (gpt-4o-mini) runs the command in its first coordination turn; then the protocol."""

    def handler(request: ProviderRequest) -> Reply:
        made = any(m.role == "assistant" and m.tool_calls for m in request.messages)
        if request.model == "gpt-4o-mini" and "new_answer" in request.tools and not made:
            return Reply(tool_calls=[("run_command", {"command": writer(count)})])
        return protocol_agent(request)

    return handler


class Cli:
    """`massgen-bot run ARGS` with a pty on stdin: read its output as it comes, type answers."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process, self.master = process, master
        self.out, self.err = "", ""
        assert process.stdout is not None
        assert process.stderr is not None
        self._readers = [
            asyncio.ensure_future(self._read(process.stdout, "out")),
            asyncio.ensure_future(self._read(process.stderr, "err")),
        ]

    @classmethod
    async def start(cls, *args: str) -> Cli:
        master, slave = os.openpty()
        env = {k: v for k, v in os.environ.items() if k != "MASSGEN_TEAM"}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", "--json", *args,
            stdin=slave, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
        )  # fmt: skip
        os.close(slave)
        return cls(process, master)

    async def _read(self, stream: asyncio.StreamReader, name: str) -> None:
        while chunk := await stream.read(4096):
            setattr(self, name, getattr(self, name) + chunk.decode())

    async def until(self, name: str, text: str) -> None:
        """Wait (with a deadline) until stdout (`out`) or stderr (`err`) contains `text`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while text not in getattr(self, name):
            assert self.process.returncode is None or not all(r.done() for r in self._readers), (
                f"exited {self.process.returncode} before {text!r}: {self.err}"
            )
            assert loop.time() < deadline, f"no {text!r} in {name}: {self.out}{self.err}"
            await asyncio.sleep(0.02)

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        await self.ended()

    async def ended(self) -> int:
        code = await asyncio.wait_for(self.process.wait(), DEADLINE_S)
        await asyncio.gather(*self._readers)
        os.close(self.master)
        return code

    def run_id(self) -> str:
        return self.err.split("run ", 1)[1].split()[0]


def repeated(server: ProviderServer) -> list[str]:
    """Model requests sent twice with the same conversation (a completed call made again)."""
    seen: set[str] = set()
    twice = []
    for request in server.requests:
        key = f"{request.model}:{request.messages!r}"
        if key in seen:
            twice.append(key)
        seen.add(key)
    return twice


async def test_killed_while_waiting_for_approval_it_resumes_and_the_command_runs_once(tmp_path: Path) -> None:
    count = tmp_path / "count.txt"
    async with ProviderServer(command_first(count)) as server:
        # No sandbox: the command writes the count outside the workspace (bubblewrap would hide it).
        team = str(team_file(tmp_path, server, "sandbox: none\n", both_sdks=False))
        first = await Cli.start("--team", team, "write the report")
        await first.until("err", "Approve?")  # asked at the prompt
        await first.until("out", '"kind": "parked"')  # and nothing can go on without the answer
        request_id = first.err.split("approval needed · ", 1)[1].split()[0]
        await first.kill()  # nobody answered
        run_id = first.run_id()
        assert not count.exists()
        before = len(server.requests)

        second = await Cli.start("--team", team, "--resume", run_id)
        await second.until("err", f"approval needed · {request_id}")  # the same request, asked again
        await second.until("err", "Approve?")
        second.type("y")
        code = await second.ended()

    assert code == 0, second.err
    assert f"run {run_id}" in second.err
    last = json.loads(second.out.splitlines()[-1])
    assert (last["kind"], last["run_id"]) == ("finished", run_id)
    assert count.read_text() == "ran\n"  # the approved command ran once
    assert len(server.requests) > before
    assert repeated(server) == []  # no completed model call was made again
    engine = make_engine(f"sqlite:///{tmp_path / 'state' / 'massgen.db'}")
    try:
        events = await SqlRunStore(engine).events(run_id)
    finally:
        await engine.dispose()
    [started] = [e for e in events if isinstance(e, ToolStarted)]
    assert started.request_id == request_id
    resolved = [json.loads(x) for x in second.out.splitlines() if '"tool_approval_resolved"' in x]
    assert [(e["request_id"], e["status"], e["decided_by"][:4]) for e in resolved] == [
        (request_id, "approved", "cli:")
    ]


async def test_ctrl_c_keeps_the_run_and_says_how_to_resume_it(tmp_path: Path) -> None:
    answering = asyncio.Event()

    def handler(request: ProviderRequest) -> Reply:
        return protocol_agent(request) if answering.is_set() else Reply(hang=True)

    async with ProviderServer(handler) as server:
        team = str(team_file(tmp_path, server, both_sdks=False))
        code, out, err = await massgen_bot(
            "--json", "--team", team, "task", server=server, wait_requests=2, interrupt=True
        )
        assert code == 5, err
        run_id = err.split("run ", 1)[1].split()[0]
        assert f"continue it with `massgen-bot run --resume {run_id} --team {team}`" in err
        assert f"or end it with `massgen-bot run --cancel {run_id} --team {team}`" in err
        assert all(json.loads(line)["kind"] not in ("cancelled", "finished") for line in out.splitlines())
        answering.set()
        code, out, err = await massgen_bot("--json", "--team", team, "--resume", run_id)
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["kind"] == "finished"
    code, _, err = await massgen_bot("--team", team, "--cancel", run_id)
    assert code == 1
    assert f"massgen-bot run: run {run_id} already ended (finished); nothing to cancel" in err


async def test_approved_in_another_terminal_the_prompt_gives_way_and_the_run_goes_on(tmp_path: Path) -> None:
    count = tmp_path / "count.txt"
    async with ProviderServer(command_first(count)) as server:
        team = str(team_file(tmp_path, server, "sandbox: none\n", both_sdks=False))
        cli = await Cli.start("--team", team, "write the report")
        await cli.until("err", "Approve?")
        request_id = cli.err.split("approval needed · ", 1)[1].split()[0]
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "approvals", "approve", request_id,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=dict(os.environ),
        )  # fmt: skip
        said, _ = await asyncio.wait_for(other.communicate(), DEADLINE_S)
        assert other.returncode == 0, said
        code = await cli.ended()
    assert code == 0, cli.err
    assert f"{request_id}: approved by cli:" in cli.err  # the open prompt said so and gave way
    assert cli.err.count("Approve?") == 1
    assert count.read_text() == "ran\n"
    assert json.loads(cli.out.splitlines()[-1])["kind"] == "finished"


async def test_a_run_killed_while_waiting_is_cancelled_with_cancel(tmp_path: Path) -> None:
    count = tmp_path / "count.txt"
    async with ProviderServer(command_first(count)) as server:
        team = str(team_file(tmp_path, server, "sandbox: none\n", both_sdks=False))
        first = await Cli.start("--team", team, "write the report")
        await first.until("out", '"kind": "parked"')
        await first.until("err", "approval needed · ")  # a pipe of its own: it may arrive second
        request_id = first.err.split("approval needed · ", 1)[1].split()[0]
        await first.kill()
        before = len(server.requests)
        code, out, err = await massgen_bot("--json", "--team", team, "--cancel", first.run_id())
        assert len(server.requests) == before  # ended without resuming any agent
    assert code == 4, err
    last = json.loads(out.splitlines()[-1])
    assert (last["kind"], last["by"][:4]) == ("cancelled", "cli:")
    assert not count.exists()
    engine = make_engine(f"sqlite:///{tmp_path / 'state' / 'massgen.db'}")
    try:
        request = await SqlApprovalStore(engine).get(request_id)
    finally:
        await engine.dispose()
    assert request is not None
    assert request.status == "cancelled"  # nobody can approve an action no agent waits for


async def test_cancel_needs_no_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--cancel` calls no model: the built-in team's keys, gone by then, do not stop it."""
    async with ProviderServer(command_first(tmp_path / "count.txt")) as server:
        for name, value in {
            "OPENAI_BASE_URL": server.openai_base_url,
            "ANTHROPIC_BASE_URL": server.anthropic_base_url,
            "MASSGEN_CHAT_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": "k",
            "ANTHROPIC_API_KEY": "k",
        }.items():
            monkeypatch.setenv(name, value)
        first = await Cli.start("write the report")  # the built-in team
        await first.until("out", '"kind": "parked"')
        await first.kill()
    keyless = {
        k: v
        for k, v in os.environ.items()
        if k != "MASSGEN_TEAM" and not k.endswith(("_API_KEY", "_BASE_URL"))
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", "--json", "--cancel", first.run_id(),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT, env=keyless,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 4, err.decode()
    assert json.loads(out.decode().splitlines()[-1])["kind"] == "cancelled"
