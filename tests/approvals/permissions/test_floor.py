"""The floor: destructive commands denied whatever the rules and policy; mentions are not floored."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions.engine import PermissionConfig, PermissionEngine
from approvals.permissions.floor.judge import is_critical
from approvals.permissions.model.actions import Action
from approvals.permissions.policy.rules import load_rules

HOME = "/home/tester"
ALLOW_EVERYTHING = {"allow": ["command(*)", "write(*)", "read(*)"]}


@pytest.fixture
def engine(tmp_path: Path) -> PermissionEngine:
    config = PermissionConfig(
        workspace=tmp_path, home=Path(HOME), policy="allow-all", rules=load_rules(ALLOW_EVERYTHING)
    )
    return PermissionEngine(config)


@pytest.mark.parametrize(
    "text",
    [
        "rm -rf /", "rm -rf /*", "rm -r -f /", "rm --recursive /", "rm -rf --no-preserve-root /",
        "rm -rf '/'", "rm -rf //", "rm -rf /./", "rm -rf ~", "rm -rf $HOME", "rm -rf ${HOME}/",
        "rm -rf /usr/lib", "rm -rf /e??", "rm -rf /{bin,etc}", "rm -rf \"$UNSET\"/*", "rm -rf ${X:-/}",
        "sudo rm -rf /", "timeout 9 /bin/rm -rf /", "bash -c 'rm -rf ~'", "echo $(rm -rf /)",
        "cd / && rm -rf *", "rm -rf ../../../../../../../../../../../..", "find / -delete",
        "find $HOME -exec rm -rf {} +", "find / | xargs rm -rf", "chmod -R 777 /", "chown -R x /etc",
        "mkfs.xfs /dev/sdb", "mkswap /dev/sda2", "wipefs -a /dev/nvme0n1", "dd if=/dev/zero of=/dev/sda",
        "cat img > /dev/sda", "shred /dev/sda", "tee /dev/sdb < x", ":(){ :|:& };:",
        "f(){ f | f & }; f", "mv /etc /tmp/etc", "echo 'rm -rf /' | bash", "eval rm -rf /",
        "rm -rf / (", "((rm -rf $HOME; x); y)", "f=/; rm -rf $f", "RM=rm; $RM -rf ~", "rm${IFS}-rf${IFS}/",
        "{rm,-rf,/}", "$(which rm) -rf /", "printf 'rm -rf /' | sh", "perl -e 'fork while fork'",
        "python3 -c \"import os; os.system('rm -rf /')\"", "> /dev/sda", "cmd='rm -rf /'; $cmd",
        "$(printf '%s%s' r m) -rf /", "a=r; b=m; $a$b -rf ~", "x=$'\\x72\\x6d'; $x -rf /",
    ],
)  # fmt: skip
def test_floor_denies_under_allow_all_and_allow_everything_rules(engine: PermissionEngine, text: str) -> None:
    decision = engine.evaluate(Action(kind="command", target=text))
    assert (decision.verdict, decision.resolved, decision.layer, decision.risk) == (
        "deny", "deny", "floor", "critical",
    ), (text, decision)  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "git commit -m 'rm -rf /'", "echo 'rm -rf /'", "echo mkfs.ext4 /dev/sda", "grep -r 'rm -rf /' .",
        "printf ':(){ :|:& };:'", "rm -rf build", "rm -rf ./node_modules", "rm /tmp/x.txt", "rm -f ~/x.log",
        "find . -delete", "chmod -R 755 src", "dd if=a.img of=b.img", "cat x > /dev/null",
        "echo hi > /dev/stderr", "fdisk -l", "rm -rf ~/project/build", "mv a b",
    ],
)  # fmt: skip
def test_mentions_and_local_work_are_not_floored(engine: PermissionEngine, text: str) -> None:
    assert engine.evaluate(Action(kind="command", target=text)).layer != "floor", text


@pytest.mark.parametrize(
    ("path", "critical"),
    [
        ("/", True), ("/etc", True), ("/etc/", True), ("/usr/local", True), (HOME, True), ("/home", True),
        ("/home/other", True), ("/*", True), ("/e*", True), (HOME + "/*", True), ("/etc/nginx", True),
        ("/tmp/build", False), (HOME + "/project", False), ("/opt/app/x", True), ("/var/tmp/x", False),
    ],
)  # fmt: skip
def test_critical_paths(path: str, critical: bool) -> None:
    assert is_critical(path, HOME) is critical
