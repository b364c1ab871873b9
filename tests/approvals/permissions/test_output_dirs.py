"""Engine v2, round 2: builders that empty or replace their output directory reach the floor.

`hugo --cleanDestinationDir -d /`, `mkdocs build -d ~`, `pytest --basetemp=/etc`, and the same
options handed over in a variable of options (`PYTEST_ADDOPTS=--basetemp=/`): a root, system or
home directory there is deleted, so the floor denies it under every policy and rule set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, PolicyName
from approvals.permissions.floor.effects import OUTPUT_DIRS
from tests.approvals.permissions.engines import engine as _engine


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


WIPES = [
    "hugo --cleanDestinationDir --destination /",
    "hugo --cleanDestinationDir -d /etc",
    "hugo -d ~ --cleanDestinationDir",
    "hugo --destination=/usr --cleanDestinationDir",
    "HUGO_DESTINATION=/ hugo --cleanDestinationDir",
    "mkdocs build --site-dir /usr",
    "mkdocs build -d ~",
    "mkdocs build --site-dir=/home/tester",
    "mkdocs gh-deploy -d /etc",
    "python -m mkdocs build -d /",
    "jekyll build --destination /",
    "jekyll build -d /var",
    "bundle exec jekyll build -d /etc",
    "pelican content -o / --delete-output-directory",
    "pelican content --output /usr -d",
    "zola build -o /etc",
    "zola build --output-dir ~",
    "mdbook build -d /",
    "mdbook build --dest-dir /home/tester",
    "docusaurus build --out-dir /",
    "next export -o /",
    "next export --outdir /etc",
    "ng build --output-path=/",
    "vite build --outDir / --emptyOutDir",
    "npx vite build --outDir /etc --emptyOutDir",
    "webpack --output-path / --output-clean",
    "pyinstaller -y --distpath / app.py",
    "pytest --basetemp=/etc",
    "pytest --basetemp /",
    "python -m pytest --basetemp=~",
    'PYTEST_ADDOPTS="--basetemp=/" pytest',
    'PYTEST_ADDOPTS="-q --basetemp /home/tester" python -m pytest',
    "env PYTEST_ADDOPTS=--basetemp=/usr pytest -q",
    "PYTEST_ADDOPTS='-x --basetemp=/etc' py.test",
    "cargo clean --target-dir /",
    "CARGO_TARGET_DIR=/usr cargo clean",
    "sudo hugo -d / --cleanDestinationDir",
    "bash -c 'mkdocs build -d /'",
    "timeout 60 pytest --basetemp=/var",
    "hugo --cleanDestinationDir -d /home",
    "sphinx-build -M clean docs /",
    "pytest --cache-clear -o cache_dir=/etc",
    "pytest -o cache_dir=/ --cache-clear",
    "python -m pytest --cache-clear --override-ini=cache_dir=/usr",
    'PYTEST_ADDOPTS="--cache-clear -o cache_dir=/usr" pytest',
    'MKDOCS_OPTS="-d /" mkdocs build',
    'ZOLA_ARGS="-o /etc" zola build',
    'HUGO_FLAGS="--cleanDestinationDir -d /" hugo',
    "sphinx-build -M clean docs ~",
    "sphinx-build -b html docs /etc",
]


@pytest.mark.parametrize("command", WIPES)
@pytest.mark.parametrize("policy", ["allow-all", "human"])
def test_a_wiped_output_directory_at_a_critical_place_is_the_floor(
    workspace: Path, command: str, policy: PolicyName
) -> None:
    decision = _engine(workspace, policy, True).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision.reason)
    assert decision.layer == "floor", (command, decision.reason)


INSIDE = [
    "hugo -d public --cleanDestinationDir",
    "mkdocs build -d site",
    "mkdocs build --site-dir build/site",
    "jekyll build -d _site",
    "zola build -o public",
    "pytest --basetemp=tmp/pt",
    'PYTEST_ADDOPTS="--basetemp=.tmp" pytest',
    "vite build --outDir dist --emptyOutDir",
    "next export -o out",
    "mdbook build -d book",
    "pelican content -o output -d",
    "webpack --output-path dist --output-clean",
    "sphinx-build -M clean docs _build",
    "pytest --cache-clear -o cache_dir=.cache",
    "pytest --cache-clear",
    "sphinx-build -E -b html docs _build/html",
]


@pytest.mark.parametrize("command", INSIDE)
def test_workspace_output_directories_are_not_the_floor(workspace: Path, command: str) -> None:
    decision = _engine(workspace, "allow-all", False).evaluate(Action(kind="command", target=command))
    assert decision.layer != "floor", (command, decision.reason)
    assert decision.resolved == "allow", (command, decision.reason)


_CRITICAL = st.sampled_from(["/", "/etc", "/usr", "/var", "~", "/home/tester", "/boot", "/lib"])
_WIPERS = sorted(name for name, table in OUTPUT_DIRS.items() if table.wipes and not table.wipe_flags)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(_WIPERS), place=_CRITICAL, equals=st.booleans())
def test_every_wiping_tool_in_the_table_floors_a_critical_directory(
    workspace: Path, tool: str, place: str, equals: bool
) -> None:
    table = OUTPUT_DIRS[tool]
    option = sorted(table.options)[-1]
    value = f"{option}={place}" if equals and option.startswith("--") else f"{option} {place}"
    sub = f" {table.subcommand}" if table.subcommand else " build"
    command = f"{tool}{sub} {value}"
    decision = _engine(workspace, "allow-all", True).evaluate(Action(kind="command", target=command))
    assert decision.resolved == "deny", (command, decision.reason)
    assert decision.layer == "floor", (command, decision.reason)
