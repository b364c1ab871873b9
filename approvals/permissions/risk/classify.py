"""Blast-radius risk of one program run, by deterministic tables (no model grades itself).

low: reads and edits in the workspace, read-only git, local builds and tests.
high: egress, publish, remote history rewrite, privilege. critical: the floor (see floor/judge.py).
Anything this module does not know is medium.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence

from approvals.permissions.model import RiskInfo
from approvals.permissions.risk.code_options import code_option
from approvals.permissions.risk.env_dumps import env_dump
from approvals.permissions.risk.subcommands import (
    canonical_program,
    command_like_option,
    foreign_imports,
    foreign_libraries,
    judge_known,
    judge_module,
    judge_path_script,
    subcommand,
    timeit_code,
)
from approvals.permissions.shell.interpreters import SHELLS, git_shell_text, interpreter_family
from approvals.permissions.shell.invocation import Invocation
from approvals.permissions.shell.programs import (
    BUILDS,
    EGRESS_SUB,
    ENV_CODE,
    EXEC_CAPABLE,
    LITERAL_OPEN,
    LOCAL_VERB_EGRESS,
    LOCAL_VERBS,
    LOW,
    MAKE_SIDE_EFFECTS,
    NETWORK,
    NETWORK_CODE,
    PRIVILEGE,
    PUBLISH,
    RISKY_CODE,
    SAFE_GIT,
    SED_EXEC,
    TAR_EXEC,
)
from approvals.permissions.shell.runners import COMMAND_OPTION_PROGRAMS, option_commands
from approvals.permissions.shell.words import UNKNOWN


def _normalise(program: str) -> str:
    """`pip3.12` → pip, `python3` stays (interpreters are matched by family)."""
    for family in ("pip", "easy_install"):
        if program.startswith(family) and program[len(family) :].strip("0123456789.") == "":
            return family
    return program


def _subcommand(inv: Invocation, skip_valued: frozenset[str] = frozenset()) -> str:
    args = inv.argv[1:]
    i = 0
    while i < len(args):
        if args[i] in skip_valued:
            i += 2
            continue
        if not args[i].startswith("-"):
            return args[i]
        i += 1
    return ""


def classify(inv: Invocation) -> RiskInfo:
    """Risk of one program run."""
    program = canonical_program(_normalise(inv.program))
    if program in SHELLS:
        return _shell_risk(inv)
    if program in ("source", ".") and (
        inv.command.stdin == "pipe" or any(w.process_substitution for w in inv.words)
    ):
        return RiskInfo("high", "sources code produced at run time (decode-and-execute)", broad=True)
    if program == "eval":
        return RiskInfo("high", "eval runs text as shell code", broad=True)
    if program == "git":
        return _git_risk(inv)
    sub = subcommand(inv, program)
    family = interpreter_family(program)
    # Package verbs first: `bun install`, `deno add` are downloads, not scripts named "install".
    if family is not None and not (program in EGRESS_SUB and sub in EGRESS_SUB[program]):
        return _interpreter_risk(inv, family)
    remote = _remote_risk(inv, program, sub)
    if remote is not None:
        return remote
    if program in PRIVILEGE:
        if program == "kill" and _kills_own_jobs(inv.argv[1:]):
            return RiskInfo("low", "signals a job of this shell")
        return RiskInfo("high", f"changes privilege or system state ({program})")
    if program == "chmod" and any(
        re.search(r"(?<![ugoa])[ugoa]*[+=][rwxXt]*s|^[2-7][0-7]{3}$", a) for a in inv.argv[1:]
    ):
        return RiskInfo("high", "sets a setuid or setgid bit")
    return _local_risk(inv, program, sub)


def _remote_risk(inv: Invocation, program: str, sub: str) -> RiskInfo | None:
    """Forges, publishing, uploads, downloads and other network programs; None for local work."""
    return next(_remote_candidates(inv, program, sub), None)


def _remote_candidates(inv: Invocation, program: str, sub: str) -> Iterator[RiskInfo]:
    """The applicable remote verdicts, most specific first (only the first one counts)."""
    if program in ("gh", "glab"):
        yield _forge_risk(inv, program, sub)
    if program in PUBLISH and sub in PUBLISH[program]:
        yield RiskInfo(
            "high", f"publishes or deploys ({program} {sub})", egress=True, side_effect=True, broad=True
        )
    if program in ("curl", "wget", "http", "xh", "httpie") and _posts(inv):
        yield RiskInfo(
            "high", f"sends data over the network ({program})", egress=True, side_effect=True, broad=True
        )
    if program in EGRESS_SUB and sub in EGRESS_SUB[program]:
        yield RiskInfo(
            "high", f"downloads packages or talks to a remote ({program} {sub})", egress=True, broad=True
        )
    if program == "rsync" and _local_rsync(inv):
        yield RiskInfo("low", "copies files locally (rsync between local paths)")
    if _local_verb(inv, program):
        yield RiskInfo("low", f"local {program} query ({' '.join(inv.argv[1:3])})")
    if program in ("python", "uv") and sub == "pip":
        yield RiskInfo("high", "installs packages", egress=True, broad=True)
    if program in ("bundle", "composer"):
        known = judge_known(inv, program, classify)
        # composer's other verbs download (network program, below); bundle's table is complete.
        if known is not None and (program == "bundle" or known.risk == "low"):
            yield known
    if program in NETWORK:
        yield RiskInfo("high", f"network program ({program})", egress=True, broad=True)


def _local_rsync(inv: Invocation) -> bool:
    """`rsync -a src/ backup/`: no `host:` operand, no remote shell or daemon options."""
    remote = ("--rsh", "--rsync-path", "--daemon", "--server", "--address", "--port", "--sockopts",
              "--password-file", "--connect-program", "--remote-option", "-M", "--files-from")  # fmt: skip
    for arg in inv.argv[1:]:
        if arg.startswith("--"):
            if arg.startswith(remote):
                return False
        elif arg.startswith("-"):
            if "e" in arg or arg.startswith("-M"):
                return False  # `-e ssh`, `-avze ssh`: a remote shell
        elif ":" in arg or UNKNOWN in arg:
            return False  # `host:path`, `rsync://`, `host::module`, or not known
    return all(w.plain or not w.substitution for w in inv.words)


def _local_verb(inv: Invocation, program: str) -> bool:
    """`docker ps`, `uv --version`, `poetry check`: a networked tool asked something local."""
    verbs = LOCAL_VERBS.get(program)
    if verbs is None or not all(w.plain for w in inv.words):
        return False
    args = inv.argv[1:]
    if any(a in LOCAL_VERB_EGRESS or a.startswith(("--host=", "--context=")) for a in args):
        return False
    return any(args[: len(v)] == v for v in verbs)


_FORGE_READS = frozenset(
    {"view", "list", "status", "diff", "checks", "search", "download", "clone", "browse"}
)


def _forge_risk(inv: Invocation, program: str, sub: str) -> RiskInfo:
    """gh/glab: reading PRs and issues is egress; creating, merging, commenting is a side effect."""
    positional = [a for a in inv.argv[1:] if not a.startswith("-")]
    verb = positional[1] if len(positional) > 1 else ""
    if sub == "auth":
        return RiskInfo("high", f"{program} auth handles tokens", egress=True, secret=True)
    if sub == "api":
        writes = _posts(inv) or any(a in ("-f", "-F", "--field", "--raw-field", "--input") for a in inv.argv)
        return RiskInfo("high", f"{program} api call", egress=True, side_effect=writes, broad=True)
    if verb in _FORGE_READS or sub in ("search", "status", "browse"):
        return RiskInfo(
            "high", f"reads from the forge ({program} {sub} {verb})".strip(), egress=True, broad=True
        )
    reason = f"publishes or changes the forge ({program} {sub} {verb})".strip()
    return RiskInfo("high", reason, egress=True, side_effect=True, broad=True)


def _kills_own_jobs(args: tuple[str, ...]) -> bool:
    """`kill %1`, `kill -9 %2`: only job specs of this shell (never `-1`, pids or `--`)."""
    targets = [a for a in args if a.startswith("%") or not a.startswith("-")]
    return bool(targets) and all(a.startswith("%") for a in targets) and "--" not in args


def _exec_capable(inv: Invocation, program: str) -> str | None:
    """Programs that can run arbitrary commands through an option or script; None when not."""
    args = inv.argv[1:]
    if program in EXEC_CAPABLE:
        return f"{program} can run arbitrary commands"
    if program == "tar" and any(a.startswith(TAR_EXEC) for a in args):
        return "tar option that runs a program"
    if program in COMMAND_OPTION_PROGRAMS and option_commands(inv):
        # Any spelling getopt accepts (`tar -xvIzstd`, `tar xIf zstd a.tar`, `--use-comp=`).
        return f"{program} option runs a command"
    if program == "tar" and _tar_remote(args):
        return "tar archive on another machine (host:path runs a remote shell)"
    if program == "zip" and any(a.startswith(("-TT", "--unzip-command")) for a in args):
        return "zip option that runs a program"
    if program in ("less", "more") and any(a.startswith("+") for a in args):
        return f"{program} start-up command"
    if program == "make" and any(a in MAKE_SIDE_EFFECTS for a in args):
        return "make target that installs or deploys"
    if program == "deno" and any(
        a in ("-A", "--allow-all", "--allow-run") or a.startswith("--allow-net") for a in args
    ):
        return "deno with network or process permissions"
    if program == "go" and (
        args[:2] == ("mod", "download") or (args[:1] == ("run",) and any("@" in a for a in args))
    ):
        return "downloads Go modules"
    if program == "date" and any(a in ("-s", "--set") or a.startswith("--set=") for a in args):
        return "sets the system clock"
    return None


def _local_risk(inv: Invocation, program: str, sub: str) -> RiskInfo:
    exec_reason = _exec_capable(inv, program)
    if exec_reason is not None:
        egress = program in ("deno", "go")
        side_effect = "deploy" in inv.argv
        return RiskInfo(
            "high", exec_reason, egress=egress, side_effect=side_effect, broad=True, runs_code=True
        )
    if program == "env" and any(a in ("-S", "--split-string", "-C", "--chdir") for a in inv.argv[1:]):
        return RiskInfo("high", "env runs a split string or changes directory", broad=True, runs_code=True)
    dump = env_dump(inv) or code_option(inv)
    if dump is not None:
        return dump
    if program in ("awk", "gawk", "mawk") and re.search(
        r"system|\|\s*\"|getline|\bprint\b[^;}]*>", " ".join(inv.argv[1:])
    ):
        return RiskInfo("high", "awk program runs commands or writes files", broad=True, runs_code=True)
    sed = _sed_risk(inv) if program == "sed" else None
    if sed is not None:
        return sed
    known = judge_known(inv, program, classify)
    if known is not None:
        return known
    option = command_like_option(inv)
    if option is not None:
        return RiskInfo("medium", f"option {option} is given a command line", broad=True, runs_code=True)
    if program in ("cmake", "bun"):
        return RiskInfo("low", f"local build or test ({program} {sub})".rstrip())
    if program == "pip" and sub in ("list", "show", "freeze", "check", "--version", "help", ""):
        return RiskInfo("low", "lists installed packages")
    if program in ("pip", "deno", "node"):
        return RiskInfo("medium", f"unrecognised {program} subcommand")
    if program in ("tar", "unzip", "bsdtar") and any(
        a.startswith(("-P", "--absolute-names", "-:"))
        or (a.startswith("-") and not a.startswith("--") and "P" in a)
        for a in inv.argv[1:]
    ):
        return RiskInfo("high", "archive members may be written anywhere (absolute or .. paths)")
    if program in LOW or program in BUILDS:
        return RiskInfo("low", "reads or edits files")
    workspace = _workspace_program(inv)
    if workspace is not None:
        return workspace
    return RiskInfo("medium", f"unknown program ({program})")


def _workspace_program(inv: Invocation) -> RiskInfo | None:
    """`./configure`, `./run.sh`, `./some-binary`: a program from the workspace; None for other heads."""
    head = inv.words[0].text if inv.words else ""
    if "/" in head and not head.startswith(("/", "~")) and inv.words[0].plain:
        # `./configure`, `bin/rails`: a known project wrapper. Any other workspace program is
        # unknown code (principle 1) unless this command wrote or compiled it (commands/judge.py).
        name = posixpath.basename(head)
        if name.endswith(_SCRIPT_SUFFIXES):
            # `./run.sh` is `sh run.sh`: a workspace script, like any script handed to its interpreter.
            return RiskInfo("low", "runs a script from the workspace", broad=True)
        if name in PROJECT_WRAPPERS:
            return RiskInfo("low", "runs a known project wrapper from the workspace", broad=True)
        return RiskInfo("medium", WORKSPACE_PROGRAM, broad=True)
    return None


def _sed_risk(inv: Invocation) -> RiskInfo | None:
    """The risk of sed scripts with `e`/`w` commands or flags, in any spelling; a script from a file asks."""
    scripts, from_file = _sed_scripts(inv.argv[1:])
    if from_file:
        return RiskInfo("medium", "sed runs a script from a file (its commands not shown)", runs_code=True)
    if any(SED_EXEC.search(a) for a in scripts):
        return RiskInfo("high", "sed script runs commands or writes files", broad=True, runs_code=True)
    return None


def _sed_scripts(args: tuple[str, ...]) -> tuple[list[str], bool]:
    """The scripts of a sed run (`-e S`, `-eS`, `--expression[=]S`, or the first operand); True for `-f`."""
    scripts: list[str] = []
    given = False
    i = 0
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--":
            scripts.extend(args[i + 1 : i + 2] if not given else [])
            break
        short = arg.startswith("-") and not arg.startswith("--")
        if arg.startswith("--file") or (short and "f" in arg.split("e", 1)[0]):
            return scripts, True
        if arg in ("--expression", "-e"):
            scripts.append(nxt)
            given, i = True, i + 2
            continue
        if arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
            given = True
        elif arg.startswith("-") and not arg.startswith("--") and "e" in arg:
            rest = arg[arg.index("e") + 1 :]
            scripts.append(rest or nxt)
            given, i = True, i + (1 if rest else 2)
            continue
        elif not arg.startswith("-") and not given:
            scripts.append(arg)
            given = True
        i += 1
    return scripts, False


_STREAM = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/[^/]+/fd/\d+|/dev/tty)$")


def reads_stream(inv: Invocation) -> bool:
    """`bash /dev/stdin < x`, `python3 /dev/fd/3`, `bash < /dev/stdin`: code from a stream, not shown."""
    operands = [a for a in inv.argv[1:] if not a.startswith(("-", "+")) or a == "-"]
    if operands:
        return _STREAM.match(operands[0]) is not None
    return any(
        r.target is not None
        and not r.writes
        and r.target.text.startswith(("/dev/", "/proc/"))
        and r.target.text != "/dev/null"
        for r in inv.command.redirects
    )


def _tar_remote(args: tuple[str, ...]) -> bool:
    """`tar -cf host:x.tar`, `-cfhost:x`, `--file=host:x`: an archive on another machine (rsh/ssh)."""
    if "--force-local" in args:
        return False
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        value = None
        if arg in ("--file", "-f"):
            value = nxt
        elif arg.startswith("--file="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-") and not arg.startswith("--") and "f" in arg:
            value = arg[arg.index("f") + 1 :] or nxt
        elif i == 0 and not arg.startswith("-") and "f" in arg:
            value = nxt  # `tar cf host:x src`: old-style letters
        if value and ":" in value.split("/", 1)[0]:
            return True
    return False


_SCRIPT_SUFFIXES = (".sh", ".bash", ".py", ".rb", ".pl", ".js", ".mjs", ".cjs", ".ts", ".php", ".lua")
WORKSPACE_PROGRAM = "runs a program from the workspace that this command does not show"
# Wrapper scripts that projects check in to run a known tool (their text is the tool's own).
PROJECT_WRAPPERS = frozenset(
    """configure autogen.sh bootstrap.sh gradlew mvnw sbtx manage.py rails rake rspec bundle
    setup.py waf bazelisk pants""".split()  # noqa: SIM905
)


def _posts(inv: Invocation) -> bool:
    args = inv.argv[1:]
    for i, arg in enumerate(args):
        if arg in (
            "-d",
            "--data",
            "--data-raw",
            "--data-binary",
            "--data-urlencode",
            "-F",
            "--form",
            "-T",
            "--upload-file",
            "--json",
        ):
            return True
        if arg.startswith(("--data", "--form", "--json", "--post-data", "--post-file", "--method=")):
            return True
        if (
            arg in ("-X", "--request", "--method")
            and i + 1 < len(args)
            and args[i + 1].upper() not in ("GET", "HEAD")
        ):
            return True
        if arg.startswith("-X") and len(arg) > 2 and arg[2:].upper() not in ("GET", "HEAD"):
            return True
    return False


def _git_risk(inv: Invocation) -> RiskInfo:
    args = inv.argv[1:]
    sub = _subcommand(inv, frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"}))
    before = args[: args.index(sub)] if sub in args else args
    if any(a == "-c" or a.startswith(("--exec-path", "--config-env", "-c")) for a in before):
        return RiskInfo(
            "high", "git with command-line configuration (can run programs)", broad=True, runs_code=True
        )
    rest = args[args.index(sub) + 1 :] if sub in args else []
    if sub.startswith("credential"):
        return RiskInfo("high", "reads or stores git credentials", secret=True)
    if any(a.startswith("--remote") for a in rest) or any(a.startswith("--upload-pack") for a in rest):
        return RiskInfo("high", f"git {sub} against a remote", egress=True, broad=True)
    if sub == "push":
        forced = any(
            a in ("-f", "--force", "--mirror", "--delete", "-d", "--prune")
            or a.startswith(("--force", "+", ":"))
            for a in rest
        )
        reason = "rewrites history on a remote (force push)" if forced else "pushes to a remote"
        return RiskInfo("high", reason, egress=True, side_effect=True, broad=True)
    if sub == "submodule" and list(rest[:1]) == ["foreach"]:
        return RiskInfo("high", "git submodule foreach runs a command", broad=True, runs_code=True)
    if sub == "submodule" and list(rest[:1]) in (["status"], []):
        return RiskInfo("low", "git submodule status")
    if sub in EGRESS_SUB["git"]:
        side = sub in ("send-email", "request-pull")
        return RiskInfo("high", f"talks to a remote (git {sub})", egress=True, side_effect=side, broad=True)
    if sub == "remote":
        if not rest or rest[0] in ("-v", "--verbose", "get-url"):
            return RiskInfo("low", "lists remotes")
        return RiskInfo(
            "high" if rest[0] in ("update", "show", "prune") else "medium",
            f"git remote {rest[0]}",
            egress=rest[0] in ("update", "show", "prune"),
        )
    if sub == "config":
        reading = any(
            a in ("--get", "--get-all", "--list", "-l", "--get-regexp", "--show-origin") for a in rest
        )
        return (
            RiskInfo("low", "reads git configuration")
            if reading or len(rest) == 1
            else RiskInfo("medium", "changes git configuration")
        )
    if git_shell_text(inv) is not None:
        return RiskInfo("low", f"git {sub} runs a command, judged on its own", broad=True, runs_code=True)
    if any(a in ("--ext-diff", "--textconv") or a.startswith("--extcmd") for a in rest):
        return RiskInfo(
            "medium", f"git {sub} runs an external diff program from configuration", runs_code=True
        )
    if sub in ("difftool", "mergetool") and "--tool-help" not in rest:
        return RiskInfo(
            "medium", f"git {sub} launches the configured tool (an editor or a program)", runs_code=True
        )
    if sub in SAFE_GIT or (not sub and args in (("--version",), ("--help",), ("-h",))):
        return _templated(sub, rest) or RiskInfo("low", f"local git ({sub or args[0]})")
    return RiskInfo("medium", f"unrecognised git subcommand ({sub or 'none'})")


def _templated(sub: str, rest: Sequence[str]) -> RiskInfo | None:
    """`git init --template=DIR`: the template's hooks are copied into `.git`, around its boundary."""
    if sub in ("init", "clone") and any(a.startswith(("--template", "--separate-git-dir")) for a in rest):
        return RiskInfo("medium", f"git {sub} copies a template (hooks) into .git", runs_code=True)
    return None


