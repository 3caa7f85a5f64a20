"""The results page's throughput tables, all measured by one command at one commit.

    python experiments/throughput.py --out experiments/results/throughput.json
    python experiments/throughput.py --robots builtin,PATH/berkeley.xml,PATH/g1.xml --out ...

Every measurement is an `mjxgap bench` command (printed before it runs; each compiles its own
programs, no persistent cache): env steps/s against bare `mjx.step` per robot, the cost of each
randomization preset and of the walk task, the learner's overhead (the `cpu` preset's, and
the `walk_builtin` recipe's, which `stand_builtin` shares, on its own CPU devices), and env
throughput and memory against the number of worlds. The JSON keeps each
command beside its result; docs/results.md renders its tables from it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import pathlib

from common import fail, mjxgap, provenance
from mjxgap.files import write_json_atomic

REPEATS = "2"  # timed runs per command, the best kept
SCALE_ENVS = (64, 256, 1024, 4096, 8192)


def commands(robots: list[str]) -> dict[str, list[tuple[str, ...]]]:
  """Table name -> the `mjxgap` commands of its rows."""
  env = lambda robot, task, dr, envs=256, steps=100, repeats=REPEATS: (
      "bench", "env", "--robot", robot, "--task", task, "--dr", dr, "--num-envs", str(envs),
      "--steps", str(steps), "--repeats", repeats)
  return {
      # fewer control steps for the robots with 10 substeps, so each timed run is short
      "robots": [env(r, "stand", "none", steps=100 if r == "builtin" else 50) for r in robots],
      "randomization": [env("builtin", "stand", dr) for dr in
                        ("none", "nominal_dr", "stand_training", "walk_training", "wide")]
                       + [env("builtin", "walk", dr) for dr in ("none", "walk_training")],
      "learner": [("bench", "train", "--robot", "builtin", "--task", "stand", "--dr",
                   "stand_training", "--preset", "cpu", "--num-envs", "256"),
                  ("bench", "train", "--recipe", "walk_builtin")],
      "scale": [env("builtin", "stand", "none", envs=n, steps=10, repeats="1")
                for n in SCALE_ENVS],
  }


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", required=True, help="the JSON to write")
  p.add_argument("--robots", default="builtin,berkeley_humanoid,unitree_g1",
                 help="comma-separated robots of the per-robot table (built-in name, MJCF path "
                      "or Menagerie name); default: the built-in robot, Berkeley Humanoid, G1")
  p.add_argument("--only", default=None, help="comma-separated tables to measure (default all)")
  args = p.parse_args()
  out = pathlib.Path(args.out)
  if not out.parent.is_dir():
    fail(f"--out {out}: no such folder {out.parent}")
  tables = commands([r for r in args.robots.split(",") if r])
  only = tables if args.only is None else args.only.split(",")
  unknown = sorted(set(only) - set(tables))
  if unknown:
    fail(f"--only: unknown table {unknown[0]!r} (known: {', '.join(tables)})")
  result = {**provenance(), "cpus": os.cpu_count(),
            "versions": {k: importlib.metadata.version(k) for k in ("jax", "mujoco", "mjxgap")},
            "tables": {
      name: [{"command": "mjxgap " + " ".join(cmd), "result": mjxgap(*cmd)} for cmd in rows]
      for name, rows in tables.items() if name in only}}
  write_json_atomic(out, result)


if __name__ == "__main__":
  main()
