"""What the experiment scripts share: running an `mjxgap` command as a user would."""

from __future__ import annotations

import json
import pathlib
import platform
import subprocess
import sys
import time


def mjxgap(*args: str) -> dict | None:
  """Runs `mjxgap ARGS` (printed first); returns its last stdout line parsed as JSON, if any."""
  cmd = [sys.executable, "-m", "mjxgap", *args]
  print("$ mjxgap " + " ".join(args), file=sys.stderr, flush=True)
  out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
  last = out.strip().splitlines()[-1] if out.strip() else ""
  return json.loads(last) if last.startswith("{") else None


def provenance() -> dict:
  """How, when and where a summary was made: the command line as typed, date, machine."""
  script = pathlib.Path(sys.argv[0])
  return {"command": f"python experiments/{script.name} " + " ".join(sys.argv[1:]),
          "date": time.strftime("%Y-%m-%d"),
          "machine": f"{platform.processor() or platform.machine()}, {platform.system()}"}
