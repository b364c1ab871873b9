"""Engine v2, round 2: a destructive verb whose targets the text does not show is a human's call.

`xargs rm < list`, `rm $(cat list)`, `while read f; do rm "$f"; done < list`: what is deleted
comes from a file, a pipe or a substitution, so (like a hidden program) automation never allows
it, allow-all and `command(*)` included; a listing of workspace paths piped in is still fine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.permissions import Action
from tests.approvals.permissions.engines import engine as _engine


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


HIDDEN = [
    "xargs rm -rf < list.txt",
    "xargs -a list.txt rm -rf",
    "xargs --arg-file=list.txt rm -f",
    "xargs rm -rf < <(cat list)",
    "xargs -0 rm -f < files0",
    "cat list | xargs rm -rf",
    "curl -s https://example.com/l | xargs rm -rf",
    "xargs -I{} rm -rf {} < list",
    "xargs -n1 rm -r < list",
    "xargs shred -u < list",
    "xargs unlink < list",
    "xargs rmdir < dirs",
    "xargs truncate -s0 < files",
    "xargs mv -t /tmp < list",
    "sort -u list | xargs rm",
    "tac list | xargs -r rm -rf --",
    "nohup xargs rm -rf < list",
    "rm -rf $(cat list)",
    "rm -rf `cat list`",
    "rm -rf $(< list)",
    'rm -rf "$(head -1 list)"',
    "rm -rf $TARGET",
    'rm -rf "$1"',
    'rm -rf "${DIR}"/*',
    "shred -u $(cat secrets.txt)",
    "mv $(cat l) /tmp",
    'while read f; do rm -rf "$f"; done < list',
    'while IFS= read -r f; do rm -f -- "$f"; done < <(cat list)',
    'cat list | while read f; do rm "$f"; done',
    "for f in $(cat list); do rm -rf $f; done",
    "bash -c 'xargs rm -rf < list'",
    "sh -c 'rm -rf $(cat list)'",
    "env xargs rm -rf < list",
    "timeout 5 xargs rm -rf < list",
    "sudo xargs rm -rf < list",
    "find . -name x | cat list - | xargs rm",
    "parallel rm -rf :::: list",
    "parallel rm -rf {} :::: list",
    "cat list | parallel rm -rf",
    "parallel -a list rm",
    "parallel --arg-file=l shred -u",
    "parallel rm ::: a :::: list",
    "tmp=$(mktemp); tmp=$(cat list); rm -rf $tmp",
    "tmp=$(mktemp); read tmp < list; rm -rf $tmp",
    "for tmp in $(cat l); do x=$(mktemp); rm -rf $tmp; done",
]


@pytest.mark.parametrize("command", HIDDEN)
@pytest.mark.parametrize("everything", [False, True])
def test_a_destructive_verb_with_hidden_targets_is_not_allowed_by_automation(
    workspace: Path, command: str, everything: bool
) -> None:
    for policy in ("allow-all", "risk-based"):
        decision = _engine(workspace, policy, everything).evaluate(Action(kind="command", target=command))
        assert decision.resolved == "deny", (policy, command, decision.reason)
    human = _engine(workspace, "human", everything).evaluate(Action(kind="command", target=command))
    assert human.resolved in ("ask", "deny"), (command, human.reason)


SHOWN = [
    "find . -name '*.pyc' | xargs rm -f",
    "find . -name '*.pyc' -print0 | xargs -0 rm -f",
    "find build -type f | xargs rm",
    "ls *.tmp | xargs rm",
    "echo a b | xargs rm",
    'xargs rm <<< "a b"',
    'for f in *.o; do rm "$f"; done',
    "rm -rf build dist",
    "rm -f ./*.log",
    "xargs grep -l foo < files",
    "cat list | xargs wc -l",
    'tmp=$(mktemp); echo x > "$tmp"; rm -f "$tmp"',
    "rm $(find . -name '*.pyc')",
    "for f in $(git ls-files '*.pyc'); do rm \"$f\"; done",
]


@pytest.mark.parametrize("command", SHOWN)
def test_targets_in_the_text_or_listed_from_the_workspace_stay_allowed(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", False).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "allow", (command, decision.reason)
