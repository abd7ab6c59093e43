"""The argument parser of every ``python -m controller`` command: a mistake is one line.

A subcommand whose options depend on its own arguments (``run``: the options of ``--method``)
sets :attr:`Parser.parse_with`; the parser then hands its arguments to that function instead
of parsing them itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = ["Parser", "UsageError"]


class UsageError(Exception):
    """A command-line mistake (one line, exit 2)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` (one line instead of usage +
    message) and that may hand its arguments to ``parse_with``."""

    parse_with: Callable[[list[str], argparse.Namespace | None],
                         tuple[argparse.Namespace, list[str]]] | None = None

    def error(self, message: str) -> NoReturn:
        """Raise the mistake as one line naming the command."""
        raise UsageError(f"{self.prog}: {message}")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, or ``parse_with``'s when set."""
        if self.parse_with is None:
            return super().parse_known_args(args, namespace)
        return self.parse_with(list(sys.argv[1:] if args is None else args), namespace)
