"""Engine v2, principle 3: the floor judges effects (catalogue/floor_effects.yaml), not program names."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.permissions import Action
from tests.approvals.permissions.engines import engine as _engine

_CATALOGUE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "floor_effects.yaml").read_text()
)
_FLOOR = [(k, item) for k, items in _CATALOGUE.items() if k.startswith("floor_") for item in items]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


def test_catalogue_is_large_per_class() -> None:
    for name, items in _CATALOGUE.items():
        assert len(items) >= 12, name
        assert len(set(items)) == len(items), name
    assert len(_FLOOR) >= 150


@pytest.mark.parametrize(("klass", "text"), _FLOOR, ids=lambda v: str(v)[:50])
def test_floored_under_every_policy_and_allow_everything_rules(
    workspace: Path, klass: str, text: str
) -> None:
    for policy, everything in (
        ("allow-all", True),
        ("allow-all", False),
        ("human", False),
        ("risk-based", True),
    ):
        decision = _engine(workspace, policy, everything).evaluate(Action(kind="command", target=text))
        assert (decision.verdict, decision.resolved, decision.layer) == ("deny", "deny", "floor"), (
            klass, text, policy, decision,
        )  # fmt: skip


@pytest.mark.parametrize("text", _CATALOGUE["benign"], ids=lambda v: v[:50])
def test_benign_work_is_not_floored(workspace: Path, text: str) -> None:
    everything = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=text))
    assert everything.layer != "floor", everything
    assert everything.resolved == "allow", everything
    human = _engine(workspace, "human", False).evaluate(Action(kind="command", target=text))
    assert human.verdict != "deny", human


@pytest.mark.parametrize(
    "target", ["/etc/passwd", "/usr/bin/python3", "/boot/grub/grub.cfg", "/dev/sda", "/var/lib/dpkg/status"]
)
def test_write_actions_over_system_files_are_floored(workspace: Path, target: str) -> None:
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="write", target=target))
    assert (decision.verdict, decision.layer) == ("deny", "floor"), decision


def test_a_workspace_under_a_system_tree_is_still_the_workspace(tmp_path: Path) -> None:
    """Deleting inside the workspace is never the floor's, wherever the workspace lives."""
    engine = _engine(tmp_path, "allow-all", True)
    assert engine.evaluate(Action(kind="command", target=f"rm -rf {tmp_path}/build")).layer != "floor"


_WRAPPERS = [
    "", "sudo ", "sudo -u root ", "doas ", "nice -n 5 ", "ionice -c3 ", "timeout 9 ", "nohup ", "stdbuf -o0 ",
    "time ", "env ", "env -i ", "env -u X ", "chrt 1 ", "flock /tmp/l ", "fakeroot ", "eatmydata ",
    "taskset 1 ",
    "numactl -N0 ", "prlimit --nofile=9 ", "setpriv --reuid 0 ", "unshare -r ", "systemd-run ", "strace -f ",
    "ltrace ", "valgrind -q ", "busybox ", "toybox ", "command ", "exec ", "mytool --fast ", "/usr/bin/env ",
]  # fmt: skip
_CORES = [
    "rm -rf {t}", "rm -r -f {t}", "rm --recursive --force {t}", "find {t} -delete",
    "find {t} -exec rm -rf {{}} +",
    "chmod -R 000 {t}", "chown -R nobody {t}", "mv {t} /tmp/gone", "rsync -a --delete e/ {t}",
    "git -C {t} clean -fdx", "git --work-tree={t} clean -fdx", "cargo clean --target-dir {t}",
    "pytest --basetemp={t}", "cmake -E remove_directory {t}", "make -C {t} clean", "mkdocs build -d {t}",
]  # fmt: skip
_TARGETS = [
    "/", "/usr", "/etc", "~", "$HOME", "${HOME}", "/u*", "/{usr,etc}", "~/..", "/usr/lib/x", "'/'", '"/etc"',
    "/var/lib/dpkg", "/boot", "//", "/./", "/usr/../", "/home/bob", "~root", "/*",
]  # fmt: skip
_LOCAL = ["build", "./node_modules", "dist/x", "target/tmp", "'out dir'", "src/gen/*.o"]
_LEAD = ["", "true && ", "ls; ", "echo hi | ", "(", "{ "]


def _close(lead: str) -> str:
    return {"(": ")", "{ ": "; }"}.get(lead, "")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    wrapper=st.sampled_from(_WRAPPERS), core=st.sampled_from(_CORES), target=st.sampled_from(_TARGETS),
    lead=st.sampled_from(_LEAD), nested=st.booleans(),
)  # fmt: skip
def test_any_wrapper_any_spelling_reaches_the_floor(
    workspace: Path, wrapper: str, core: str, target: str, lead: str, nested: bool
) -> None:
    command = wrapper + core.format(t=target)
    if nested:
        command = "bash -c " + shlex.quote(command)
    text = lead + command + _close(lead)
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=text))
    assert (decision.verdict, decision.layer) == ("deny", "floor"), (text, decision)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wrapper=st.sampled_from(_WRAPPERS[:13]), core=st.sampled_from(_CORES), target=st.sampled_from(_LOCAL))
def test_the_same_shapes_on_workspace_paths_are_not_floored(
    workspace: Path, wrapper: str, core: str, target: str
) -> None:
    text = wrapper + core.format(t=target)
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=text))
    assert decision.layer != "floor", (text, decision)
