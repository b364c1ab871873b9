"""Judging a `command(<shell text>)` action: floor, rules, boundaries and risk for every part."""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from approvals.permissions.boundaries import Boundary, path_finding, within
from approvals.permissions.budget import TooComplex, spend
from approvals.permissions.commands.environment import (
    assignments,
    computed_export,
    exported_names,
    judge_assignment,
    nameref,
)
from approvals.permissions.commands.option_values import option_values, wildcard_covers
from approvals.permissions.commands.secret_readers import broad_search, computed_names, listing_reader
from approvals.permissions.commands.stored_values import input_assigned, sensitive, stored_commands
from approvals.permissions.commands.written_code import (
    compiles,
    loaded,
    matches,
    runs_listed_code,
    shebang_kind,
    written,
    written_commands,
)
from approvals.permissions.floor import invocation_floor, lexical_floor
from approvals.permissions.model import Finding, Layer, RiskInfo, Verdict
from approvals.permissions.policy import Bucket, Rule, RuleSet
from approvals.permissions.risk import WORKSPACE_PROGRAM, classify
from approvals.permissions.shell.accesses import accesses, uses_cwd
from approvals.permissions.shell.invocation import Expansion, Invocation, expand
from approvals.permissions.shell.programs import LIST_CONSUMERS
from approvals.permissions.shell.words import UNKNOWN

_SECRET_VARIABLE = re.compile(
    r"(KEY|TOKEN|SECRET|PASS|PASSWD|PASSWORD|CRED|AUTH|PRIVATE|SESSION|COOKIE|SIGNATURE|CERT|DSN|"
    r"DATABASE_URL|CONN)",
    re.I,
)
_BENIGN_VARIABLES = frozenset(
    """
    HOME PWD OLDPWD PATH USER LOGNAME SHELL LANG LC_ALL TERM HOSTNAME TMPDIR PYTHONPATH VIRTUAL_ENV
    CI RANDOM LINENO SECONDS BASH_VERSION EDITOR PAGER GOPATH GOROOT NODE_ENV ? ! $ # @ * - _ 0 1 2
    3 4 5 6 7 8 9
    """.split()  # noqa: SIM905
)
_LITERAL = re.compile(r"""(['"])([^'"\n]{1,300})\1""")
_PRINTERS = frozenset({"echo", "printf", "print", "cat", "tee", "logger", "wall", "write"})
# Directories one invocation may run in after `cd`s that may have failed; more is refused.
_MAX_CWDS = 32
_DELETERS = frozenset({"rm", "rmdir", "mv", "shred", "unlink", "chmod", "chown", "chgrp"})
_LIST_SOURCES = frozenset({"find", "fd", "ls", "git", "grep", "rg", "echo", "printf"})


