"""The six agent tools: JSON-schema specs, pydantic argument validation, actions, and execution.

Arguments from the model are validated once here (a trust boundary) into frozen models; the gate
hashes exactly that validated object, and `execute` runs exactly it. Every result is capped.
File tools write only inside the agent's own workspace; they read wherever the engine allowed.
Paths are opened component by component with `O_NOFOLLOW` from the resolved real path, so a
symlink swapped in after the engine judged the path cannot redirect the read or the write.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from approvals.permissions import Action, ActionKind
from orchestrator.llm.base import ToolSpec
from orchestrator.tools.beneath import open_real
from orchestrator.tools.fetch import fetch_text
from orchestrator.tools.limits import DEFAULT_LIMITS, Limits
from orchestrator.tools.proxy import DEFAULT_EGRESS, EgressRules
from orchestrator.tools.sandbox import Sandbox, SandboxSpec

_MAX_SEARCH_FILE = 2_000_000  # bytes; larger files are skipped by search_files
_MAX_LINE = 400  # characters of one matching line shown by search_files
_MAX_READ = 10_000_000  # bytes read_file loads before windowing and capping
_PATH_MAX = 4096
_NAME_MAX = 255


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    @field_validator("*")
    @classmethod
    def _clean_text(cls, value: Any) -> Any:
        """Every string: no NUL byte and valid Unicode (a lone surrogate cannot be encoded)."""
        if isinstance(value, str):
            if "\x00" in value:
                raise ValueError("contains a NUL byte")
            try:
                value.encode()
            except UnicodeEncodeError:
                raise ValueError("is not valid Unicode (a lone surrogate)") from None
        return value

    @field_validator("path", check_fields=False)
    @classmethod
    def _path_fits(cls, value: str) -> str:
        """A path the kernel can take: at most PATH_MAX bytes, each component at most NAME_MAX."""
        encoded = value.encode(errors="replace")
        if len(encoded) >= _PATH_MAX:
            raise ValueError(f"is longer than {_PATH_MAX - 1} bytes")
        if any(len(part) > _NAME_MAX for part in encoded.split(b"/")):
            raise ValueError(f"has a component longer than {_NAME_MAX} bytes")
        return value


class ReadFileArgs(_Args):
    """Read a text file (relative paths are inside your workspace)."""

    path: str = Field(min_length=1, max_length=4096)
    start_line: int = Field(default=1, ge=1, description="First line to return (1-based).")
    max_lines: int | None = Field(default=None, ge=1, description="How many lines; default: to the end.")


class WriteFileArgs(_Args):
    """Create or overwrite a file in your workspace with the given content."""

    path: str = Field(min_length=1, max_length=4096)
    content: str = Field(max_length=5_000_000)


class ListFilesArgs(_Args):
    """List a directory (default: your workspace root)."""

    path: str = Field(default=".", min_length=1, max_length=4096)
    recursive: bool = False
    max_entries: int = Field(default=500, ge=1, le=5000)


class SearchFilesArgs(_Args):
    """Search file contents for a regular expression (or a literal string with regex=false)."""

    pattern: str = Field(min_length=1, max_length=1000)
    path: str = Field(default=".", min_length=1, max_length=4096)
    glob: str | None = Field(default=None, description="Only files whose name matches, e.g. '*.py'.")
    regex: bool = True
    ignore_case: bool = False
    max_results: int = Field(default=200, ge=1, le=2000)


class RunCommandArgs(_Args):
    """Run a bash command in your workspace, sandboxed (no network unless approved)."""

    command: str = Field(min_length=1, max_length=20_000)


class FetchUrlArgs(_Args):
    """Fetch a web page or text document with HTTP GET (needs approval)."""

    url: str = Field(min_length=8, max_length=4096)

    @field_validator("url")
    @classmethod
    def _http_only(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value) or any(c.isspace() for c in value):
            raise ValueError("url must be an absolute http:// or https:// URL without spaces")
        return value


TOOL_ARGS: dict[str, type[_Args]] = {
    "read_file": ReadFileArgs,
    "write_file": WriteFileArgs,
    "list_files": ListFilesArgs,
    "search_files": SearchFilesArgs,
    "run_command": RunCommandArgs,
    "fetch_url": FetchUrlArgs,
}
TOOL_NAMES = frozenset(TOOL_ARGS)


class ToolArgumentError(ValueError):
    """The model's arguments do not fit the tool; the message goes back to the model."""


def tool_specs() -> list[ToolSpec]:
    """The specs offered to the model, one per tool, with the pydantic models' JSON schemas.

    Built once per process: every agent turn offers them, and pydantic's schema generation costs
    about a millisecond per tool (a hundred resumed runs pay it hundreds of times a second).
    """
    return list(_specs())


