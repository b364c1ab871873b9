"""Programs that run another program: project runners (`uv run`, `poetry run`, `npx`) and the files
a wrapper's own options write (`time -o`).
"""

from __future__ import annotations

from dataclasses import replace

from approvals.permissions.shell.script import Redirect
from approvals.permissions.shell.words import Word

# Project runners that run a local program (`uv run pytest`, `poetry run pytest`, `npx tsc`). Only
# the option spellings here keep them local; any other option (`--with`, `-p pkg`, `--yes`) may
# download code, so the runner is judged as itself (egress).
_RUNNER_OPTIONS: dict[str, frozenset[str]] = {
    "uv": frozenset(
        {"--frozen", "--locked", "--offline", "--no-sync", "-q", "--quiet", "--all-extras", "--no-dev",
         "--dev", "--active", "--no-project"}
    ),
    "poetry": frozenset({"-q", "--quiet", "--no-interaction", "-n"}),
    "npx": frozenset({"--no-install", "--no", "--offline", "--prefer-offline", "-q", "--quiet"}),
}  # fmt: skip
# What `npx NAME` runs without a download when the project has it (the names of real packages, so a
# missing one fetches the well-known tool, never an arbitrary name the agent chose).
NPX_LOCAL_TOOLS = frozenset(
    """tsc prettier eslint jest vitest mocha ts-node tsx webpack rollup esbuild stylelint biome playwright
    cypress""".split()  # noqa: SIM905
)
RUNNERS = frozenset(_RUNNER_OPTIONS)


def runner_rest(name: str, words: tuple[Word, ...]) -> tuple[Word, ...] | None:
    """What `uv run …`, `poetry run …` or `npx …` runs locally; None when it may download code."""
    i = 1
    if name in ("uv", "poetry"):
        if len(words) < 2 or words[1].text != "run":
            return None
        i = 2
    options = _RUNNER_OPTIONS[name]
    while i < len(words) and words[i].text.startswith("-"):
        if words[i].text == "--":
            i += 1
            break
        if words[i].text not in options:
            return None
        i += 1
    rest = words[i:]
    if not rest or not all(w.plain for w in words[:i]) or not rest[0].plain:
        return None
    head = rest[0].text
    if name == "npx":
        local_only = any(w.text in ("--no-install", "--no") for w in words[1:i])
        if "@" in head or "/" in head or not (head in NPX_LOCAL_TOOLS or local_only):
            return None  # `npx pkg@1`, `npx some-unknown-pkg`: a download
    if name == "uv" and head.endswith(".py"):
        return (Word(text="python"), *rest)  # `uv run script.py` runs it with the project's python
    return rest


def wrapper_outputs(name: str, options: tuple[Word, ...]) -> tuple[Redirect, ...]:
    """Files a wrapper's own options write (`time -o f`, `time --output=f`), as redirects."""
    if name != "time":
        return ()
    found: list[Redirect] = []
    for i, word in enumerate(options):
        if word.text in ("-o", "--output") and i + 1 < len(options):
            found.append(Redirect(">", options[i + 1]))
        elif word.text.startswith("--output="):
            found.append(Redirect(">", replace(word, text=word.text[len("--output=") :])))
        elif word.text.startswith("-o") and len(word.text) > 2:
            found.append(Redirect(">", replace(word, text=word.text[2:])))
    return tuple(found)
