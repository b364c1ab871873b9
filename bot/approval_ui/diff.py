"""The "View diff" modal: every byte of the diff an approval binds, escaped, chunked, or why not.

An action that changes code carries its diff in the request's context (`DIFF_KEY`, with its
SHA-256 under `DIFF_SHA256_KEY`; the approval's digest covers the diff). The modal shows exactly
those bytes: escaped once by the Details rules (`full_text.chunks`: `&`, `<`, `>` as entities, cuts
never inside an escape), one code block per chunk of at most 3,000 characters, at most 100 blocks
and 250 kB a view. A longer diff is shown from its start and the modal says where it was cut and
where to read the rest. A diff whose bytes do not match its hash, or that Slack cannot show as it
is (secret-looking text, invisible characters), is not shown at all, and is not approvable here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Final

from bot.approval_ui import full_text
from bot.render import ids
from bot.render.escape import code
from bot.render.kit import Block, context, section
from bot.render.views import modal

DIFF_KEY: Final = "diff"  # request.context: the full unified diff the action applies or pushes
DIFF_SHA256_KEY: Final = "diff_sha256"  # request.context: hex SHA-256 of the diff's UTF-8 bytes
_HEAD_BLOCKS = 3  # title line, hash line, and the cut note when there is one
_BYTE_BUDGET = full_text.MAX_VIEW_BYTES - 10_000  # room for the frame, the facts and the note


def diff_of(context_: Mapping[str, str]) -> tuple[str, str | None] | None:
    """The diff a request's context carries and its recorded hash, or None when it carries none."""
    diff = context_.get(DIFF_KEY)
    if diff is None:
        return None
    return diff, context_.get(DIFF_SHA256_KEY)


def sha256(diff: str) -> str:
    """Hex SHA-256 of the diff's UTF-8 bytes (what `DIFF_SHA256_KEY` holds)."""
    return hashlib.sha256(diff.encode()).hexdigest()


def diff_problem(diff: str, recorded: str | None) -> str | None:
    """Why Slack must not show this diff as the one the approval binds (None: it may, exactly)."""
    if recorded is None or recorded != sha256(diff):
        return "its bytes do not match the hash the approval records"
    return full_text.hidden(diff)


def _shown(piece: str) -> str:
    """An escaped chunk back to the diff's own characters (the inverse of `full_text.escaped_action`)."""
    piece = piece.replace(full_text.FENCE_BREAK, "```").replace("@\u2060", "@")
    return piece.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _block(piece: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": full_text.FENCE.format(piece)}}


def diff_blocks(diff: str) -> tuple[list[Block], str]:
    """Code blocks for as much of the diff as one modal holds, and the part of it they show."""
    blocks: list[Block] = []
    shown: list[str] = []
    size = 0
    for piece in full_text.chunks(diff):
        block = _block(piece)
        cost = len(json.dumps(block, ensure_ascii=False).encode())
        if len(blocks) + _HEAD_BLOCKS >= full_text.MAX_MODAL_BLOCKS or size + cost > _BYTE_BUDGET:
            break
        blocks.append(block)
        shown.append(_shown(piece))
        size += cost
    return blocks, "".join(shown)


def _lines(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def diff_modal(request_id: str, diff: str, recorded: str | None) -> Block:
    """`views.open` payload (callback `ids.DIFF_MODAL`, metadata = request id)."""
    rid = code(request_id, 80)
    problem = diff_problem(diff, recorded)
    if problem is not None:
        blocks = [
            section(f"⚠️ *This diff cannot be shown in Slack*: {problem}."),
            section(full_text.inspect_hint(request_id)),
            context(f"Request {rid}"),
        ]
        return modal(ids.DIFF_MODAL, "Diff", blocks, private_metadata=request_id[:3000])
    code_blocks, shown = diff_blocks(diff)
    total = _lines(diff)
    head = [
        section(f"*The diff this approval binds* · {total:,} line{'s' if total != 1 else ''}"),
        context(f"sha256 `{sha256(diff)}` · request {rid}"),
    ]
    tail: list[Block] = []
    if len(shown) < len(diff):
        complete = shown.count("\n")
        tail.append(
            section(
                f"✂️ *Cut here*: shown are the first {len(shown):,} of {len(diff):,} characters "
                f"(lines 1–{complete:,} whole, of {total:,}). The rest: {full_text.inspect_hint(request_id)}"
            )
        )
    blocks = [*head, *code_blocks, *tail]
    return modal(ids.DIFF_MODAL, "Diff", blocks, private_metadata=request_id[:3000])
