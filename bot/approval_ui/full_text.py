"""Every character an approver approves, shown: escaped once, then cut into blocks Slack accepts.

Escaping comes first and the cuts fall between whole escapes (`&amp;` and friends, the broken
`@here`, the broken code fence), so no chunk grows past Slack's 3,000-character text limit and no
escape is split. Text that cannot be shown whole (secret-looking parts that we redact, characters
a reader cannot see, or more than a modal holds) is never offered for approval in Slack.
"""

from __future__ import annotations

import json
import re
import unicodedata

from bot.render.escape import escape
from bot.render.kit import Block
from bot.render.redact import redact

SECTION_TEXT = 3000  # Slack's limit for a section's text object
FENCE = "```\n{}\n```"
CHUNK = SECTION_TEXT - len(FENCE.format(""))  # escaped characters per block
MAX_MODAL_BLOCKS = 100  # docs.slack.dev/surfaces/modals
MAX_VIEW_BYTES = 250_000  # "250 kB" of view JSON (views.open/update/push)
FENCE_BREAK = "`\u200b`\u200b`"  # a ``` inside the action cannot close our fence
_ATOM = re.compile(r"&(?:amp|lt|gt);|@\u2060|`\u200b`\u200b`|.", re.S)
_VISIBLE_CONTROLS = frozenset("\n\t ")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Zl", "Zp", "Zs"})


def escaped_action(action: str) -> str:
    """The action as mrkdwn inside a code fence: fence-safe, then escaped (no redaction: see `hidden`)."""
    return escape(action.replace("```", FENCE_BREAK))


def chunks(action: str, size: int = CHUNK) -> list[str]:
    """The escaped action in pieces of at most `size` characters, never cutting inside an escape."""
    pieces: list[str] = []
    current: list[str] = []
    length = 0
    for atom in _ATOM.findall(escaped_action(action)):
        if length + len(atom) > size:
            pieces.append("".join(current))
            current, length = [], 0
        current.append(atom)
        length += len(atom)
    pieces.append("".join(current))
    return pieces


def code_sections(action: str) -> list[Block]:
    """One section per chunk, each a code block within Slack's per-block limit."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": FENCE.format(piece)}}
        for piece in chunks(action)
    ]


def hidden(action: str) -> str | None:
    """Why Slack cannot show `action` exactly as it will run (None: it can, character for character)."""
    if redact(action) != action:
        return "it contains text that looks like a secret, which the bot never shows in Slack"
    for ch in action:
        if ch not in _VISIBLE_CONTROLS and unicodedata.category(ch) in _HIDDEN_CATEGORIES:
            return f"it contains a character a reader cannot see or tell apart (U+{ord(ch):04X})"
    return None


def fits(view: Block) -> bool:
    """Within Slack's limits for a modal: at most 100 blocks and 250 kB of JSON."""
    blocks = view.get("blocks") or []
    size = len(json.dumps(view, ensure_ascii=False).encode())
    return len(blocks) <= MAX_MODAL_BLOCKS and size <= MAX_VIEW_BYTES


def inspect_hint(request_id: str) -> str:
    """How to read (and decide) a request whose action Slack cannot show."""
    rid = escape(request_id[:80].replace("`", "'"))
    return (
        f"Inspect it in a terminal with `massgen-bot approvals show {rid}`, "
        f"then decide there (`massgen-bot approvals approve {rid}` or `deny {rid} --reason …`)."
    )
