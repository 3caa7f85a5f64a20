"""The test suite's wall time from an empty compilation cache, beside the machine's speed then.

    python experiments/suite_time.py --out suite_time.json

Clones this checkout's last commit into a temporary folder and runs the README's test command
there (`python -m pytest -q`, the clone's code first on `PYTHONPATH`: the installed package is
left alone) with an empty compilation cache. Before and after, in a fresh process with an empty
cache, it times XLA's compilation of one reference program under the suite's XLA flags: the
README's 64-world `walk` rollout. On a shared machine whose speed drifts (here by up to a fifth
within an hour) the suite's time is read against that reference, not alone.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

from common import provenance
from mjxgap.files import write_json_atomic

REPO = pathlib.Path(__file__).resolve().parents[1]
REFERENCE = """
import sys
sys.path.insert(0, "tests")
import conftest  # the suite's XLA flags, set before JAX starts
import mjxgap
from jax import monitoring
seconds = []
monitoring.register_event_duration_secs_listener(
    lambda event, s, **_: seconds.append(s) if event.endswith("backend_compile_duration") else 0)
env = mjxgap.make_env("walk", mjxgap.load_robot("builtin"), randomization="nominal_dr")
mjxgap.rollout(env, steps=25, num_envs=64)
print(round(sum(seconds), 2))
"""


def reference_compile_s(clone: pathlib.Path, env: dict) -> float:
  """Seconds XLA spent compiling the reference program, in a fresh process, empty cache."""
  with tempfile.TemporaryDirectory(prefix="mjxgap-reference-cache-") as cache:
    out = subprocess.run([sys.executable, "-c", REFERENCE], cwd=clone, check=True, text=True,
                         capture_output=True, env={**env, "MJXGAP_JAX_CACHE": cache})
  return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", required=True)
  p.add_argument("--pytest-args", default="", help="more pytest arguments (e.g. -k NAME)")
  args = p.parse_args()
  with tempfile.TemporaryDirectory(prefix="mjxgap-suite-") as tmp:
    clone, cache = pathlib.Path(tmp) / "clone", pathlib.Path(tmp) / "cache"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {**os.environ, "PYTHONPATH": str(clone), "CI": "true"}
    before = reference_compile_s(clone, env)
    start = time.perf_counter()
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", *args.pytest_args.split()],
                           cwd=clone, text=True, capture_output=True,
                           env={**env, "MJXGAP_JAX_CACHE": str(cache)})
    wall = time.perf_counter() - start
    after = reference_compile_s(clone, env)
  tail = suite.stdout.strip().splitlines()[-1] if suite.stdout.strip() else ""
  counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}
  result = {**provenance(), "exit_status": suite.returncode, "wall_s": round(wall, 1),
            **counts, "summary_line": tail,
            "reference_compile_s": {"before": before, "after": after},
            "wall_per_reference_s": round(wall / ((before + after) / 2), 1)}
  write_json_atomic(args.out, result)
  print(json.dumps(result))
  if suite.returncode != 0:
    print(suite.stdout[-3000:], file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  main()
