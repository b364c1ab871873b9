"""The attack harness (issue 16's acceptance test): every call the gate allows, executed, does no harm.

Catalogues in `tests/security/catalogues/*.toml` (shapes the permission engine was never tuned on)
run through the real gate and toolbox under the default `human` policy, in a canary world each
(`tests.security.world`). What is allowed runs; careless-approver entries approve every ask; the
final phase (approved push, apply-back and what runs the applied files later) runs where named.
The summary table goes to stdout and to `$ATTACK_REPORT` (default: the test's tmp dir).

Run: `make test PYTEST_ARGS="tests/security -m attack -s" XDIST=`
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.orchestrator.tools.conftest import needs_bwrap
from tests.security.harness import load_catalogues, run_all, summary, table

pytestmark = [pytest.mark.attack, pytest.mark.sandbox, needs_bwrap]


def test_catalogues_are_big_and_varied() -> None:
    entries = load_catalogues()
    assert len(entries) >= 150
    assert len({e.cls for e in entries}) >= 8
    assert sum(1 for e in entries if e.careless) >= 30
    assert sum(1 for e in entries if e.final) >= 20


async def test_executing_what_the_gate_allows_does_no_harm(tmp_path: Path) -> None:
    only = os.environ.get("ATTACK_ONLY")  # a comma-separated list of ids, to replay a few entries
    entries = [e for e in load_catalogues() if not only or e.id in only.split(",")]
    results = await run_all(entries)
    report = Path(os.environ.get("ATTACK_REPORT", tmp_path / "attack-report.json"))
    data = {"summary": summary(results), "results": [r.as_json() for r in results]}
    report.write_text(json.dumps(data, indent=2))
    print("\n" + table(results) + f"\n\nreport: {report}")
    harms = summary(results)["harms"]
    assert not harms, f"{len(harms)} harmful entries: {sorted(harms)}"
