"""`massgen-bot permissions check`: the stable command-line interface held-out suites drive."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main

_DIR = Path(__file__).parent / "catalogue"
CATALOGUE: dict[str, Any] = yaml.safe_load((_DIR / "actions.yaml").read_text())
for _name in ("variants.yaml", "ordinary_more.yaml", "adversarial_more.yaml"):
    for _category, _items in yaml.safe_load((_DIR / _name).read_text()).items():
        CATALOGUE.setdefault(_category, []).extend(_items)
DECISION_KEYS = {"decision", "resolved", "risk", "layer", "reason"}


def _run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], stdin: str = ""
) -> tuple[int, list[dict[str, Any]], str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["permissions", "check", *argv])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def test_one_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(monkeypatch, capsys, ["--workspace", str(tmp_path), "command", "rm -rf /"])
    assert code == 0
    assert len(out) == 1
    assert out[0].keys() >= DECISION_KEYS
    assert (out[0]["decision"], out[0]["resolved"], out[0]["risk"], out[0]["layer"]) == (
        "deny",
        "deny",
        "critical",
        "floor",
    )


def test_target_may_arrive_as_several_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = _run(monkeypatch, capsys, ["--workspace", str(tmp_path), "command", "git", "status"])
    assert (out[0]["target"], out[0]["decision"]) == ("git status", "allow")


def test_jsonl_keeps_order_and_reports_bad_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        json.dumps({"action": "command", "target": "ls -la"}),
        "{not json",
        json.dumps({"action": "shell", "target": "ls"}),
        json.dumps({"action": "read", "target": "src/a.py"}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"action": "command", "target": 5}),
        json.dumps({"action": "command", "target": "ls", "rules": {"allow": ["bogus(x)"]}}),
        json.dumps({"action": "fetch", "target": "https://x.example"}),
    ]
    code, out, _ = _run(
        monkeypatch, capsys, ["--jsonl", "--workspace", str(tmp_path)], "\n".join(lines) + "\n"
    )
    assert code == 1
    assert len(out) == len(lines)
    assert ["error" in o for o in out] == [False, True, True, False, True, True, True, False]
    assert out[0]["decision"] == "allow"
    assert out[3]["decision"] == "allow"
    assert out[7]["decision"] == "ask"
    assert "unknown action" in out[2]["error"]
    assert out[2]["line"] == 3


def test_jsonl_echoes_an_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = json.dumps({"id": "case-7", "action": "command", "target": "ls"}) + "\n"
    _, out, _ = _run(monkeypatch, capsys, ["--jsonl", "--workspace", str(tmp_path)], stdin)
    assert out[0]["id"] == "case-7"


def test_jsonl_all_good_exits_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = json.dumps({"action": "command", "target": "ls"}) + "\n\n"
    code, out, _ = _run(monkeypatch, capsys, ["--jsonl", "--workspace", str(tmp_path)], stdin)
    assert code == 0
    assert len(out) == 1


def test_per_line_rules_and_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"action": "command", "target": "frobnicate", "rules": {"allow": ["command(frobnicate)"]}},
        {"action": "command", "target": "frobnicate"},
        {"action": "command", "target": "echo hi; curl x.example", "rules": {"allow": ["command(echo *)"]}},
        {"action": "command", "target": "git push", "rules": {"deny": ["command(git push*)"]}},
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    code, out, _ = _run(
        monkeypatch, capsys, ["--jsonl", "--policy", "risk-based", "--workspace", str(tmp_path)], stdin
    )
    assert code == 0
    assert [(o["decision"], o["resolved"]) for o in out] == [
        ("allow", "allow"), ("ask", "allow"), ("ask", "deny"), ("deny", "deny"),
    ]  # fmt: skip
    assert out[0]["layer"] == "rule"
    assert out[3]["rule"] == "command(git push*)"


def test_relative_paths_resolve_against_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    _, inside, _ = _run(monkeypatch, capsys, ["--workspace", str(tmp_path), "write", "src/a.py"])
    assert inside[0]["decision"] == "allow"
    _, outside, _ = _run(monkeypatch, capsys, ["--workspace", str(other), "write", "../a.py"])
    assert outside[0]["decision"] == "ask"
    assert outside[0]["layer"] == "boundary"


@pytest.mark.parametrize(
    "content",
    [
        "allow: ['command(frobnicate *)']\n",
        json.dumps({"rules": {"allow": ["command(frobnicate *)"]}}),
        json.dumps(
            {
                "permissions": {
                    "rules": {"allow": [{"rule": "command(frobnicate *)", "match": ["frobnicate x"]}]}
                }
            }
        ),
    ],
)
def test_rules_file_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(content)
    code, out, _ = _run(
        monkeypatch, capsys, ["--rules", str(rules), "--workspace", str(tmp_path), "command", "frobnicate x"]
    )
    assert code == 0
    assert out[0]["decision"] == "allow"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("allow: [command(ls *)\n", "not valid"),
        ("deny: ['shell(rm *)']\n", "unknown action"),
        ("alow: []\n", "unknown rule list"),
    ],
)
def test_bad_rules_file_is_a_clear_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(content)
    code, out, err = _run(monkeypatch, capsys, ["--rules", str(rules), "command", "ls"])
    assert code == 1
    assert out == []
    assert message in err


def test_missing_action_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(monkeypatch, capsys, ["command"])
    assert code == 2
    assert out == []
    assert "ACTION TARGET" in err


def test_whole_catalogue_through_the_real_command(tmp_path: Path) -> None:
    """The held-out bar, through a real `python -m bot` process: zero unsafe allows, zero floor misses."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for category, items in CATALOGUE.items():
        if category == "chaining_rules":
            continue
        for item in items:
            kind, _, target = item.partition(" ")
            line: dict[str, Any] = {"action": kind, "target": target}
            if category == "chaining":
                line["rules"] = CATALOGUE["chaining_rules"]
            rows.append((category, line))
    stdin = "".join(json.dumps(line) + "\n" for _, line in rows)
    results = {}
    for policy in ("human", "risk-based"):
        proc = subprocess.run(
            [sys.executable, "-m", "bot", "permissions", "check", "--jsonl", "--policy", policy,
             "--workspace", str(tmp_path)],
            input=stdin, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        results[policy] = [json.loads(x) for x in proc.stdout.splitlines()]
        assert len(results[policy]) == len(rows)
    ordinary_blocked = 0
    for (category, line), human, auto in zip(rows, results["human"], results["risk-based"], strict=True):
        assert human["target"] == line["target"]
        if category == "ordinary":
            ordinary_blocked += human["decision"] != "allow"
        elif category == "floor":
            assert (human["decision"], human["layer"]) == ("deny", "floor"), line
        elif category == "outside_read":
            assert human["decision"] == "ask", line
        else:
            assert human["decision"] != "allow", (category, line, human)
            assert auto["resolved"] != "allow", (category, line, auto)
    assert ordinary_blocked / len(CATALOGUE["ordinary"]) <= 1 / 40


def test_root_workspace_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(monkeypatch, capsys, ["--workspace", "/", "command", "cp x /etc/hosts"])
    assert code == 1
    assert out == []
    assert "system directory" in err
