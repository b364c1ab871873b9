"""What an agent wants to do, as the engine sees it: one kind and one target."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal, get_args

ActionKind = Literal["command", "read", "write", "fetch", "tool"]
ACTION_KINDS: frozenset[str] = frozenset(get_args(ActionKind))


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """`command(<shell text>)`, `read(<path>)`, `write(<path>)`, `fetch(<url>)` or `tool(<name>)`."""

    kind: ActionKind
    target: str

    def __str__(self) -> str:
        return f"{self.kind}({self.target})"


def action_digest(tool_name: str, tool_input: object) -> str:
    """Hash of the exact tool input: an approval binds to this, so what executes is what was approved."""
    canonical = json.dumps({"tool": tool_name, "input": tool_input}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
