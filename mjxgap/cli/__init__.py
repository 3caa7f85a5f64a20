"""The `mjxgap` command line: `parser` holds every sub-command and flag, `commands` resolves
and runs them."""

from mjxgap.cli.commands import main, run
from mjxgap.cli.parser import build_parser

__all__ = ["build_parser", "main", "run"]
