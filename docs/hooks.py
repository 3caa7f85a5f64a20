"""MkDocs hooks: the reference pages written from the code itself, so they cannot drift from it.

A page holds a marker comment that `on_page_markdown` replaces:
`<!-- mjxgap:cli -->` (every command's `--help`), `<!-- mjxgap:config NAME -->` (a config
dataclass's fields: type, default and the comment beside each), `<!-- mjxgap:api -->` (the
public API, rendered by mkdocstrings from the docstrings), `<!-- mjxgap:throughput -->`,
`<!-- mjxgap:sysid -->` and `<!-- mjxgap:fine_tune -->` (result tables, from the JSON the
experiment scripts write).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import pathlib
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


THROUGHPUT = pathlib.Path(__file__).resolve().parents[1] / "experiments/results/throughput.json"
# table name -> its heading, and its columns: (header, how a row's result gives the cell)
_n = lambda key, digits=0: lambda r: f"{r[key]:,.{digits}f}"
_MB = lambda r: f"{r['peak_memory_bytes'] / 1e6:,.1f} MB"
THROUGHPUT_TABLES = {
    "robots": ("Env step against bare physics, per robot (`stand`, no randomization, 256 worlds, "
               "zero actions, auto-reset)", [
        ("robot", lambda r: r["robot"]), ("substeps", lambda r: str(r["n_substeps"])),
        ("env steps/s", _n("env_steps_per_s")), ("physics steps/s", _n("physics_steps_per_s")),
        ("bare `mjx.step` steps/s", _n("raw_physics_steps_per_s")),
        ("overhead", _n("overhead", 3)), ("compile (s)", _n("compile_s", 1))]),
    "randomization": ("The cost of randomization and of the task (built-in robot, 256 worlds)", [
        ("task", lambda r: r["task"]), ("`--dr`", lambda r: f"`{r['dr']}`"),
        ("env steps/s", _n("env_steps_per_s")), ("overhead", _n("overhead", 3)),
        ("per-world model bytes", _n("bytes_per_env")), ("compile (s)", _n("compile_s", 1))]),
    "learner": ("What learning costs (`mjxgap bench train`, 5 iterations)", [
        ("learner", lambda r: f"`{r['recipe']}` recipe" if r.get("recipe")
         else f"`{r['preset']}` preset"),
        ("task", lambda r: r["task"]), ("`--dr`", lambda r: f"`{r['dr']}`"),
        ("envs", _n("num_envs")), ("devices", _n("device_count")),
        ("train env steps/s", _n("train_steps_per_s")),
        ("rollout-only env steps/s", _n("rollout_steps_per_s")),
        ("learner overhead", _n("learner_overhead", 2)),
        ("time to first iteration (s)", _n("time_to_first_iteration_s", 1))]),
    "scale": ("Throughput and memory against the number of worlds (`stand`, no randomization, "
              "one timed run of 10 steps)", [
        ("worlds", _n("num_envs")), ("env steps/s", _n("env_steps_per_s")),
        ("bare `mjx.step` / substeps", lambda r: f"{r['raw_physics_steps_per_s'] / r['n_substeps']:,.0f}"),
        ("peak memory", _MB), ("per world (B)", _n("peak_memory_bytes_per_env")),
        ("env state per world (B)", _n("state_bytes_per_env"))]),
}


def _throughput(path: pathlib.Path = THROUGHPUT) -> str:
  """The tables of a `throughput.py` JSON, each with its commands, machine and date."""
  if not path.is_file():
    return ("Not measured at this version: `python experiments/throughput.py --out "
            "experiments/results/throughput.json`.\n")
  data = json.loads(path.read_text())
  versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items())
  out = [f"`{data['command']}`: {data['machine']}, {data['cpus']} CPUs, {data['date']}; "
         f"{versions}.\n"]
  for name, rows in data["tables"].items():
    title, columns = THROUGHPUT_TABLES[name]
    out += [f"**{title}**\n", "| " + " | ".join(h for h, _ in columns) + " |",
            "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell(row["result"]) for _, cell in columns) + " |" for row in rows]
    out += ["", "```bash", *(row["command"] for row in rows), "```", ""]
  return "\n".join(out)


SYSID = THROUGHPUT.parent / "sysid_recovery.json"


def _sysid(path: pathlib.Path = SYSID) -> str:
  """The parameter-recovery table of `sysid_recovery.py`, with its command, machine and date."""
  if not path.is_file():
    return ("Not measured at this version: `python experiments/sysid_recovery.py --out "
            "experiments/results/sysid_recovery.json`.\n")
  data = json.loads(path.read_text())
  params = ("kp", "damping", "frictionloss", "armature")
  out = [f"`{data['command']}`: {data['machine']}, {data['date']}; {data['seconds']:g} s of "
         "stand logs per instance.\n",
         "| instance | loop delay fitted (ms) | true actuation delay (ms) "
         "| true bus staleness (ms) | " + " | ".join(f"{p}: median / max error %, truth in interval" for p in params)
         + " | joint position RMS, file -> fit (rad) | payload fitted / true (kg) "
         "| COM error (m) | base tilt RMS, file -> fit (rad) | standing fit applied |",
         "|" + "---|" * (9 + len(params))]
  for r in data["instances"]:
    d = r["delay_ms"]
    cells = [f"`{r['instance']}`", f"{d['fitted_loop']:g} ± {d['half_width_95']:g}",
             f"{d['true_actuation']:g}", ", ".join(f"{x:g}" for x in d["true_bus_staleness"])]
    cells += [f"{r[p]['median_error_pct']:g} / {r[p]['max_error_pct']:g}, "
              f"{r[p]['interval_covers_truth']}" for p in params]
    rms = r["joint_pos_rms_rad"]
    cells.append(f"{rms['before']:.4f} -> {rms['after']:.4f}")
    b = r["body"]
    tilt = b["base_orientation_rms_rad"]
    cells += [f"{b['payload_kg']:.2f} / {b['true_payload_kg']:.2f}", f"{b['com_error_m']:.3f}",
              f"{tilt['before']:.3f} -> {tilt['after']:.3f}", "yes" if b["applied"] else "no"]
    out.append("| " + " | ".join(cells) + " |")
  return "\n".join(out) + "\n"


FINE_TUNE = THROUGHPUT.parent / "fine_tune.json"
ARMS = (("before", "before"), ("more_training", "more training"), ("sysid", "sysid"),
        ("delta", "delta"), ("both", "sysid + delta"))


def _fine_tune(path: pathlib.Path = FINE_TUNE) -> str:
  """The before/after table of `fine_tune.py`: survival and tracking error per arm."""
  if not path.is_file():
    return ("Not measured at this version: `python experiments/fine_tune.py --work "
            "runs/fine_tune --out experiments/results/fine_tune.json`.\n")
  data = json.loads(path.read_text())
  arms = [(k, name) for k, name in ARMS
          if any(k in row for row in data["instances"].values())]
  out = [f"`{data['command']}`: {data['machine']}, {data['date']}; fine-tuning "
         f"{data['fine_tune_env_steps']:,} env steps each, {data['episodes']} native episodes "
         "of 20 s per cell. Survival (95% interval) / tracking error (m/s).\n",
         "| instance | " + " | ".join(name for _, name in arms)
         + " | loop delay fitted (ms) | delta: held-out joint RMS without -> with (rad) |",
         "|" + "---|" * (len(arms) + 3)]
  for name, row in data["instances"].items():
    cells = [f"`{name}`"]
    for k, _ in arms:
      if k not in row:
        cells.append("not run")
        continue
      s_, t = row[k]["survival"], row[k]["tracking_error_mps"]
      cells.append(f"{s_['value']:.2f} ({s_['low']:.2f}-{s_['high']:.2f}) / {t['value']:.2f}")
    ident = row.get("identified")
    if ident:
      held = ident["delta_held_out_joint_pos_rms_rad"]["delta_fit"]
      cells += [f"{ident['loop_delay_ms']:g}", f"{held['without']:.4f} -> {held['with']:.4f}"]
    else:
      cells += ["", ""]
    out.append("| " + " | ".join(cells) + " |")
  return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
  markdown = markdown.replace("<!-- mjxgap:cli -->", _cli())
  markdown = markdown.replace("<!-- mjxgap:api -->", _api())
  if "<!-- mjxgap:throughput -->" in markdown:
    markdown = markdown.replace("<!-- mjxgap:throughput -->", _throughput())
  if "<!-- mjxgap:sysid -->" in markdown:
    markdown = markdown.replace("<!-- mjxgap:sysid -->", _sysid())
  if "<!-- mjxgap:fine_tune -->" in markdown:
    markdown = markdown.replace("<!-- mjxgap:fine_tune -->", _fine_tune())
  return re.sub(r"<!-- mjxgap:config (\w+) -->", lambda m: _config(m.group(1)), markdown)