def _interpreter_risk(inv: Invocation, family: str) -> RiskInfo:
    code = inv.inline_code
    # Libraries loaded by flag (`ruby -rsocket`, `perl -MIO::Socket`) count as code.
    loaded = [a[2:] for a in inv.argv[1:] if a[:2] in ("-r", "-M", "-m") and len(a) > 2]
    if loaded:
        code = " ".join([code or "", *loaded])
    if family == "deno" and any(
        a in ("-A", "--allow-all", "--allow-run") or a.startswith("--allow-net") for a in inv.argv
    ):
        return RiskInfo("high", "deno with network or process permissions", egress=True, broad=True)
    operands = [a for a in inv.argv[1:] if not a.startswith("-")]
    if operands and posixpath.basename(operands[0]) == "setup.py" and {"upload", "register"} & set(operands):
        return RiskInfo(
            "high", "publishes a package (setup.py upload)", egress=True, side_effect=True, broad=True
        )
    if family == "python" and (timed := timeit_code(inv)) is not None:
        return _code_risk(timed, family)  # its statements and setup are code
    if family == "python":
        module = judge_module(inv, classify)
        if module is not None:
            return module
    delegated = judge_path_script(inv, family, classify) or code_option(inv)
    if delegated is not None:
        return delegated
    if code is not None:
        info = _code_risk(code, family)
        foreign = foreign_libraries(family, loaded)
        if info.risk == "low" and foreign:
            return RiskInfo("medium", f"{family} loads the library {foreign[0]} (its code runs)", broad=True)
        return info
    if (
        inv.command.stdin in ("pipe", "herestring")
        or any(w.process_substitution for w in inv.words)
        or reads_stream(inv)
    ):
        return RiskInfo("high", f"{family} runs code from its input (decode-and-execute)", broad=True)
    operands = [a for a in inv.argv[1:] if not a.startswith("-")]
    if not operands and any(
        a in ("--version", "-V", "-v", "--help", "-h", "-VV", "--test") for a in inv.argv[1:]
    ):
        return RiskInfo("low", f"{family} version, help or test runner")
    if not operands:
        return RiskInfo("medium", f"interactive {family}", broad=True)
    if "://" in operands[0]:
        return RiskInfo(
            "high", f"{family} runs a script from the network ({operands[0][:80]})", egress=True, broad=True
        )
    return RiskInfo("low", f"runs a {family} script", broad=True)