@functools.cache
def _specs() -> tuple[ToolSpec, ...]:
    return tuple(
        ToolSpec(name=name, description=(model.__doc__ or name).strip(), parameters=_schema(model))
        for name, model in TOOL_ARGS.items()
    )


def _schema(model: type[_Args]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def parse_args(tool: str, arguments: Mapping[str, Any]) -> _Args:
    """Validate the model's arguments; raise `ToolArgumentError` with a message the model can act on."""
    model = TOOL_ARGS.get(tool)
    if model is None:
        raise ToolArgumentError(f"unknown tool {tool!r}; available: {', '.join(sorted(TOOL_ARGS))}")
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
        )
        raise ToolArgumentError(f"invalid arguments for {tool}: {problems}") from None


def resolve(raw: str, workspace: Path) -> Path:
    """An absolute, normalised path (`~` expanded, relative to the workspace); symlinks untouched."""
    expanded = os.path.expanduser(raw) if raw.startswith("~") else raw
    return Path(os.path.normpath(workspace / expanded))


def pin(args: _Args, workspace: Path) -> str | None:
    """The real path (symlinks resolved) a file tool will touch, fixed before it is judged."""
    if isinstance(args, ReadFileArgs | ListFilesArgs | SearchFilesArgs | WriteFileArgs):
        return os.path.realpath(resolve(args.path, workspace))
    return None


