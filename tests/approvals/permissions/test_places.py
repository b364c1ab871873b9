"""The floor protects places, not programs: one physical path, `.git` at any depth, code after options.

- `..` is taken as the kernel takes it, after the symlinks before it: `docs/host/../usr` with
  `docs/host -> /etc` is `/usr`, so the floor and the boundary judge the place the command reaches.
- `.git` is a protected place at any depth (`.git`, `vendor/lib/.git/hooks`), and a listing that can
  name it (`find .` with no name filter, `ls -A`, `echo .git`) feeding a destructive verb asks.
- Code after interpreter and shell options is extracted and judged (`python3 -W ignore -c`,
  `bash -o xtrace -c`, `bash -c -e '…'`, `perl -pe`).
"""

from __future__ import annotations

import os

import pytest

from approvals.permissions import Action, PermissionEngine
from tests.approvals.permissions.engines import table_engine


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> PermissionEngine:
    workspace = tmp_path_factory.mktemp("ws")
    (workspace / "docs").mkdir()
    os.symlink("/etc", workspace / "docs" / "host")
    (workspace / "vendor" / "lib" / ".git" / "hooks").mkdir(parents=True)
    return table_engine(workspace)


def _verdict(engine: PermissionEngine, command: str) -> str:
    return engine.evaluate(Action(kind="command", target=command)).verdict


DENIED = [
    "rm -rf ~root",  # a real user's home, as bash expands it
    "rm -rf docs/host/../usr",
    "rm -rf docs/host/../../",
    "python3 -W ignore -c \"import shutil; shutil.rmtree('/usr')\"",
    "python3 -Wignore -c \"import shutil; shutil.rmtree('/usr')\"",
    "python3 -X dev -c 'import os; os.system(\"rm -rf /\")'",
    "python3 -Ic \"import shutil; shutil.rmtree('/usr')\"",
    "bash -o xtrace -c 'rm -rf /'",
    "bash -eo pipefail -c 'rm -rf /'",
    "bash -c -e 'rm -rf /'",
    "sh -e -c 'rm -rf /'",
    "bash --rcfile x -c 'rm -rf /'",
    "perl -pe 'system(\"rm -rf /\")' f",
    "perl -I lib -e 'system(\"rm -rf /\")'",
    "ruby -ne 'system(\"rm -rf /\")' f",
]

ASKED = [
    "cat ~root/notes",  # root's home, wherever the host puts it: outside, a secret place
    "rm -rf .git",
    "rm -rf vendor/lib/.git",
    "cp evil vendor/lib/.git/hooks/pre-push",
    "touch a/b/../../.git/config",
    "echo x > docs/host/../tmp/y",
    "find . -name .git -exec rm -rf {} +",
    "find . -type f -delete",
    "find -type f -delete",
    "ls -A | xargs rm -rf",
    "ls -la | xargs rm -rf",
    "echo .git | xargs rm -rf",
]

ALLOWED = [
    "sh -c 'ls -la'",
    "bash -o pipefail -c 'pytest -q'",
    "bash -ec 'make test'",
    "python3 -W ignore -m pytest -q",
    "perl -i -pe 's/a/b/' f.txt",
    "find . -name '*.pyc' -delete",
    "find . -type d -name __pycache__ -exec rm -rf {} +",
    "find build -type f -exec rm {} +",
    "find src build -name '*.o' -delete",
    "ls | xargs rm -rf",
    "echo a b | xargs rm",
    "rm -rf build docs/../dist",
    "git status",
    "rspec --tag ~slow",  # no user `slow`: bash passes `~slow` as written, no home is read
    "goimports -w .",
]


@pytest.mark.parametrize("command", DENIED)
def test_catastrophic_places_are_denied_whatever_hides_them(judge: PermissionEngine, command: str) -> None:
    assert _verdict(judge, command) == "deny"


@pytest.mark.parametrize("command", ASKED)
def test_dot_git_and_places_behind_links_ask(judge: PermissionEngine, command: str) -> None:
    assert _verdict(judge, command) == "ask"


@pytest.mark.parametrize("command", ALLOWED)
def test_ordinary_work_stays_quiet(judge: PermissionEngine, command: str) -> None:
    assert _verdict(judge, command) == "allow"
