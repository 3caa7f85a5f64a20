"""The `mjxgap` command line: `commands` parses and dispatches, `actuator` runs the motor-log
commands."""

from mjxgap.cli.commands import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
