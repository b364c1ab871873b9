"""`fetch_url`: one HTTP GET, text only, size-capped, no redirects followed.

Redirects are reported rather than followed: the approver approved one URL, and a redirect to
another host is a different action that needs its own decision (pitfall 18, exact action), judged
and pinned again when the agent fetches it. The host is resolved once, refused unless every address
is public (the egress proxy's rule, `pin`), and the connection goes to exactly that address, with
the name kept for the Host header and TLS (SNI and certificate check), so a name resolving to
127.0.0.1 or a metadata address reaches nothing, even if it re-resolves between check and use.
"""

from __future__ import annotations

import httpx2

from orchestrator.tools.proxy import DEFAULT_EGRESS, EgressRefused, EgressRules, pin

_TEXTUAL = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")
_MAX_HEADERS_SHOWN = ("content-type", "content-length", "location")


async def fetch_text(url: str, *, timeout_s: float, limit: int, rules: EgressRules = DEFAULT_EGRESS) -> str:
    """GET `url` and return status, a few headers and at most `limit` bytes of a textual body."""
    try:
        target = httpx2.URL(url)
        host, port = target.host, target.port or (443 if target.scheme == "https" else 80)
    except (httpx2.InvalidURL, ValueError) as exc:
        return f"fetch failed: invalid URL: {exc}"
    try:
        address = await pin(host, port, resolver=rules.resolver, allow_private=rules.allow_private)
    except EgressRefused as exc:
        return f"fetch refused: {exc}"
    pinned = target.copy_with(host=address)
    headers = {"Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    # trust_env=False: no proxy, netrc or certificate overrides from the bot's environment.
    async with httpx2.AsyncClient(timeout=timeout_s, follow_redirects=False, trust_env=False) as client:
        try:
            request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
            response = await client.send(request, stream=True)
            try:
                head = _head(response)
                if response.is_redirect:
                    location = response.headers.get("location", "?")
                    return f"{head}\nredirect not followed: fetch {location} separately if you need it"
                content_type = response.headers.get("content-type", "").lower()
                if content_type and not content_type.startswith(_TEXTUAL):
                    return f"{head}\nnot a text document ({content_type}); body not shown"
                body, dropped, complete = await _read_capped(response, limit)
            finally:
                await response.aclose()
        except httpx2.HTTPError as exc:
            return f"fetch failed: {type(exc).__name__}: {exc}"
    text = body.decode(response.encoding or "utf-8", errors="replace")
    declared = response.headers.get("content-length", "")
    if not complete and declared.isdigit():
        dropped, complete = int(declared) - len(body), True
    marker = f"\n[truncated {'' if complete else 'at least '}{dropped} bytes]" if dropped else ""
    return f"{head}\n\n{text}{marker}"


def _head(response: httpx2.Response) -> str:
    lines = [f"HTTP {response.status_code} {response.reason_phrase}"]
    lines += [f"{name}: {response.headers[name]}" for name in _MAX_HEADERS_SHOWN if name in response.headers]
    return "\n".join(lines)


async def _read_capped(response: httpx2.Response, limit: int) -> tuple[bytes, int, bool]:
    """(first `limit` bytes, bytes dropped, whether the whole body was read)."""
    kept = bytearray()
    dropped = 0
    async for chunk in response.aiter_bytes():
        room = max(limit - len(kept), 0)
        kept += chunk[:room]
        dropped += len(chunk) - min(len(chunk), room)
        if dropped > limit * 16:  # stop downloading a huge body; the count is then a lower bound
            return bytes(kept), dropped, False
    return bytes(kept), dropped, True
