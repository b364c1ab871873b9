"""No module of the bot or the orchestrator grows past 500 lines (issue 20).

A module that long does several jobs; split it along them (as the run supervisor, the outbox, the
sandbox and the wiring were) rather than squeezing lines. Exempt: declarative tables, which are
long because the facts are many, and the Slack emulator, a test double of a whole API.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 500
ROOMS = ("bot", "orchestrator")
# Each entry says why it may be longer.
ALLOWED = {
    "bot/playground/emulator.py": "the Slack emulator: one stand-in for the whole Web API",
}


def lines_of(path: Path) -> int:
    with path.open("rb") as file:
        return sum(1 for _ in file)


def too_long(root: Path = ROOT, limit: int = LIMIT) -> dict[str, int]:
    """Every module under the rooms over `limit` lines and not allowed, with its length."""
    found: dict[str, int] = {}
    for room in ROOMS:
        for path in sorted((root / room).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name not in ALLOWED and (count := lines_of(path)) > limit:
                found[name] = count
    return found


def test_no_module_is_over_500_lines() -> None:
    assert too_long() == {}, "split these along their jobs, or (a declarative table) allow them here"


def test_every_allowed_module_still_exists() -> None:
    # An allowance outliving its module would silently exempt whatever takes the name next.
    assert [name for name in ALLOWED if not (ROOT / name).is_file()] == []


def test_a_long_module_is_caught(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "orchestrator" / "deep").mkdir(parents=True)
    (tmp_path / "bot" / "short.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "orchestrator" / "deep" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    assert too_long(tmp_path) == {"orchestrator/deep/long.py": LIMIT + 1}
