"""The hosts an egress action reaches, read from its text: what the sandbox's proxy may open.

Linear in the text (single-pass regexes without nested quantifiers, at most `MAX_HOSTS` names).
A host that cannot be read from the text is not guessed: an egress decision with no hosts opens
nothing, and its reason says so, so an approver never opens more than the request names.
"""

from __future__ import annotations

import re
from typing import Final

from approvals.permissions.model import URL, Action, normalise

MAX_HOSTS: Final = 16
_URL = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]{0,15}://(?:[^@/\s'\"]{0,256}@)?(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9.-]{1,253})"
)
_SCP = re.compile(r"(?:^|[\s'\"=])[A-Za-z0-9._-]{1,64}@([A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}):")
_WORD = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
# Package managers reach their default registries without naming them.
_REGISTRIES: Final[dict[str, tuple[str, ...]]] = {
    "pip": ("pypi.org", "files.pythonhosted.org"),
    "pip3": ("pypi.org", "files.pythonhosted.org"),
    "uv": ("pypi.org", "files.pythonhosted.org"),
    "poetry": ("pypi.org", "files.pythonhosted.org"),
    "npm": ("registry.npmjs.org",),
    "npx": ("registry.npmjs.org",),
    "pnpm": ("registry.npmjs.org",),
    "yarn": ("registry.yarnpkg.com", "registry.npmjs.org"),
    "cargo": ("crates.io", "index.crates.io", "static.crates.io"),
    "go": ("proxy.golang.org", "sum.golang.org"),
    "gem": ("rubygems.org",),
}


def egress_hosts(action: Action) -> tuple[str, ...]:
    """The host names `action` names or implies, lower-cased, in order of appearance, deduplicated."""
    text = action.target
    if action.kind == "fetch":  # the engine's own URL reading, the one its fetch rules judge
        url = normalise(text)
        return (url.host,) if isinstance(url, URL) and url.host else ()
    found: list[str] = [m.group(1) for m in _URL.finditer(text)]
    found += [m.group(1) for m in _SCP.finditer(text)]
    if action.kind == "command":
        for word in _WORD.findall(text[:4096]):
            found += _REGISTRIES.get(word, ())
    hosts: list[str] = []
    for host in found:
        name = host.strip("[]").rstrip(".").lower()
        if name and name not in hosts:
            hosts.append(name)
    return tuple(hosts[:MAX_HOSTS])


def hosts_note(hosts: tuple[str, ...]) -> str:
    """What the request says of the network it opens."""
    if not hosts:
        return "reaches: no host it names (the network opens to nothing)"
    return "reaches only: " + ", ".join(hosts)