@dataclass(frozen=True, slots=True)
class CommandJudge:
    """Judges shell text against a boundary and a rule set."""

    boundary: Boundary
    rules: RuleSet

    def judge(self, text: str) -> Iterator[Finding]:
        """Every finding for one command action (the engine takes the worst)."""
        if not text.strip():
            yield Finding("deny", "medium", "policy", "empty command")
            return
        expansion = expand(text)
        cwds = list(self._cwds(expansion))
        floor = self._floor(text, expansion, cwds)
        if floor is not None:
            yield floor
            return
        for problem in expansion.problems:
            yield Finding("ask", "high", "risk", f"not plain words: {problem}", broad=True)
        # Deny and ask rules also see the whole text, so a rule like `command(* | sh)` is not dead.
        whole = {" ".join(text.split())}
        for bucket in ("deny", "ask"):
            rule = self._first(bucket, whole)
            if rule is not None:
                yield Finding(bucket, "medium", "rule", f"{bucket} rule {rule.text}", rule=rule.text)
                break
        if not expansion.invocations and not expansion.problems:
            yield Finding("allow", "low", "risk", "no command to run")
        exported = exported_names(expansion.invocations)
        find_argv: tuple[str, ...] | None = None
        # `read x`, `printf -v x`, `mapfile x` set shell variables too (shown later, not secrets).
        local = expansion.local_names | {n for i in expansion.invocations for n in input_assigned(i)}
        made = self._made(expansion, cwds)
        for inv, candidates in zip(expansion.invocations, cwds, strict=True):
            yield from self._invocation(inv, candidates, local, made)
            yield from self._environment(inv, candidates, exported)
            find_argv = inv.argv if inv.program == "find" and not inv.extra_args else find_argv
            yield from self._contents(inv, find_argv)
        yield from self._written_then_run(expansion, cwds)
        yield from self._stored(text, expansion)
        if _dotglob(expansion):
            reason = "dotglob makes globs match hidden files such as .env"
            yield Finding("ask", "high", "boundary", reason, sensitive=True)

    def _made(self, expansion: Expansion, cwds: list[frozenset[str]]) -> frozenset[str]:
        """Files this command writes with literal text, or compiles: running them is judged by that text."""
        made: set[str] = set()
        for inv, candidates in zip(expansion.invocations, cwds, strict=True):
            for cwd in candidates - {UNKNOWN} or {self.boundary.workspace}:
                absolute = functools.partial(self.boundary.absolute, cwd=cwd)
                made.update(item.path for item in written(inv, absolute) if item.text is not None)
                if compiles(inv):
                    outputs = {absolute(a.text) for a in accesses(inv) if a.write and UNKNOWN not in a.text}
                    # `make && ./app`, `cargo build && ./target/debug/app`: outputs the build decides.
                    made.update(outputs or {"*"})
        return frozenset(made)

    def _stored(self, text: str, expansion: Expansion) -> Iterator[Finding]:
        """Stored subscripts an arithmetic context runs, and sensitive variables set by `read` and kin."""
        for inv in expansion.invocations:
            for name in input_assigned(inv):
                if sensitive(name):
                    reason = f"{inv.program} sets {name}, which changes what later commands run or load"
                    yield Finding("ask", "high", "risk", reason, broad=True)
        commands = stored_commands(text)
        if commands is not None:
            reason = "a stored value holds a command that an arithmetic context runs (a[$(…)])"
            yield Finding("ask", "high", "risk", reason, broad=True)
            for command in commands:
                yield from self.judge(command)

    def _written_then_run(self, expansion: Expansion, cwds: list[frozenset[str]]) -> Iterator[Finding]:
        """A file written and then run or read as configuration in the same command (written_code.py)."""
        files: dict[str, list[str | None]] = {}
        for inv, candidates in zip(expansion.invocations, cwds, strict=True):
            places = sorted(candidates - {UNKNOWN}) or [self.boundary.workspace]
            if files and runs_listed_code(inv):
                reason = f"{inv.program} runs files a listing names, after this command wrote some"
                yield Finding("ask", "high", "risk", reason, broad=True)
            if files:
                spend(3 * len(files) * len(places), "files written then run")
            for cwd in places if files else ():
                absolute = functools.partial(self.boundary.absolute, cwd=cwd)
                for load, kind in loaded(inv, absolute):
                    for path, texts in files.items():
                        if path == "*" and inv.program == "git":
                            continue  # git never applies a patch to its own configuration
                        if matches(path, load):
                            yield from self._judge_written(inv, posixpath.basename(path), kind, texts)
            for cwd in places:
                for item in written(inv, functools.partial(self.boundary.absolute, cwd=cwd)):
                    files.setdefault(item.path, []).append(item.text)

    def _judge_written(
        self, inv: Invocation, name: str, kind: str, texts: list[str | None]
    ) -> Iterator[Finding]:
        if any(t is None for t in texts):
            what = "applies a patch" if name == "*" else f"writes {name}"
            reason = f"{what}, then {inv.program} runs or reads it: what it will run is not shown"
            yield Finding("ask", "high", "risk", reason, broad=True)
            return
        text = "\n".join(t for t in texts if t is not None)
        kind = shebang_kind(text) if kind == "script" else kind
        for command in written_commands(inv, name, kind, text):
            if command.startswith("ask:"):
                yield Finding("ask", "high", "risk", command[4:], broad=True)
            else:
                yield from self.judge(command)

    def _workspace_script(self, path: str) -> bool:
        """A file inside the workspace that starts with `#!` (a script, not a binary)."""
        if not within(path, self.boundary.workspace):
            return False
        try:
            with open(path, "rb") as handle:
                return handle.read(2) == b"#!"
        except OSError:
            return False

    def _workspace_module(self, name: str) -> bool:
        """`app` is `app.py` or a package `app/` in the workspace (or under `src/`)."""
        root = self.boundary.workspace
        return any(
            os.path.exists(posixpath.join(root, base, name + suffix))
            for base in ("", "src")
            for suffix in (".py", "/__init__.py")
        )

    def _contents(self, inv: Invocation, find_argv: tuple[str, ...] | None) -> Iterator[Finding]:
        """Readers judged by what they read (secret_readers.py): listings fed to them, recursive searches."""
        reason = listing_reader(inv, find_argv) or broad_search(inv) or computed_names(inv)
        if reason is not None:
            yield Finding("ask", "high", "boundary", f"{reason} (may include secrets)", sensitive=True)
        if "xargs" in inv.wrappers and inv.command.stdin in ("heredoc", "herestring") and inv.command.heredoc:
            for name in inv.command.heredoc.split()[:64]:
                yield path_finding(self.boundary, self.rules, name, write=False)

    def _environment(
        self, inv: Invocation, cwds: frozenset[str], exported: tuple[frozenset[str], bool]
    ) -> Iterator[Finding]:
        """Every assignment the program sees, judged by what its name controls (environment.py)."""
        head = inv.words[0].text if inv.words else ""
        if "=" in head and head.split("=", 1)[0].isidentifier():
            # `time CC=/tmp/x make`: bash reads the word as an assignment to the program after it.
            yield Finding("ask", "high", "risk", f"an assignment ({head.split('=', 1)[0]}=…) after a wrapper")
        for found in (computed_export(inv), nameref(inv)):
            if found is not None:
                yield found
        for assignment in assignments(inv, *exported):
            for cwd in sorted(cwds):
                yield from judge_assignment(assignment, self.judge, functools.partial(self._place, cwd=cwd))

    def _place(self, text: str, write: bool, *, cwd: str) -> Finding:
        return path_finding(self.boundary, self.rules, text, write=write, cwd=cwd)

    def _cwds(self, expansion: Expansion) -> Iterator[frozenset[str]]:
        """The directories each invocation may run in, following `cd` (UNKNOWN after `cd $X`).

        A flat list cannot tell which `cd` a subshell or a nested `bash -c` undoes, or whether a
        `cd` before `;` or `||` failed, so every directory seen so far stays a candidate and each
        path is judged against all of them. Only in a plain `a && cd x && b` chain is the directory
        exactly the last `cd` target (and then only while no symlink is involved).
        """
        cwds = {self.boundary.workspace}
        landing: set[str] = set()
        exact = expansion.and_chain
        for inv in expansion.invocations:
            yield frozenset(cwds)
            if inv.program in ("cd", "pushd", "chdir") and "CDPATH" in inv.wrappers:
                # A CDPATH place is one more place the `cd` that follows may land in.
                landing |= {self._cd_target(inv, c) for c in cwds}
                continue
            if inv.program in ("cd", "pushd", "chdir"):
                moved = {self._cd_target(inv, c) for c in cwds} | landing
                landing = set()
                exact = exact and all(c == UNKNOWN or self.boundary.is_real(c) for c in moved)
                cwds = moved if exact else cwds | moved
                if len(cwds) > _MAX_CWDS:
                    # Each path is judged in every candidate: past the cap, refuse (never drop one).
                    raise TooComplex(f"cd tracking over {_MAX_CWDS} possible directories")
                spend(50 * len(cwds), "cd tracking")
            elif inv.program == "popd":
                cwds.add(UNKNOWN)
                exact = False

    def _cd_target(self, inv: Invocation, cwd: str) -> str:
        """Where `cd ARGS` run in `cwd` goes (UNKNOWN when computed, for `cd -` and from UNKNOWN)."""
        operands = [a for a in inv.argv[1:] if not a.startswith("-") or a == "-"]
        if not operands:
            return self.boundary.home
        if cwd == UNKNOWN or UNKNOWN in operands[0] or operands[0] == "-":  # `cd -`: the previous one
            return UNKNOWN
        return self.boundary.absolute(operands[0], cwd)

    def _floor(self, text: str, expansion: Expansion, cwds: list[frozenset[str]]) -> Finding | None:
        home = self.boundary.home
        reason = "fork bomb" if expansion.fork_bomb else None
        for inv, candidates in zip(expansion.invocations, cwds, strict=True):
            for cwd in sorted(candidates - {UNKNOWN}):
                if reason is None:
                    resolve = lambda t, b=cwd: self.boundary.absolute(t, b)  # noqa: E731
                    reason = invocation_floor(inv, resolve, home, self.boundary.workspace)
        if reason is None and (expansion.parse_error or expansion.problems):
            reason = lexical_floor(text, self.boundary.absolute, home, unquoted=expansion.parse_error)
        if reason is None:
            return None
        return Finding("deny", "critical", "floor", reason, broad=True)

    def _invocation(
        self, inv: Invocation, cwds: frozenset[str], local_names: frozenset[str], made: frozenset[str]
    ) -> Iterator[Finding]:
        info = classify(inv)
        if info.reason == WORKSPACE_PROGRAM and inv.words:
            # `gcc -o app main.c && ./app`, `printf … > x.sh && ./x.sh`: the program was made here
            # (compiled from workspace sources, or its literal text judged by _written_then_run).
            places = cwds - {UNKNOWN} or {self.boundary.workspace}
            program = {self.boundary.absolute(inv.words[0].text, c) for c in places}
            if ("*" in made and all(within(p, self.boundary.workspace) for p in program)) or program <= made:
                info = replace(info, risk="low", reason="runs a program this command wrote or compiled")
            elif all(self._workspace_script(p) for p in program):
                # `script/test`: a text script with a shebang is `sh script/test`, judged like one.
                info = replace(info, risk="low", reason="runs a script from the workspace")
        if info.imports and all(self._workspace_module(m) for m in info.imports):
            info = replace(info, risk="low", reason="python code that imports the workspace's own modules")
        yield self._rules(inv, info)
        for problem in inv.problems:
            yield Finding("ask", "high", "risk", f"{inv.program}: {problem}", broad=True)
        for cwd in sorted(cwds):
            if cwd != self.boundary.workspace and uses_cwd(inv):
                # `cd ~/.ssh && ls`, `cd /tmp/x && make`: the directory itself is read (or worse).
                yield path_finding(self.boundary, self.rules, ".", write=False, cwd=cwd)
                if cwd != UNKNOWN and _reads_recursively(inv) and self.boundary.holds_secrets(cwd):
                    yield Finding(
                        "ask", "high", "boundary", f"searches {cwd}, which holds secrets", sensitive=True
                    )
            yield from self._paths(inv, cwd)
            yield from self._option_values(inv, cwd)
            # Paths named in inline code (`open('.env')`) are judged like any other read.
            for literal in _LITERAL.findall(inv.inline_code or ""):
                text = literal[1]
                if text and UNKNOWN not in text and (text.startswith(("/", "~", "..")) or "." in text):
                    yield path_finding(self.boundary, self.rules, text, write=False, cwd=cwd)
        yield from self._variables(inv, local_names)
        if (
            inv.extra_args
            and "xargs" in inv.wrappers
            and inv.program in _DELETERS | {"cp", "tee", "truncate"}
        ) and not self._upstream_inside(inv):
            yield Finding("ask", "high", "boundary", f"{inv.program} acts on paths read from its input")

    def _option_values(self, inv: Invocation, cwd: str) -> Iterator[Finding]:
        """Option values naming a URL (data sent out, code fetched) or an outside path (option_values.py)."""
        for option, value in option_values(inv):
            if value.kind == "url":
                reason = f"option {option} names a remote address ({value.text[:80]})"
                yield Finding("ask", "high", "risk", reason, egress=True, broad=True)
            elif value.kind == "egress":
                yield Finding(
                    "ask", "high", "risk", f"option {option} sends data out", egress=True, broad=True
                )
            else:
                yield path_finding(self.boundary, self.rules, value.text, write=True, cwd=cwd)

    def _rules(self, inv: Invocation, info: RiskInfo) -> Finding:
        texts = {inv.text, _canonical(inv)}
        verdict: Verdict = "allow" if info.risk == "low" else "ask"
        layer: Layer = "risk"
        reason = info.reason
        # Deny and ask rules also see the words as written, wrappers and runners included, so
        # `deny: command(npx *)` still holds for `ls; npx tsc` (the runner is stripped for risk).
        written = texts | {" ".join(w.text for w in inv.command.words).replace(UNKNOWN, "$?")}
        rule = self._first("deny", written) or self._first("ask", written)
        if rule is None and not inv.problems:
            # A wildcard rule never approves code handed over inline (`python -c`, `git -c`, awk system).
            hands_code = inv.inline_code is not None or info.runs_code
            allow = (
                r
                for r in self.rules.of("allow", "command")
                if not (
                    r.has_wildcard
                    and (hands_code or not wildcard_covers(r.pattern, inv, info.risk, info.side_effect))
                )
            )
            rule = next((r for r in allow if r.matches_command(inv.text)), None)
        if rule is not None:
            verdict, layer, reason = rule.bucket, "rule", f"{rule.bucket} rule {rule.text}"
        if info.secret and verdict != "deny":
            verdict, layer, reason, rule = "ask", "boundary", info.reason, None
        return Finding(
            verdict, info.risk, layer, reason, rule=rule.text if rule else None, sensitive=info.secret,
            egress=info.egress, side_effect=info.side_effect, broad=info.broad,
        )  # fmt: skip

    def _first(self, bucket: Bucket, texts: set[str]) -> Rule | None:
        return next((r for r in self.rules.of(bucket, "command") if any(map(r.matches_command, texts))), None)

    def _paths(self, inv: Invocation, cwd: str) -> Iterator[Finding]:
        recursive = _reads_recursively(inv)
        listed = _reads_listing(inv)
        for access in accesses(inv):
            if listed and (
                (access.text == UNKNOWN and access.mode == "read")
                or (inv.program == "git" and UNKNOWN in access.text)
            ):
                continue  # workspace names or a revision, printed by a command judged on its own
            finding = path_finding(self.boundary, self.rules, access.text, write=access.write, cwd=cwd)
            if finding.verdict == "ask" and finding.risk == "medium" and access.mode == "exec":
                # Running code from outside the workspace is not a mere read.
                finding = replace(
                    finding, risk="high", reason=f"runs code from outside the workspace ({access.text})"
                )
            elif finding.verdict == "ask" and finding.risk == "medium" and inv.program == "ln":
                # A link to an outside place lets every later workspace path reach it.
                finding = replace(
                    finding, risk="high", reason=f"links to outside the workspace ({access.text})"
                )
            yield finding
            if UNKNOWN in access.text or cwd == UNKNOWN:
                continue
            path = self.boundary.absolute(access.text, cwd)
            if access.write and inv.program in _DELETERS and within(self.boundary.workspace, path):
                yield Finding("ask", "high", "boundary", "deletes or moves the workspace itself")
            if recursive and not within(path, self.boundary.workspace) and self.boundary.holds_secrets(path):
                yield Finding(
                    "ask", "high", "boundary", f"searches {path}, which holds secrets", sensitive=True
                )

    def _variables(self, inv: Invocation, local_names: frozenset[str]) -> Iterator[Finding]:
        # A here-document that expands `$f` is usually a script written unquoted by mistake: only
        # names that look like credentials count there; in arguments, any name a printer shows does.
        named = [(name, True) for word in inv.words[1:] for name in word.variables]
        for name, shown in [*named, *((n, False) for n in inv.command.heredoc_variables)]:
            if name in _BENIGN_VARIABLES or name in local_names:
                continue
            if _SECRET_VARIABLE.search(name) or (shown and inv.program in _PRINTERS):
                yield Finding(
                    "ask", "high", "boundary", f"exposes environment variable ${name}", sensitive=True
                )

    def _upstream_inside(self, inv: Invocation) -> bool:
        upstream = inv.command.upstream
        if not upstream or posixpath.basename(upstream[0]) not in _LIST_SOURCES:
            return False
        paths = [a for a in upstream[1:] if not a.startswith("-") and ("/" in a or a.startswith((".", "~")))]
        return all(
            UNKNOWN not in p and within(self.boundary.absolute(p), self.boundary.workspace) for p in paths
        )


