"""The one exception type that means "the user gave us bad input"."""


class UserError(Exception):
  """Bad input from a user: the CLI prints its message on one line and exits with status 2.

  The message names the file or option, the field, and what was expected.
  """

  def __init__(self, message: str):
    super().__init__(" ".join(str(message).split()))


def did_you_mean(name: str, known) -> str:
  """`"; did you mean 'walk'?"` for the known name closest to a mistyped `name`, else `""`."""
  import difflib

  close = difflib.get_close_matches(name, list(known), n=1)
  return f"; did you mean {close[0]!r}?" if close else ""
