"""What the engine knows about programs: which read, build, reach the network, publish or escalate.

Data only (tables and patterns); `risk.py` applies them. Add a program here, not in the logic.
"""

from __future__ import annotations

import re

LOW = frozenset(
    """
    ls ll la dir cat tac nl head tail grep egrep fgrep rg ag ack wc sort uniq cut tr paste
    join comm diff cmp colordiff echo printf pwd cd pushd popd true false test [ [[ : which type
    whereis whoami id date cal basename dirname realpath readlink stat file du df tree fold fmt
    column expand unexpand rev seq sleep md5sum sha1sum sha256sum sha512sum shasum cksum b2sum
    base64 base32 xxd od hexdump strings jq yq bat touch mkdir cp mv rm rmdir ln tee sed awk gawk
    mawk tar zip unzip gzip gunzip zcat bzip2 bunzip2 xz unxz zstd unzstd 7z make cmake ninja meson
    gcc g++ cc c++ clang clang++ javac java rustc tsc pytest black ruff mypy flake8 pylint isort
    pyright prettier eslint jest vitest mocha ava phpunit pest patch split truncate nproc uname hostname
    locale tput phpstan psalm php-cs-fixer pint phpcs phpcbf rector
    mapfile readarray clear exit return read shift wait set unset local readonly shopt alias history
    jobs fg bg disown watch flock
    hash umask getopts let printf wc diff3 sdiff iconv dos2unix unix2dos mktemp env-check tox nox
    coverage pre-commit go cargo npm yarn pnpm python pip node bun deno git gofmt goimports rustfmt
    clang-format shellcheck shfmt hadolint yamllint markdownlint ctags cloc tokei fd fzf chmod
    export declare typeset source . find htop top ps pgrep free uptime lsof bc webpack rollup esbuild
    stylelint biome rustup deactivate unlink groups ulimit lscpu yes shuf expr nm objdump readelf
    size strip ar pkg-config sphinx-build mkdocs playwright cypress sqlite3 kotlinc kotlin rspec rubocop
    rake golangci-lint staticcheck vite next turbo nx tsx ts-node pyflakes pycodestyle pydocstyle
    bandit gradle mvn sbt ctest ant nox tox zig swift dotnet bazel meson ruby perl kotlinc-jvm
    """.split()  # noqa: SIM905
)
NETWORK = frozenset(
    """
    curl wget nc ncat netcat ssh scp sftp rsync telnet ftp socat nmap ping ping6 dig nslookup host
    whois http https httpie xh aria2c axel lftp ssh-copy-id mosh traceroute tracepath mtr openssl gh
    hub glab aws gcloud gsutil az kubectl helm terraform tofu pulumi docker podman nerdctl vagrant
    ansible ansible-playbook heroku vercel netlify fly flyctl firebase wrangler serverless doctl oc
    eksctl npx pnpx bunx uvx pipx apt apt-get aptitude yum dnf zypper pacman apk brew snap flatpak
    port conda mamba micromamba gem composer bundle cpan cpanm twine poetry pdm hatch uv git-lfs
    s3cmd rclone gsutil mc nix-env nix go-task
    """.split()  # noqa: SIM905
)
PRIVILEGE = frozenset(
    """
    sudo su doas pkexec run0 runuser chroot setcap chown chgrp crontab at batch systemctl service
    launchctl initctl init telinit newgrp sg chsh chfn gpasswd renice ip ifconfig route tc ethtool
    hostnamectl timedatectl hwclock setsebool semanage shutdown reboot halt poweroff kill pkill
    killall killall5 mount umount
    iptables ip6tables nft ufw firewall-cmd pfctl sysctl modprobe insmod rmmod useradd userdel
    usermod groupadd groupdel passwd chpasswd visudo chattr ldconfig swapon swapoff nsenter unshare
    setfacl setuidgid capsh loginctl journalctl dmesg
    """.split()  # noqa: SIM905
)
PUBLISH = {
    "npm": {"publish", "unpublish", "deprecate", "dist-tag", "owner", "access", "adduser", "login"},
    "yarn": {"publish", "npm"},
    "pnpm": {"publish"},
    "cargo": {"publish", "yank", "owner", "login"},
    "twine": {"upload", "register"},
    "gem": {"push", "yank", "owner"},
    "poetry": {"publish"},
    "uv": {"publish"},
    "hatch": {"publish"},
    "pdm": {"publish"},
    "docker": {"push", "login"},
    "podman": {"push", "login"},
    "helm": {"push", "install", "upgrade", "uninstall", "rollback"},
    "kubectl": {"apply", "create", "delete", "replace", "patch", "scale", "rollout", "edit", "set", "drain"},
    "terraform": {"apply", "destroy", "import", "taint"},
    "tofu": {"apply", "destroy"},
    "pulumi": {"up", "destroy"},
    "gh": {"release", "pr", "issue", "repo", "gist", "workflow", "api", "secret", "variable"},
    "glab": {"release", "mr", "issue"},
    "vercel": {"deploy", "--prod"},
    "netlify": {"deploy"},
    "fly": {"deploy"},
    "flyctl": {"deploy"},
    "firebase": {"deploy"},
    "flit": {"publish"},
    "maturin": {"publish", "upload"},
    "heroku": {"releases", "deploy", "config:set"},
    "wrangler": {"deploy", "publish"},
    "serverless": {"deploy"},
    "mvn": {"deploy"},
    "mkdocs": {"gh-deploy"},
    "gradle": {"publish"},
    "bun": {"publish"},
    "deno": {"publish", "deploy"},
    "dotnet": {"nuget"},
    "mix": {"hex.publish"},
    "sbt": {"publish", "publishSigned", "+publish", "+publishSigned"},
    "swift": {"package-registry"},
}
# Subcommands of otherwise-local tools that reach the network.
EGRESS_SUB = {
    "git": {"clone", "fetch", "pull", "push", "ls-remote", "submodule", "send-email", "request-pull", "lfs",
            "svn", "daemon", "instaweb", "http-fetch", "p4"},
    "npm": {"install", "i", "ci", "add", "update", "upgrade", "audit", "outdated", "view", "info", "exec",
            "x", "init", "create", "search", "pack", "link", "dedupe", "prune", "rebuild"},
    "yarn": {"", "install", "add", "upgrade", "up", "dlx", "create", "init", "why", "info", "outdated"},
    "pnpm": {"install", "i", "add", "update", "up", "dlx", "create", "fetch"},
    "pip": {"install", "download", "wheel", "search", "index"},
    "cargo": {"install", "add", "update", "fetch", "search", "generate-lockfile", "vendor"},
    "go": {"get", "install", "download"},
    "bun": {"install", "i", "add", "update", "x", "create", "upgrade", "publish"},
    "deno": {"install", "upgrade", "add", "publish", "deploy", "jupyter", "serve"},
    "mkdocs": {"serve"},
    "bundle": {"install", "update", "add", "outdated", "lock", "cache", "package", "binstubs", "pristine",
               "init", "gem", "plugin", "remove", "doctor", "open", "viz"},
    "playwright": {"install", "install-deps", "open", "codegen", "show-trace", ""},
    "cypress": {"install", "open", "cache", ""},
    "rustup": {"install", "update", "toolchain", "target", "component", "self", "default", "set",
               "override", "run", "up", "doc"},
}  # fmt: skip
NETWORK_CODE = re.compile(
    r"\b(socket|urllib|requests|http|https|axios|undici|http\.client|httpx|aiohttp|ftplib|smtplib|telnetlib|paramiko|websocket|"
    r"fetch|XMLHttpRequest|net\.|https?\.(get|request)|IO::Socket|LWP|Net::|open-uri|Net::HTTP|curl|wget|"
    r"dns|xmlrpc|grpc|dgram|tls|net/http|open-uri|Socket)\b"
)
RISKY_CODE = re.compile(
    r"\b(os|sys\.modules|shutil|subprocess|pty|ctypes|importlib|pickle|marshal|child_process|fs|process|"
    r"require|exec|eval|compile|__import__|getattr|setattr|globals|locals|vars|open|system|popen|spawn|"
    r"unlink|remove|rmtree|chmod|chown|kill|fork|Function|Deno|Bun|File|IO|Kernel|syscall|base64|"
    r"b64decode|codecs|builtins|__builtins__|__class__|__subclasses__|environ|getenv|Path|pathlib|qx|Open3|"
    r"dlopen|require_relative|instance_eval|class_eval|instance_exec)\b|%x"
)
SED_EXEC = re.compile(r"(?:^|[;{}\s\d$/!])[eEwWrR](?:\s|$|;)|/[gpIiMm0-9]*[ewW]\b")
EXEC_CAPABLE = frozenset(
    """vim vi nvim ex ed emacs man less more most strace ltrace gdb lldb script expect parallel screen
    tmux sudoedit xdg-open open osascript valgrind""".split()  # noqa: SIM905
)
TAR_EXEC = (
    "--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--rsh-command",
    "--info-script", "-F", "--new-volume-script",
)  # fmt: skip
MAKE_SIDE_EFFECTS = frozenset({"install", "uninstall", "deploy", "publish", "release", "upload"})
ENV_CODE = re.compile(
    r"\b(ENV|environ|getenv|getenvb|process\.env|System\.getenv|Deno\.env|Bun\.env|os\.Environ)\b|%ENV|\$_(ENV|SERVER)\b"
)
NETWORK_MODULES = frozenset(
    {
        "http.server",
        "smtpd",
        "smtplib",
        "ftplib",
        "telnetlib",
        "webbrowser",
        "twine",
        "socketserver",
        "aiosmtpd",
    }
)
LITERAL_OPEN = re.compile(r"""\bopen\(\s*(['"])[^'"]*\1\s*(,\s*(['"])r?b?t?\3\s*)?\)""")
SAFE_GIT = frozenset(
    """
    status diff log show add commit branch checkout switch stash restore rebase merge cherry-pick
    reset tag blame grep ls-files ls-tree rev-parse describe shortlog reflog init mv rm clean
    worktree notes bisect apply am archive format-patch diff-tree diff-files diff-index cat-file rev-list
    show-ref for-each-ref whatchanged revert mergetool difftool range-diff count-objects fsck gc
    prune help version var check-ignore check-attr verify-commit show-branch name-rev cherry restore
    sparse-checkout merge-base
    """.split()  # noqa: SIM905
)


