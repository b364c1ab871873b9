"""Engine v2, round 2: sed's `e command` text is judged as shell, and git's file-valued short options.

`sed '1e rm -rf /' f` runs `rm -rf /`: the floor sees it under every policy. `git diff -O/etc/x`
and `git commit -F /etc/shadow` read those files: the boundary judges them like any other read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions import Action, PolicyName
from approvals.permissions.shell.runners import sed_commands
from tests.approvals.permissions.engines import engine as _engine


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


SED_FLOOR = [
    "sed '1e rm -rf /' f",
    "sed -n '1e rm -rf /' f",
    "sed -e 'e rm -rf /etc' f",
    "sed --expression='e rm -rf ~' f",
    "sed -e 'p;e rm -rf /usr' f",
    "sed '$e rm -rf /' f",
    "sed '/x/e rm -rf /' f",
    "sed '/a/,/b/!e rm -rf /var' f",
    "sed '1,3e rm -rf /' f",
    "sed '0~2e rm -rf /' f",
    "sed -i '1e rm -rf /home/tester' f",
    "gsed '1e rm -rf /' f",
    "sed -E -n '1e chmod -R 777 /' f",
    "sed '1{e rm -rf /\n}' f",
    "sed -e 's/a/b/' -e '2e rm -rf /' f",
    "sed -ne '1e rm -rf /' f",
    "sed '1e dd if=/dev/zero of=/dev/sda' f",
    "sed '1e mkfs.ext4 /dev/sda1' f",
    "bash -c \"sed '1e rm -rf /' f\"",
    "echo x | sed 'e rm -rf /'",
]


@pytest.mark.parametrize("command", SED_FLOOR)
@pytest.mark.parametrize("policy", ["allow-all", "human"])
def test_sed_e_command_text_reaches_the_floor(workspace: Path, command: str, policy: PolicyName) -> None:
    decision = _engine(workspace, policy, True).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision.reason)
    assert decision.layer == "floor", (command, decision.reason)


SED_ORDINARY = [
    "sed -i 's/old/new/g' src/a.py",
    "sed -n '/start/,/end/p' f.txt",
    "sed ':a;N;$!ba;s/\\n/ /g' f",
    "sed 's/e x/y/' f",
    "sed -e 's/one/two/' -e 's/three/four/' f",
    "sed '/^$/d' f",
    "sed -n '1,5p' README.md",
    "sed 'y/abc/xyz/' f",
]


@pytest.mark.parametrize("command", SED_ORDINARY)
def test_ordinary_sed_scripts_run_nothing(workspace: Path, command: str) -> None:
    words = ["sed", *command.split(" ", 1)[1:]]
    assert sed_commands(words) is None or "e " not in command
    decision = _engine(workspace, "allow-all", False).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "allow", (command, decision.reason)


GIT_FILES = [
    "git diff -O/etc/shadow",
    "git diff -O /etc/shadow",
    "git log -O/root/.ssh/id_rsa",
    "git log -O/home/tester/.ssh/id_rsa",
    "git diff -O~/.aws/credentials",
    "git commit -F/etc/shadow",
    "git commit -F /etc/shadow",
    "git tag -a v1 -F /home/tester/.ssh/id_ed25519",
    "git show -O/etc/shadow HEAD",
    "git diff --cached -O/home/tester/.netrc",
]


@pytest.mark.parametrize("command", GIT_FILES)
def test_git_file_valued_short_options_are_reads_the_boundary_judges(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", False).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision.reason)


GIT_ORDINARY = ["git diff -Oorderfile", "git diff -O.gitorder", "git commit -F msg.txt", "git commit -F -",
                "git tag -a v1 -F notes.md", 'git commit -m "fix"']  # fmt: skip


@pytest.mark.parametrize("command", GIT_ORDINARY)
def test_git_file_options_inside_the_workspace_stay_allowed(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", False).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "allow", (command, decision.reason)


def test_parallel_over_more_arguments_than_judged_is_refused_not_cut(workspace: Path) -> None:
    command = "parallel rm -rf {} ::: " + " ".join(f"d{i}" for i in range(70)) + " /"
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny"
