"""What the experiment scripts share: running an `mjxgap` command as a user would."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shlex
import shutil
import platform
import subprocess
import sys
import time


def mjxgap(*args: str, env: dict[str, str] | None = None) -> dict | None:
  """Runs `mjxgap ARGS` (printed first), with `env` over this process's environment; returns
  its last stdout line parsed as JSON, if any."""
  cmd = [sys.executable, "-m", "mjxgap", *args]
  prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
  print(f"$ {prefix}mjxgap " + " ".join(args), file=sys.stderr, flush=True)
  out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True,
                       env={**os.environ, **env} if env else None).stdout
  last = out.strip().splitlines()[-1] if out.strip() else ""
  return json.loads(last) if last.startswith("{") else None


def fail(message: str) -> None:
  """Bad input: one line and exit status 2, as the CLI."""
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def provenance() -> dict:
  """How, when and where a summary was made: the command line as typed, date, machine, and the
  commit of the code that made it."""
  script = pathlib.Path(sys.argv[0])
  return {"command": f"python experiments/{script.name} " + " ".join(sys.argv[1:]),
          "date": time.strftime("%Y-%m-%d"),
          "machine": f"{platform.processor() or platform.machine()}, {platform.system()}",
          "commit": _commit()}


def _commit() -> str | None:
  """The checkout's commit, "+changes" where its code differs from it (None outside git)."""
  git = ["git", "-C", str(REPO)]
  try:
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], check=True, text=True,
                          capture_output=True).stdout.strip()
    changed = subprocess.run([*git, "status", "--porcelain", "--", "mjxgap", "envs",
                              "experiments/*.py"], check=True, text=True,
                             capture_output=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None
  return head + ("+changes" if changed else "")


REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = pathlib.Path(__file__).with_name("results")


def keep(path: pathlib.Path, name: str) -> pathlib.Path:
  """Copies an artefact of a run into `experiments/results/<name>` (committed; `runs/` is not),
  gzip-compressed when `name` ends in `.gz`."""
  target = RESULTS / name
  target.parent.mkdir(parents=True, exist_ok=True)
  if name.endswith(".gz"):
    with open(path, "rb") as src, gzip.open(target, "wb", compresslevel=9) as dst:
      shutil.copyfileobj(src, dst)
  else:
    shutil.copyfile(path, target)
  return target


def read_metrics(path: pathlib.Path) -> list[dict]:
  """The rows of a `metrics.jsonl` (or `.jsonl.gz`)."""
  opener = gzip.open if str(path).endswith(".gz") else open
  with opener(path, "rt") as f:
    return [json.loads(line) for line in f if line.strip()]