def actions_for(args: _Args, workspace: Path, *, real: str | None = None) -> tuple[Action, ...]:
    """What the engine judges for a call; commands carry their own reads and writes in the text.

    When a path goes through a symlink, its pinned real path is judged too (and shown to the
    approver), and execution opens exactly that real path: a link swapped later changes nothing.
    """
    match args:
        case ReadFileArgs() | ListFilesArgs() | SearchFilesArgs() | WriteFileArgs():
            kind: ActionKind = "write" if isinstance(args, WriteFileArgs) else "read"
            given = str(resolve(args.path, workspace))
            targets = [given] if real in (None, given) else [given, str(real)]
            return tuple(Action(kind=kind, target=target) for target in targets)
        case RunCommandArgs():
            return (Action(kind="command", target=args.command),)
        case FetchUrlArgs():
            return (Action(kind="fetch", target=args.url),)
    raise ToolArgumentError(f"no actions for {type(args).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEnv:
    """Where one agent's tools act: its workspace, its peers' (read-only), the sandbox, the limits."""

    workspace: Path
    peers: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    sandbox: Sandbox = field(default_factory=Sandbox)
    command_timeout_s: float = 120.0
    output_limit: int = 65536
    fetch_timeout_s: float = 30.0
    egress: EgressRules = DEFAULT_EGRESS  # how fetch_url resolves and which addresses it may reach
    limits: Limits = DEFAULT_LIMITS  # what one command's process tree may use


def cap(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, with a clear marker saying how much was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit].decode(errors="ignore") + f"\n[truncated {len(data) - limit} bytes]"


async def execute(
    args: _Args, env: ToolEnv, *, network: bool = False, real: str | None = None, hosts: tuple[str, ...] = ()
) -> str:
    """Run a validated, permitted call (file tools on the pinned `real` path); may raise `OSError`.

    With `network`, a command reaches only `hosts` (the approval's), through the egress proxy.
    """
    if real is None:
        real = pin(args, env.workspace)
    match args:
        # File tools run in a thread: a search over a big tree must not stall the other agents.
        case ReadFileArgs():
            return cap(await asyncio.to_thread(read_file, args, env, real), env.output_limit)
        case WriteFileArgs():
            return await asyncio.to_thread(write_file, args, env, real)
        case ListFilesArgs():
            return cap(await asyncio.to_thread(list_files, args, env, real), env.output_limit)
        case SearchFilesArgs():
            return cap(await asyncio.to_thread(search_files, args, env, real), env.output_limit)
        case RunCommandArgs():
            spec = SandboxSpec(
                workspace=env.workspace,
                read_only=env.peers,
                hidden=env.hidden,
                network=network,
                hosts=hosts,
                limits=env.limits,
                timeout_s=env.command_timeout_s,
                output_limit=env.output_limit,
            )
            return (await env.sandbox.run(args.command, spec)).render()
        case FetchUrlArgs():
            limit = env.output_limit
            return await fetch_text(args.url, timeout_s=env.fetch_timeout_s, limit=limit, rules=env.egress)
    raise ToolArgumentError(f"cannot execute {type(args).__name__}")


# --- file access without following symlinks ------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _roots(env: ToolEnv) -> tuple[str, ...]:
    return (str(env.workspace), *map(str, env.peers))


def _inside(real: str, root: Path) -> bool:
    top = os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def _display(real: str, env: ToolEnv) -> str:
    """Paths inside the workspace are shown relative to it, others absolute."""
    top = os.path.realpath(env.workspace)
    return os.path.relpath(real, top) if _inside(real, env.workspace) else real


def read_file(args: ReadFileArgs, env: ToolEnv, real: str | None = None) -> str:
    """Text content (optionally a line window); binary files are reported, not dumped."""
    real = real or os.path.realpath(resolve(args.path, env.workspace))
    fd = open_real(real, os.O_RDONLY, roots=_roots(env))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise IsADirectoryError(f"{args.path} is not a regular file (use list_files for directories)")
        data = handle.read(_MAX_READ)
        size = os.fstat(handle.fileno()).st_size
    if b"\x00" in data[:8192]:
        return f"{args.path} is a binary file ({size} bytes); not shown"
    text = data.decode(errors="replace")
    if args.start_line > 1 or args.max_lines is not None:
        lines = text.splitlines(keepends=True)
        end = None if args.max_lines is None else args.start_line - 1 + args.max_lines
        text = "".join(lines[args.start_line - 1 : end])
    return text if text else f"{args.path} is empty"


def write_file(args: WriteFileArgs, env: ToolEnv, real: str | None = None) -> str:
    """Write inside the own workspace only (checked on the real path, so symlinks cannot lead out)."""
    target = resolve(args.path, env.workspace)
    real = real or os.path.realpath(target)  # a link to a file inside the workspace is fine, outside not
    if not _inside(real, env.workspace) or real == os.path.realpath(env.workspace):
        raise PermissionError(f"refused: write_file writes only inside your own workspace, not {target}")
    data = args.content.encode()
    fd = open_real(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, roots=_roots(env), create_dirs=True)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return f"wrote {len(data)} bytes to {_display(real, env)}"


def _walk(fd: int, prefix: str, recursive: bool) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) for every entry below the directory `fd`; never enters links or `.git`."""
    names = sorted(os.listdir(fd))
    for name in names:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        rel = f"{prefix}{name}"
        yield rel, info
        if recursive and stat.S_ISDIR(info.st_mode) and name != ".git":
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                yield from _walk(child, f"{rel}/", recursive)
            finally:
                os.close(child)


def list_files(args: ListFilesArgs, env: ToolEnv, real: str | None = None) -> str:
    """One entry per line: `dir/`, `file (N bytes)`, `link -> target`."""
    real = real or os.path.realpath(resolve(args.path, env.workspace))
    fd = open_real(real, _DIR_FLAGS, roots=_roots(env))
    lines: list[str] = []
    try:
        for rel, info in _walk(fd, "", args.recursive):
            if len(lines) >= args.max_entries:
                lines.append(f"[stopped after {args.max_entries} entries]")
                break
            if stat.S_ISDIR(info.st_mode):
                lines.append(f"{rel}/")
            elif stat.S_ISLNK(info.st_mode):
                lines.append(f"{rel} -> (symlink)")
            else:
                lines.append(f"{rel} ({info.st_size} bytes)")
    finally:
        os.close(fd)
    return "\n".join(lines) if lines else f"{args.path} is empty"


def search_files(args: SearchFilesArgs, env: ToolEnv, real: str | None = None) -> str:
    """`path:line: text` for each matching line of each text file under `path`."""
    flags = re.IGNORECASE if args.ignore_case else 0
    try:
        needle = re.compile(args.pattern if args.regex else re.escape(args.pattern), flags)
    except re.error as exc:
        return f"invalid regular expression: {exc}"
    real = real or os.path.realpath(resolve(args.path, env.workspace))
    fd = open_real(real, _DIR_FLAGS, roots=_roots(env))
    hits: list[str] = []
    try:
        for rel, info in _walk(fd, "", True):
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SEARCH_FILE:
                continue
            if args.glob and not fnmatch.fnmatch(os.path.basename(rel), args.glob):
                continue
            hits += _search_one(
                os.path.join(real, rel), rel, needle, args.max_results - len(hits), _roots(env)
            )
            if len(hits) >= args.max_results:
                hits.append(f"[stopped after {args.max_results} matches]")
                break
    finally:
        os.close(fd)
    return "\n".join(hits) if hits else "no matches"


def _search_one(real: str, rel: str, needle: re.Pattern[str], room: int, roots: tuple[str, ...]) -> list[str]:
    try:
        fd = open_real(real, os.O_RDONLY, roots=roots)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(_MAX_SEARCH_FILE + 1)
    if b"\x00" in data[:8192]:
        return []
    found: list[str] = []
    for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
        if needle.search(line):
            found.append(f"{rel}:{number}: {line[:_MAX_LINE]}")
            if len(found) >= room:
                break
    return found
