"""What `massgen-bot run` shows: a live `rich` display or JSON lines, and approvals at the prompt."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator import RunCancelled, RunEvent, RunFailed, RunFinished, RunView, to_line

if TYPE_CHECKING:  # rich is imported only when something is drawn: `--json` runs never load it
    from rich.console import Console
    from rich.live import Live
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from approvals import ApprovalRequest, ApprovalService
    from orchestrator import ActionResult, RunHandle

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
    from bot.cli.repo import request_lines

    patch = request_lines(request)  # an apply or publish request: where, the stat, sensitive paths, the diff
    if patch:
        text.append(f"\n{patch}")
    return text


class View(Protocol):
    @property
    def console(self) -> Console: ...

    def on_event(self, event: RunEvent) -> None: ...
    def replay(self, events: Iterable[RunEvent]) -> None: ...
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

    def replay(self, events: Iterable[RunEvent]) -> None:
        """A resumed run's earlier events were streamed by the process that ran them: none again."""
        return None

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
    Without a terminal (piped, redirected) nothing is redrawn: each change is one plain line, with no
    control codes. Either way each action worth a line (asked about, denied, failed) gets one.
    """

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console

        self._console = console or Console()
        self._live: Live | None = None
        self.view = RunView()

    def on_event(self, event: RunEvent) -> None:
        """The run's subscriber: fold the event into the view, then say what changed as lines."""
        before, self.view = self.view, self.view.apply(event)
        lines = [action_line(a, self.view) for a in self.view.actions[len(before.actions) :]]
        if not self._console.is_terminal:
            lines = progress_lines(before, self.view) + lines
        for line in lines:
            self._console.print(line, soft_wrap=True)  # one line per change, however narrow the screen

    def replay(self, events: Iterable[RunEvent]) -> None:
        """A resumed run: fold its stored events into the cards, without saying them again."""
        for event in events:
            self.view = self.view.apply(event)

    @property
    def console(self) -> Console:
        """Where approval prompts go: the display, or stderr when the display goes to a file or a pipe."""
        if self._console.is_terminal:
            return self._console
        from rich.console import Console

        return Console(stderr=True)

    def start(self, handle: RunHandle) -> None:
        if not self._console.is_terminal:
            return  # lines only: a redrawn table is for people, not for files
        from rich.live import Live

        self._live = Live(console=self._console, get_renderable=self._render, refresh_per_second=8)
        self._live.start()

    def pause(self) -> None:
        if self._live is not None:
            self._live.stop()

    def resume(self) -> None:
        if self._live is not None:
            self._live.start()

    def finish(self, terminal: Terminal) -> None:
        self.pause()
        self._console.print(final_panel(terminal, self.view))

    def _render(self) -> Table:
        return agent_table(self.view)


_OUTCOME_STYLE = {
    "ran": "green",
    "failed": "red",
    "denied": "red",
    "expired": "yellow",
    "cancelled": "yellow",
}


def action_line(action: ActionResult, view: RunView) -> Text:
    """What one action did, after its decision: `ran (exit code 0)`, `failed (exit code 2)`, `denied: ...`."""
    from rich.text import Text

    code = f" (exit code {action.exit_code})" if action.exit_code is not None else ""
    why = "" if action.outcome == "ran" or (action.outcome == "failed" and code) else f": {action.reason}"
    if action.outcome == "expired":
        why = ": nobody answered in time"
    line = Text(f"{view.label(action.agent_id)} ({action.agent_id}) · ")
    line.append(f"{action.outcome}{code}", style=_OUTCOME_STYLE.get(action.outcome, ""))
    line.append(f" · {action.action}{why}")  # agent text: never markup
    return line


def progress_lines(before: RunView, after: RunView) -> list[Text]:
    """What changed between two views, one plain line each (the display without a terminal)."""
    from rich.text import Text

    lines: list[str] = []
    if after.run_id and not before.run_id:
        lines.append("agents: " + ", ".join(f"{a.label} ({a.agent_id}) {a.model}" for a in after.agents))
    for card in after.agents:
        old = before.agent(card.agent_id)
        who = f"{card.label} ({card.agent_id})"
        if card.latest_answer and (old is None or old.latest_answer != card.latest_answer):
            lines.append(f"{who} answered: {card.latest_answer}")
        if card.voted_for and (old is None or old.voted_for != card.voted_for):
            lines.append(f"{who} votes for {card.voted_for}")
        if card.failed and (old is None or not old.failed):
            lines.append(f"{who} failed: {card.detail}")
    if after.phase == "presenting" and before.phase != "presenting" and after.winner:
        lines.append(f"consensus: {after.label(after.winner)} ({after.winner}) presents the final answer")
    return [Text(line) for line in lines]


