"""Shell analysis: what bash would run, reduced to invocations (program, words, redirects, environment)."""

from approvals.permissions.shell.invocation import Expansion, Invocation, expand, expand_script
from approvals.permissions.shell.parse import MAX_SHELL_CHARS, parse_shell
from approvals.permissions.shell.script import Script, SimpleCommand
from approvals.permissions.shell.words import UNKNOWN, Word

__all__ = [
    "MAX_SHELL_CHARS",
    "UNKNOWN",
    "Expansion",
    "Invocation",
    "Script",
    "SimpleCommand",
    "Word",
    "expand",
    "expand_script",
    "parse_shell",
]
