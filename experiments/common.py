"""What the experiment scripts share: running an `mjxgap` command as a user would."""

from __future__ import annotations

import json
import platform
import subprocess
import sys


def mjxgap(*args: str) -> dict | None:
  """Runs `mjxgap ARGS` (printed first); returns its last stdout line parsed as JSON, if any."""
  cmd = [sys.executable, "-m", "mjxgap", *args]
  print("$ mjxgap " + " ".join(args), file=sys.stderr, flush=True)
  out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
  last = out.strip().splitlines()[-1] if out.strip() else ""
  return json.loads(last) if last.startswith("{") else None


def machine() -> str:
  return f"{platform.processor() or platform.machine()}, {platform.system()}"
