"""The installed package's version (pyproject.toml's, read from its metadata: one definition)."""

from importlib.metadata import version

__version__ = version("mjxgap")
