"""Running the CLI in-process from tests."""

import pytest

from mjxgap.cli import main


def run_cli(argv, capsys):
  """(exit status, stdout, stderr) of `mjxgap ARGV`."""
  with pytest.raises(SystemExit) as exit_info:
    main(argv)
  out = capsys.readouterr()
  return exit_info.value.code, out.out, out.err
