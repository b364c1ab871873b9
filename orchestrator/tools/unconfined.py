"""Unconfined means ask: with `sandbox: none`, every command waits for a human.

Without the sandbox the engine's reading of a command's text is the only wall, and pitfall 7 says
text rules cannot see everything (`python -c "open('.env')"`). So every `run_command` the engine
would allow is asked instead, with the reason on the request, and a "for this run" approval still
covers its repeats. Only an explicit development flag, the environment variable
`MASSGEN_UNCONFINED_OK=1` next to `sandbox: none`, lets the engine's allow stand; then the bot logs
so loudly at start.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

from approvals.permissions import Action, Decision
from orchestrator.ports import Evaluator

log = logging.getLogger(__name__)

UNCONFINED_OK = "MASSGEN_UNCONFINED_OK"
REASON = (
    "sandbox: none - this command would run UNCONFINED (no bubblewrap: it can write anywhere the bot "
    "can, reach the network and read files outside the workspace), so every command asks. "
    f"Set {UNCONFINED_OK}=1 only on a development machine to skip this."
)
OK_WARNING = (
    f"sandbox: none with {UNCONFINED_OK}=1 - agents' commands run UNCONFINED and the engine alone "
    "decides which run unasked. Never use this outside a development machine."
)


def unconfined_ok(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the development flag lets unconfined commands run without asking."""
    return environ.get(UNCONFINED_OK, "") == "1"


class AskUnconfined:
    """An `Evaluator` that turns the engine's allow of a command into an ask (grants still count)."""

    def __init__(self, engine: Evaluator) -> None:
        self.engine = engine

    def evaluate_many(self, actions: Sequence[Action], *, grants: frozenset[str] = frozenset()) -> Decision:
        """The engine's decision; an allowed command becomes an ask unless a run grant covers it."""
        decision = self.engine.evaluate_many(actions, grants=grants)
        commands = [a for a in actions if a.kind == "command"]
        if not commands or decision.resolved != "allow":
            return decision
        if all(self.engine.scope_key(a) in grants for a in commands):
            return decision  # approved "for this run" already
        return replace(decision, verdict="ask", resolved="ask", layer="policy", reason=REASON)

    def scope_key(self, action: Action) -> str:
        """The engine's scope key."""
        return self.engine.scope_key(action)


def confine_engines(engines: dict[str, Evaluator], mode: str) -> dict[str, Evaluator]:
    """The run's engines, each asking for every command when commands run unconfined."""
    if mode != "none":
        return engines
    if unconfined_ok():
        log.warning(OK_WARNING)
        return engines
    log.warning(REASON)
    return {agent: AskUnconfined(engine) for agent, engine in engines.items()}
