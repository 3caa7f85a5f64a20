"""MkDocs hooks: the reference pages written from the code itself, so they cannot drift from it.

A page holds a marker comment that `on_page_markdown` replaces:
`<!-- mjxgap:cli -->` (every command's `--help`), `<!-- mjxgap:config NAME -->` (a config
dataclass's fields: type, default and the comment beside each), `<!-- mjxgap:api -->` (the
public API, rendered by mkdocstrings from the docstrings).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
import textwrap

CONFIGS = {
    "TrainConfig": "mjxgap.runs.config",
    "Stage": "mjxgap.runs.config",
    "PPOConfig": "mjxgap.agent.config",
    "TaskConfig": "mjxgap.env.task",
    "CommandConfig": "mjxgap.env.task",
    "Target": "mjxgap.runs.recipe",
    "Profile": "mjxgap.gap.profiles",
    "Physics": "mjxgap.gap.profiles",
    "Motor": "mjxgap.gap.profiles",
    "Timing": "mjxgap.gap.profiles",
    "Sensing": "mjxgap.gap.profiles",
    "Disturbances": "mjxgap.gap.profiles",
}


def _cli() -> str:
  from mjxgap.cli.parser import build_parser

  out = []

  def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
    out.append(f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`\n")
    out.append("```text\n" + parser.format_help().rstrip() + "\n```\n")
    for action in parser._actions:
      if isinstance(action, argparse._SubParsersAction):
        for name, sub in action.choices.items():
          walk(sub, [*path, name])

  walk(build_parser(), ["mjxgap"])
  return "\n".join(out)


def _field_comments(cls) -> dict[str, str]:
  """Each field's comment: the one at the end of its line, else the lines just above it."""
  comments, above = {}, []
  for line in textwrap.dedent(inspect.getsource(cls)).splitlines()[1:]:
    text = line.strip()
    if text.startswith("#"):
      above.append(text.lstrip("# "))
      continue
    match = re.match(r"(\w+)\s*:[^#]*?(?:#\s*(.*))?$", text)
    if match and not text.startswith(("def ", "@", '"""')):
      comments[match.group(1)] = match.group(2) or " ".join(above)
    above = []
  return comments


def _config(name: str) -> str:
  cls = getattr(importlib.import_module(CONFIGS[name]), name)
  comments = _field_comments(cls)
  doc = inspect.getdoc(cls) or ""
  rows = [f"`{cls.__module__}.{name}`: {doc.splitlines()[0] if doc else ''}\n",
          "| field | type | default | meaning |", "|---|---|---|---|"]
  for f in dataclasses.fields(cls):
    if f.default is not dataclasses.MISSING:
      default = repr(f.default)
    elif f.default_factory is not dataclasses.MISSING:
      default = repr(f.default_factory())
    else:
      default = "(required)"
    if len(default) > 60:
      default = default[:57] + "..."
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    cells = [f"`{f.name}`", f"`{kind}`", f"`{default}`", comments.get(f.name, "")]
    rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
  return "\n".join(rows) + "\n"


def _api() -> str:
  import mjxgap

  lines = []
  for name in mjxgap.__all__:
    module = mjxgap._API[name]
    lines.append(f"## `mjxgap.{name}`\n\n::: {module}.{name}\n")
  return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
  markdown = markdown.replace("<!-- mjxgap:cli -->", _cli())
  markdown = markdown.replace("<!-- mjxgap:api -->", _api())
  return re.sub(r"<!-- mjxgap:config (\w+) -->", lambda m: _config(m.group(1)), markdown)
