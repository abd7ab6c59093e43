"""Errors raised by pyswitch: compile-time (`P4CompileError`) and run-time (`SwitchError`)."""

from __future__ import annotations

import argparse


class P4CompileError(Exception):
    """A located error in a P4 program: ``str(e) == "file:line:col: message"``."""

    def __init__(self, file: str, line: int, col: int, message: str) -> None:
        self.file = file
        self.line = line
        self.col = col
        self.message = message
        super().__init__(f"{file}:{line}:{col}: {message}")


class SwitchError(Exception):
    """Base class of run-time API errors of a `Switch` (mapped to P4Runtime codes)."""


class EntryExists(SwitchError):
    """Insert of a table entry whose match key is already present (ALREADY_EXISTS)."""


class EntryNotFound(SwitchError):
    """Modify/delete/read of an entry, group or session that does not exist (NOT_FOUND)."""


class InvalidArgument(SwitchError):
    """Unknown name, value wider than its field, prefix too long, ... (INVALID_ARGUMENT)."""


class UsageError(Exception):
    """A command-line mistake: printed as one line, non-zero exit."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of printing the usage text and a
    message (several lines): every pyswitch command prints one ``prog: message`` line."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)
