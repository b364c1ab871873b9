"""YAML with line numbers: parse once, remember where every key and list item was written."""

from __future__ import annotations

from typing import Any

import yaml

from orchestrator.errors import TeamConfigError

KeyPath = tuple[str | int, ...]


def load_with_lines(text: str, source: str) -> tuple[Any, dict[KeyPath, int]]:
    """The parsed document and a map from key path to 1-based line; YAML errors name their line."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise TeamConfigError(f"invalid YAML: {exc.problem or exc}", path=source, line=line) from None
    except yaml.YAMLError as exc:
        raise TeamConfigError(f"invalid YAML: {exc}", path=source) from None
    lines: dict[KeyPath, int] = {}
    if root is not None:
        lines[()] = root.start_mark.line + 1
        _walk(root, (), lines)
    return data, lines


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*path, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _walk(item, (*path, index), lines)


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of the longest known prefix of `path` (pydantic locations may go deeper than the YAML)."""
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None:
            return line
    return None


def render_path(path: KeyPath) -> str:
    """`("agents", 1, "backend", "type")` -> `agents[1].backend.type`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
