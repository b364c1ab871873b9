"""What `massgen-bot run` shows: a live `rich` display or JSON lines, and approvals at the prompt."""

from __future__ import annotations

import asyncio
import functools
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator import RunCancelled, RunEvent, RunFailed, RunFinished, RunView, to_line

if TYPE_CHECKING:  # rich is imported only when something is drawn: `--json` runs never load it
    from rich.console import Console
    from rich.live import Live
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from approvals import ApprovalRequest, ApprovalService
    from orchestrator import RunHandle

Terminal = RunFinished | RunFailed | RunCancelled
NO_TERMINAL = "no terminal to ask"
_CHOICES = {"y": ("once", True), "r": ("run", True), "n": ("once", False)}
CHOICES_PROMPT = "Approve? [y] yes, once · [r] yes, for this run · [n] no: "


def approval_text(request: ApprovalRequest, *, now: datetime | None = None) -> Text:
    """What the terminal approver reads: who asks for what, the layer and risk, and when it expires."""
    from rich.text import Text

    now = now or datetime.now(UTC)
    left = max(0, int((request.expires_at - now).total_seconds()))
    text = Text()
    text.append(f"{request.agent_id} wants to run ")
    text.append(str(request.action), style="bold")
    text.append(f"\nrisk {request.risk} · layer {request.layer} · {request.reason}")
    expires = request.expires_at.astimezone(UTC).strftime("%H:%M:%S UTC")
    text.append(f"\nexpires in {left} s ({expires}); no answer by then denies it")
    return text


class View(Protocol):
    @property
    def console(self) -> Console: ...

    def on_event(self, event: RunEvent) -> None: ...
    def start(self, handle: RunHandle) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def finish(self, terminal: Terminal) -> None: ...


class JsonView:
    """Every event as one JSON line on stdout; anything for humans goes to stderr."""

    @functools.cached_property
    def console(self) -> Console:
        from rich.console import Console

        return Console(stderr=True)

    def on_event(self, event: RunEvent) -> None:
        sys.stdout.write(to_line(event) + "\n")
        sys.stdout.flush()

    def start(self, handle: RunHandle) -> None:
        return None

    def pause(self) -> None:
        return None

    def resume(self) -> None:
        return None

    def finish(self, terminal: Terminal) -> None:
        return None


class LiveView:
    """Agent cards (status, answers, vote, tokens, cost, latest text) redrawn a few times a second.

    The cards are the run's one fold (`orchestrator.RunView`), the same the Slack status message shows.
    """

    def __init__(self) -> None:
        from rich.console import Console

        self._console = Console()
        self._live: Live | None = None
        self.view = RunView()

    def on_event(self, event: RunEvent) -> None:
        """The run's subscriber: fold the event into the view the cards are drawn from."""
        self.view = self.view.apply(event)

    @property
    def console(self) -> Console:
        return self._console

    def start(self, handle: RunHandle) -> None:
        from rich.live import Live

        self._live = Live(console=self.console, get_renderable=self._render, refresh_per_second=8)
        self._live.start()

    def pause(self) -> None:
        if self._live is not None:
            self._live.stop()

    def resume(self) -> None:
        if self._live is not None:
            self._live.start()

    def finish(self, terminal: Terminal) -> None:
        self.pause()
        self.console.print(final_panel(terminal, self.view))

    def _render(self) -> Table:
        return agent_table(self.view)


def agent_table(view: RunView) -> Table:
    """One row per agent."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{view.phase} · ${view.cost_usd:.4f}", expand=True)
    for column in ("agent", "model", "status", "answers", "vote", "tokens in/out", "cost", "latest"):
        table.add_column(column, overflow="ellipsis", no_wrap=column != "latest")
    for card in view.agents:
        status = f"failed: {card.detail}" if card.failed else card.status
        table.add_row(
            f"{card.label} ({card.agent_id})",
            card.model,
            Text(status, style="red" if card.failed else ""),
            str(card.answers),
            card.voted_for or "-",
            f"{card.input_tokens}/{card.output_tokens}",
            f"${card.cost_usd:.4f}",
            " ".join(card.tail.split()),
        )
    return table


def final_panel(terminal: Terminal, view: RunView | None) -> Panel:
    """The tally and the answer (or why there is none)."""
    from rich.console import Group
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.text import Text

    from bot.runs import apply_line  # only when the panel is drawn (`--json` skips it)

    if isinstance(terminal, RunCancelled):
        return Panel(
            f"Cancelled{' by ' + terminal.by if terminal.by else ''}.", title="run cancelled", style="yellow"
        )
    if isinstance(terminal, RunFailed):
        reasons = "\n".join(f"- {who}: {why}" for who, why in terminal.reasons.items())
        return Panel(reasons, title="run failed", style="red")
    labels = {card.agent_id: card.label for card in view.agents} if view else {}
    tally = ", ".join(f"{labels.get(a, a)} ({a}): {n}" for a, n in terminal.tally.items()) or "no votes"
    header = f"winner: {terminal.winner} · votes: {tally} · ${terminal.cost_usd:.4f}"
    if terminal.salvage:
        header += f"\nNO CONSENSUS — salvaged ({terminal.salvage})"
    if terminal.applied is not None:
        header += f"\n{apply_line(terminal)}"
    return Panel(Group(Text(header, style="bold"), Markdown(terminal.answer)), title="final answer")


class TerminalApprover:
    """Answers approval requests at the prompt as `user`; without a terminal every ask is denied."""

    def __init__(self, service: ApprovalService, user: str, view: View, *, interactive: bool) -> None:
        from approvals import Principal

        self._service = service
        self._principal = Principal(id=user)
        self._view = view
        self._interactive = interactive
        self._lock = asyncio.Lock()  # one question at a time
        self._tasks: set[asyncio.Task[None]] = set()

    def on_event(self, event: Any) -> None:
        """ApprovalService subscriber: ask about each new request in its own task."""
        if getattr(event, "kind", None) == "approval_requested":
            task = asyncio.get_running_loop().create_task(self._decide(event.request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop asking (the run is over)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _decide(self, request: ApprovalRequest) -> None:
        if not self._interactive:
            await self._service.decide(request.id, self._principal, approve=False, reason=NO_TERMINAL)
            return
        async with self._lock:
            self._view.pause()
            try:
                scope, approve = await self._ask(request)
            finally:
                self._view.resume()
        await self._service.decide(request.id, self._principal, approve=approve, scope=scope)  # type: ignore[arg-type]

    async def _ask(self, request: ApprovalRequest) -> tuple[str, bool]:
        from rich.panel import Panel

        console = self._view.console
        # Text, never markup: the action is the agent's text (`[bold]` in it must not style, `[y]` in
        # the choices must not vanish as an unknown tag).
        console.print(Panel(approval_text(request), title=f"approval needed · {request.id}", style="yellow"))
        while True:
            console.print(CHOICES_PROMPT, end="", markup=False, highlight=False)
            line = await read_line()
            if not line:  # end of input: nobody can answer, so deny
                return ("once", False)
            answer = line.strip().lower()[:1]
            if answer in _CHOICES:
                return _CHOICES[answer]


async def read_line() -> str:
    """One line from stdin without blocking the event loop (and without a thread that outlives it)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno()

    def ready() -> None:
        if not future.done():
            future.set_result(sys.stdin.readline())

    loop.add_reader(fd, ready)
    try:
        return await future
    finally:
        loop.remove_reader(fd)
