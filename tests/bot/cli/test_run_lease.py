"""One process at a time drives a CLI run: a second `--resume` or `--cancel` is refused at once.

Real `massgen-bot run` processes against the loopback provider server, on SQLite and PostgreSQL:
while one process drives a run, another asking for it exits 1 with one line naming the holder; a
holder killed with SIGKILL leaves the run free for `--resume` at once. The command's side effect is
counted in a file, the model calls at the provider server.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from approvals import ConversationRef, make_engine
from bot.migrations import ensure_schema
from orchestrator import AgentInfo, RunStarted, SqlRunStore
from tests.bot.cli.test_run import massgen_bot, team_file
from tests.bot.cli.test_run_resume import Cli, command_first, repeated
from tests.conftest import postgres_url
from tests.fakes.provider_server import ProviderServer
from tests.orchestrator.test_lease import take_away

ADVICE = "wait for it to end, or stop it there (Ctrl-C keeps the run) and try again"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest) -> AsyncIterator[list[str]]:
    """The CLI's database arguments: none (the SQLite file in MASSGEN_STATE_DIR) or a scratch PostgreSQL."""
    if request.param == "sqlite":
        yield []
        return
    from approvals.testing import scratch_postgres_database

    server = postgres_url()
    if server is None:
        pytest.skip("no DATABASE_URL_POSTGRES")
    async with scratch_postgres_database(server) as url:
        engine = make_engine(url)
        try:
            await ensure_schema(engine, "auto")  # as `massgen-bot db upgrade` would
        finally:
            await engine.dispose()
        yield ["--database-url", url]


def refusal(run_id: str, pid: int | None) -> re.Pattern[str]:
    """The one line a refused process prints (the holder's start time as HH:MM:SS UTC)."""
    holder = f" \\(pid {pid} on host {re.escape(socket.gethostname())}, since \\d\\d:\\d\\d:\\d\\d UTC\\)"
    return re.compile(
        f"massgen-bot run: run {re.escape(run_id)} is being driven by another process"
        f"{holder if pid is not None else ''}; {re.escape(ADVICE)}"
    )


async def refused(run_id: str, holder: int, *args: str) -> None:
    """`massgen-bot run ARGS` ends at once: exit 1, the one line naming the holder, nothing on stdout."""
    code, out, err = await massgen_bot("--json", *args)
    assert code == 1, err
    assert out == ""
    [line] = [line for line in err.splitlines() if not line.startswith("warning: ")]  # the team's own
    assert refusal(run_id, holder).fullmatch(line), line


async def test_one_process_drives_a_run_and_a_killed_holder_leaves_it_free_at_once(
    tmp_path: Path, database: list[str]
) -> None:
    count = tmp_path / "count.txt"
    async with ProviderServer(command_first(count)) as server:
        team = ["--team", str(team_file(tmp_path, server, "sandbox: none\n", both_sdks=False)), *database]
        first = await Cli.start(*team, "write the report")
        await first.until("out", '"kind": "parked"')  # waiting for the approval at its prompt
        await first.until("err", "Approve?")
        run_id = first.run_id()
        calls = len(server.requests)
        await refused(run_id, first.process.pid, *team, "--resume", run_id)  # a new run is held too
        await refused(run_id, first.process.pid, *team, "--cancel", run_id)
        await first.kill()  # kill -9: its lease goes with it, nothing to clean up

        second = await Cli.start(*team, "--resume", run_id)
        await second.until("err", "Approve?")  # the same request, asked again
        await refused(run_id, second.process.pid, *team, "--resume", run_id)  # two resumes: one drives
        await refused(run_id, second.process.pid, *team, "--cancel", run_id)
        assert len(server.requests) == calls  # the refused processes made no model call
        second.type("y")
        code = await second.ended()
        code_after, _, err_after = await massgen_bot(*team, "--resume", run_id)  # the lease ended with it

    assert code == 0, second.err
    assert json.loads(second.out.splitlines()[-1])["kind"] == "finished"
    assert count.read_text() == "ran\n"  # the approved command ran once
    assert repeated(server) == []  # each model call was made once
    assert code_after == 1
    assert f"run {run_id} already ended (finished); nothing to resume" in err_after


async def test_a_run_killed_while_resumed_resumes_again_at_once(tmp_path: Path, database: list[str]) -> None:
    count = tmp_path / "count.txt"
    async with ProviderServer(command_first(count)) as server:
        team = ["--team", str(team_file(tmp_path, server, "sandbox: none\n", both_sdks=False)), *database]
        first = await Cli.start(*team, "write the report")
        await first.until("err", "Approve?")
        run_id = first.run_id()
        await first.kill()
        resumed = await Cli.start(*team, "--resume", run_id)
        await resumed.until("err", "Approve?")
        await resumed.kill()  # the holder of a resumed run dies too
        started = time.monotonic()
        code, out, err = await massgen_bot("--json", *team, "--cancel", run_id)
    assert code == 4, err  # cancelled: not refused
    assert time.monotonic() - started < 30  # no lock left to time out
    assert json.loads(out.splitlines()[-1])["kind"] == "cancelled"
    assert not count.exists()


async def test_a_slack_run_is_the_bots_to_drive_not_the_cli(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'state' / 'massgen.db'}")
    (tmp_path / "state").mkdir()
    try:
        await ensure_schema(engine, "auto")
        where = ConversationRef(surface="slack", channel="C1", thread="1.2")
        agents = (AgentInfo(agent_id="alpha", label="agent1", backend="openai", model="gpt-4o-mini"),)
        started = RunStarted(
            run_id="run-slack", seq=1, at=time.time(), task="t", agents=agents, conversation=where
        )
        await SqlRunStore(engine).append(started)
    finally:
        await engine.dispose()
    async with ProviderServer(command_first(tmp_path / "count.txt")) as server:
        team = str(team_file(tmp_path, server, both_sdks=False))
        for verb in ("resume", "cancel"):
            code, out, err = await massgen_bot("--team", team, f"--{verb}", "run-slack")
            assert (code, out) == (1, ""), err
            said = "run run-slack belongs to slack (the bot drives it)"
            assert [line for line in err.splitlines() if not line.startswith("warning: ")] == [
                f"massgen-bot run: {said}; {verb} it there, not here"
            ]
        assert server.requests == []


async def test_a_lease_taken_away_stops_the_holder_and_keeps_the_run(
    tmp_path: Path, database: list[str]
) -> None:
    count = tmp_path / "count.txt"
    url = database[1] if database else f"sqlite:///{tmp_path / 'state' / 'massgen.db'}"
    async with ProviderServer(command_first(count)) as server:
        team = ["--team", str(team_file(tmp_path, server, "sandbox: none\n", both_sdks=False)), *database]
        first = await Cli.start(*team, "write the report")
        await first.until("err", "Approve?")
        run_id = first.run_id()
        await take_away(url, run_id)  # its session killed, or its lock file removed
        code = await first.ended()  # it stops by itself: another process may take the run now
        assert code == 5, first.err
        assert "stopped (lease lost, another process may take the run: its " in first.err
        assert f"run {run_id} is kept; continue it with `massgen-bot run --resume {run_id}" in first.err
        second = await Cli.start(*team, "--resume", run_id)
        await second.until("err", "Approve?")
        second.type("y")
        code = await second.ended()
    assert code == 0, second.err
    assert count.read_text() == "ran\n"
    assert repeated(server) == []