def agent_table(view: RunView) -> Table:
    """One row per agent, legible at 80 columns: the numbers keep their width, `latest` takes the rest."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    title = f"{view.phase} · ${view.cost_usd:.4f}"
    table = Table(title=title, expand=True, box=box.SIMPLE_HEAD, pad_edge=False, padding=0)
    # Fixed widths: only `latest` gives way on a narrow screen (8 agents' worth of ids still fit 16).
    table.add_column("agent", no_wrap=True, overflow="ellipsis", width=16)
    table.add_column("status", no_wrap=True, overflow="ellipsis", width=17)
    for column, width in (("ans", 3), ("vote", 8), ("tokens", 9), ("cost", 6)):
        table.add_column(column, no_wrap=True, width=width, justify="left" if column == "vote" else "right")
    table.add_column("latest", no_wrap=True, overflow="ellipsis", ratio=1)
    for card in view.agents:
        latest = card.detail if card.failed else card.tail  # why a dropped agent left
        table.add_row(
            Text(f"{card.label} ({card.agent_id})\n") + Text(card.model, style="dim"),
            Text(card.status.replace("_", " "), style="red" if card.failed else ""),
            str(card.answers),
            card.voted_for or "-",
            f"{_count(card.input_tokens)}/{_count(card.output_tokens)}",
            f"${card.cost_usd:.3f}",
            Text(" ".join(latest.split()), style="red" if card.failed else ""),
        )
    return table


def _count(tokens: int) -> str:
    """Tokens in at most five characters (`980`, `12.3k`, `4.1M`)."""
    if tokens < 1000:
        return str(tokens)
    if tokens < 1_000_000:
        return f"{tokens / 1000:.1f}k" if tokens < 100_000 else f"{tokens // 1000}k"
    return f"{tokens / 1_000_000:.1f}M"


def final_panel(terminal: Terminal, view: RunView | None) -> Panel:
    """The tally and the answer (or why there is none), and every action asked for that was not done."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    from bot.runs import apply_line, salvage_phrase  # only when the panel is drawn (`--json` skips it)

    parts: list[Any] = []
    if isinstance(terminal, RunCancelled):
        title, style = "run cancelled", "yellow"
        parts.append(Text(f"Cancelled{' by ' + terminal.by if terminal.by else ''}."))
    elif isinstance(terminal, RunFailed):
        title, style = "run failed", "red"
        parts.append(Text("\n".join(f"- {who}: {why}" for who, why in terminal.reasons.items())))
    else:
        title, style = "final answer", "none"
        labels = {card.agent_id: card.label for card in view.agents} if view else {}
        tally = ", ".join(f"{labels.get(a, a)} ({a}): {n}" for a, n in terminal.tally.items()) or "no votes"
        header = f"winner: {terminal.winner} · votes: {tally} · ${terminal.cost_usd:.4f}"
        if terminal.salvage:
            header += f"\nNO CONSENSUS — {salvage_phrase(terminal.salvage)}"
        if terminal.applied is not None:
            header += f"\n{apply_line(terminal)}"
        parts.append(Text(header, style="bold"))
    unmet = unmet_lines(view)
    if unmet:
        parts.append(Text("asked for but not done, or failed:", style="bold red"))
        parts.extend(unmet)
    if isinstance(terminal, RunFinished):
        parts.append(answer_markdown(terminal.answer))
    return Panel(Group(*parts), title=title, style=style)


def answer_markdown(answer: str) -> Markdown:
    """The answer as Markdown with HTML shown as written: rich drops tags (`<task>`, `<div>`) and all
    the text of an HTML block, so an answer that opens with a tag would print empty."""
    from markdown_it import MarkdownIt
    from rich.markdown import Markdown

    markdown = Markdown(answer)
    markdown.parsed = (
        MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table").parse(answer)
    )
    return markdown


def unmet_lines(view: RunView | None) -> list[Text]:
    """One line per action a person was asked about that did not run, or that ran and failed."""
    if view is None:
        return []
    return [action_line(a, view) for a in view.actions if a.unmet]


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
            self.ask([event.request])

    def ask(self, requests: Iterable[ApprovalRequest]) -> None:
        """Ask about each request (e.g. those a resumed run still waits for), one at a time."""
        for request in requests:
            task = asyncio.get_running_loop().create_task(self._decide(request))
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
            current = await self._service.get(request.id)
            if current is None or current.terminal:  # decided elsewhere while another question was open
                return
            self._view.pause()
            try:
                answer = await self._ask_unless_decided(request)
            finally:
                self._view.resume()
        if answer is not None:
            scope, approve = answer
            await self._service.decide(request.id, self._principal, approve=approve, scope=scope)  # type: ignore[arg-type]

    async def _ask_unless_decided(self, request: ApprovalRequest) -> tuple[str, bool] | None:
        """The answer typed here, or None when the request was decided elsewhere first.

        Another terminal (`massgen-bot approvals approve`), the file handshake or the expiry may
        answer while the prompt waits: the prompt then gives way and says so.
        """
        asking = asyncio.ensure_future(self._ask(request))
        decided = asyncio.ensure_future(self._service.wait(request.id))
        try:
            await asyncio.wait({asking, decided}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (asking, decided):
                task.cancel()
            await asyncio.gather(asking, decided, return_exceptions=True)
        if asking.done() and not asking.cancelled() and asking.exception() is None:
            return asking.result()
        if decided.done() and not decided.cancelled() and decided.exception() is None:
            final = decided.result()
            by = f" by {final.decided_by}" if final.decided_by else ""
            said = f"\n{request.id}: {final.status}{by} elsewhere"
            self._view.console.print(said, markup=False, highlight=False)
        return None

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
