"""Links in mrkdwn: what becomes clickable, and what a label may claim."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from bot.render.escape import escape

_SAFE_URL = re.compile(r"(?:https?://|mailto:)[^\s<>|]+", re.IGNORECASE)


def _host(url: str) -> str:
    """Where a link really goes: the host of a web link, the address of a mailto."""
    if url.lower().startswith("mailto:"):
        return url[len("mailto:") :]
    try:
        return (urlsplit(url).hostname or url).lower()
    except ValueError:  # "https://[" is no URL at all: show it whole
        return url.lower()


def link(label: str, url: str) -> str:
    """`<url|label>` for a web or mail link, else the label with its target as plain text."""
    text = escape(label).replace("|", "¦")
    if _SAFE_URL.fullmatch(url):
        # A label can claim any destination ("[paypal.com](https://evil.test)"): unless it is the
        # link's own host or URL, the real host is shown beside it.
        host = _host(url)
        plain_label = label.strip().lower().removeprefix("https://").removeprefix("http://").rstrip("/")
        if plain_label not in {
            host,
            url.lower().removeprefix("https://").removeprefix("http://").rstrip("/"),
        }:
            text = f"{text} ({escape(host)})"
        return f"<{url.replace('&', '&amp;')}|{text}>"
    return f"{text} ({escape(url)})"  # not a web link: show it, do not make it clickable