def _dotglob(expansion: Expansion) -> bool:
    """`shopt -s dotglob` (or `GLOBIGNORE=…`) and a glob: `*` then matches `.env` too."""
    invocations = expansion.invocations
    on = any(i.program == "shopt" and "dotglob" in i.argv and "-s" in i.argv for i in invocations) or any(
        name == "GLOBIGNORE" for i in invocations for name, _ in i.command.environment
    )
    return on and any(w.glob for i in invocations for w in i.words[1:])


def _reads_listing(inv: Invocation) -> bool:
    """Run-time arguments that are known not to name other files.

    A read-only program whose only computed arguments are whole-word workspace listings, or git
    handed a revision (`git diff $(git merge-base main HEAD)`).
    """
    if inv.extra_args:
        return False
    computed = [w for w in inv.words[1:] if UNKNOWN in w.text]
    if not computed:
        return False
    if inv.program == "git":
        # A revision as `-C`/`--git-dir` value would be a directory: not what this relaxation is for.
        places = ("-C", "--git-dir", "--work-tree")
        return all(w.revision for w in computed) and not any(a.startswith(places) for a in inv.argv)
    return inv.program in LIST_CONSUMERS and all(w.listing and w.text == UNKNOWN for w in computed)


def _reads_recursively(inv: Invocation) -> bool:
    """Programs that read a whole tree: pointed at ~ or / they read the secrets inside it."""
    if inv.program in ("rg", "ag", "ack", "find", "fd", "tar", "rsync", "scp", "du", "tree", "zip", "7z"):
        return inv.program not in ("du", "tree")
    flags = [a for a in inv.argv[1:] if a.startswith("-") and not a.startswith("--")]
    long_flags = [a for a in inv.argv[1:] if a.startswith("--")]
    if inv.program in ("grep", "egrep", "fgrep", "cp", "chmod", "chown", "ls", "cat", "zip"):
        return any(c in f for f in flags for c in "rRa") or "--recursive" in long_flags
    return False


def _canonical(inv: Invocation) -> str:
    """The invocation of git with global options removed (`git -C p --no-pager push` → `git push`).

    For deny/ask rules.
    """
    if inv.program != "git":
        return inv.text
    args = list(inv.argv[1:])
    while args and args[0].startswith("-"):
        takes_value = args[0] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path")
        args = args[2:] if takes_value else args[1:]
    return " ".join(["git", *args])
