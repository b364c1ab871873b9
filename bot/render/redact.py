"""Remove secrets from text before it is posted to Slack (applied to everything we show).

Patterns cover the credentials an agent is most likely to print: provider API keys, Slack and
GitHub tokens, AWS keys, PEM private keys, `Authorization: Bearer …` values and passwords in URLs
or query strings. Each match becomes `[redacted <kind>]`, so readers still see that something
was there. False positives cost a little readability; a leaked key costs a rotation.
"""

from __future__ import annotations

import re

_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "private key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S
        ),
        "{m}",
    ),
    ("anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}"), "{m}"),
    ("openai key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), "{m}"),
    ("slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"), "{m}"),
    ("slack app token", re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"), "{m}"),
    ("github token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})"), "{m}"),
    ("aws key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), "{m}"),
    (
        "aws secret",
        re.compile(r"(?i)(aws_?secret_?(?:access_?)?key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40,}"),
        r"\1{m}",
    ),
    ("bearer token", re.compile(r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1{m}"),
    ("url password", re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(@)", re.I), r"\1{m}\2"),
    (
        "secret parameter",
        re.compile(
            r"(?i)((?:[?&;]|\b)(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?token)=)[^&\s#\"']+"
        ),
        r"\1{m}",
    ),
)


# Substrings, one of which every match of the pattern of that kind holds once case-folded: a text
# holding none of a kind's is not scanned for it (each scan of 64 KB costs about 2 ms).
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "private key": ("-----begin",),
    "anthropic key": ("sk-ant-",),
    "openai key": ("sk-",),
    "slack token": ("xox",),
    "slack app token": ("xapp-",),
    "github token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "aws key id": ("akia", "asia"),
    "aws secret": ("aws",),
    "bearer token": ("bearer", "basic"),
    "url password": ("://",),
    "secret parameter": ("=",),
}


def redact(text: str) -> str:
    """Replace every secret-looking substring with `[redacted <kind>]`, keeping labels like `Bearer `."""
    folded = text.casefold()
    for kind, pattern, template in _PATTERNS:
        if any(trigger in folded for trigger in _TRIGGERS[kind]):
            text = pattern.sub(template.replace("{m}", f"[redacted {kind}]"), text)
    return text


def redact_every_pattern(text: str) -> str:
    """`redact` without the triggers (each pattern scans the whole text): what it must equal."""
    for kind, pattern, template in _PATTERNS:
        text = pattern.sub(template.replace("{m}", f"[redacted {kind}]"), text)
    return text