# Environment variables that name places and tools, never credentials (`printenv PATH` is fine).
PLAIN_VARIABLES = frozenset(
    """PATH HOME USER LOGNAME SHELL LANG LC_ALL TERM PWD OLDPWD TMPDIR PYTHONPATH VIRTUAL_ENV GOPATH
    GOROOT NODE_ENV CI JAVA_HOME CARGO_HOME RUSTUP_HOME EDITOR PAGER HOSTNAME""".split()  # noqa: SIM905
)
# Local, read-only verbs of otherwise networked tools (argv after the program, as a prefix).
LOCAL_VERBS: dict[str, tuple[tuple[str, ...], ...]] = {
    "docker": (
        ("ps",), ("images",), ("version",), ("info",), ("logs",), ("image", "ls"), ("image", "list"),
        ("container", "ls"), ("container", "list"), ("compose", "ps"), ("compose", "logs"),
        ("compose", "version"), ("--version",),
    ),
    "uv": (("--version",), ("-V",), ("version",), ("help",), ("pip", "list"), ("pip", "show"),
           ("pip", "freeze"), ("pip", "check")),
    "poetry": (("--version",), ("-V",), ("check",), ("show",), ("version",), ("env", "info"),
               ("env", "list"), ("build",), ("help",)),
    "npx": (("--version",),),
    "twine": (("check",), ("--version",)),
    "terraform": (("fmt",), ("version",), ("-version",), ("--version",), ("-help",)),
    "tofu": (("fmt",), ("version",), ("-version",), ("--version",), ("-help",)),
    "openssl": (("dgst",), ("sha1",), ("sha256",), ("sha512",), ("md5",), ("rand",), ("base64",),
                ("x509",), ("version",), ("asn1parse",), ("verify",), ("help",)),
}  # fmt: skip
# Options that make a "local" verb above reach out after all (a remote daemon, the latest versions).
LOCAL_VERB_EGRESS = frozenset(
    {"-H", "--host", "--context", "-c", "--outdated", "-o", "--latest", "-l", "--tls", "--tlsverify"}
)

