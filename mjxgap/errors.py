"""The one exception type that means "the user gave us bad input"."""


class UserError(Exception):
  """Bad input from a user: the CLI prints its message on one line and exits with status 2.

  The message names the file or option, the field, and what was expected.
  """

  def __init__(self, message: str):
    super().__init__(" ".join(str(message).split()))