def _code_risk(code: str, family: str) -> RiskInfo:
    """Literal interpreter code: what it reaches (environment, network, system) or only computes."""
    if UNKNOWN in code:
        return RiskInfo("high", f"{family} code computed at run time", broad=True)
    if ENV_CODE.search(code):
        return RiskInfo(
            "high", f"{family} code that reads the environment (secrets)", broad=True, secret=True
        )
    if NETWORK_CODE.search(code):
        return RiskInfo("high", f"{family} code that opens network connections", egress=True, broad=True)
    # `open('literal')` is fine: literal paths in inline code are judged as reads by the engine.
    if RISKY_CODE.search(LITERAL_OPEN.sub("", code)):
        return RiskInfo("high", f"{family} code that touches files, processes or the system", broad=True)
    foreign = foreign_imports(code) if family == "python" else []
    if foreign:
        reason = f"python code that imports {foreign[0]} (its code runs)"
        return RiskInfo("medium", reason, broad=True, imports=tuple(foreign))
    return RiskInfo("low", f"{family} code that only computes", broad=True)


def _shell_risk(inv: Invocation) -> RiskInfo:
    args = inv.argv[1:]
    inline = any(a.startswith("-") and "c" in a[1:] and not a.startswith("--") for a in args)
    if reads_stream(inv) and not inline:
        return RiskInfo("high", "shell runs code from a stream (not shown in the command)", broad=True)
    if inline:
        return RiskInfo("low", "shell running the commands judged separately")
    if inv.command.stdin in ("heredoc", "herestring"):
        return RiskInfo("low", "shell running a here-document judged separately")
    operands = [a for a in args if not a.startswith(("-", "+"))]
    if inv.command.stdin == "file" and not operands:
        return RiskInfo("low", "runs a shell script from a file", broad=True)
    if (
        inv.command.stdin in ("pipe", "herestring")
        or not operands
        or any(w.process_substitution for w in inv.words)
    ):
        return RiskInfo("high", "shell runs code it reads at run time (decode-and-execute)", broad=True)
    return RiskInfo("low", "runs a shell script", broad=True)