# Programs that may read a listing of workspace files from a substitution (`wc -l $(git ls-files)`):
# they read or format their operands and run nothing; deleters, interpreters and network programs never.
LIST_CONSUMERS = frozenset(
    """
    wc cat head tail grep egrep fgrep rg sort uniq cut nl file stat du ls md5sum sha1sum sha256sum
    sha512sum cksum b2sum diff black ruff mypy flake8 pylint isort prettier eslint gcc g++ cc clang
    clang++ javac rustc tsc pytest gofmt goimports rustfmt clang-format shellcheck shfmt yamllint
    markdownlint
    jq xxd strings
    """.split()  # noqa: SIM905
)

# Build tools run the project's own build (dependency downloads are the sandbox's job); their
# publish/deploy verbs are caught by PUBLISH first.
BUILDS = frozenset(
    {"mvn", "mvnw", "gradle", "gradlew", "ant", "sbt", "bazel", "dotnet", "swift", "zig", "command", "ctest"}
)

# Every program some table above describes; anything else is "unknown" (medium risk, and its path
# arguments are judged as writes).
KNOWN_PROGRAMS = frozenset(
    LOW | NETWORK | PRIVILEGE | BUILDS | EXEC_CAPABLE | set(PUBLISH) | set(EGRESS_SUB)
    | {"sh", "bash", "zsh", "dash", "ksh", "python", "python3", "node", "perl", "ruby", "source", ".", "eval"}
)  # fmt: skip
