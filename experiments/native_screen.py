"""Which checkpoints of a walk run walk in native MuJoCo (a diagnosis, README "Walking"): each
is exported and played under `walk_cpu.py`'s six commands (20 s each), and scored by issue 16's
bands (`walk_cpu.bands_met`). `walk_cpu.py --select native` plays every checkpoint meeting the
target; this screens any checkpoints, beside a training or after it:

  python experiments/native_screen.py RUN --out OUT/native_screen.json [--steps 5000,5200] [--curve curve.json]

`--curve` takes the steps whose point in a `walk_cpu.py` curve.json meets the target (with
`--steps`, those too). One JSON line per checkpoint (its plays and the bands met, of 7, and how
far off, `walk_cpu.band_miss`); OUT caches them, so an interrupted screen resumes, and
`walk_cpu.py --out OUT --select native` reads the plays from OUT/native_screen.json."""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import tempfile

import walk_cpu
from common import fail


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("run", type=pathlib.Path)
  p.add_argument("--out", type=pathlib.Path, required=True)
  p.add_argument("--steps", default="", help="checkpoint iterations, comma-separated")
  p.add_argument("--curve", type=pathlib.Path, help="a walk_cpu.py curve.json")
  args = p.parse_args(argv)
  try:
    steps = [int(s) for s in args.steps.split(",") if s.strip()]
  except ValueError:
    fail(f"--steps: expected comma-separated checkpoint iterations, got {args.steps!r}")
  if args.curve is not None:
    try:
      steps += [q["iteration"] for q in json.loads(args.curve.read_text())
                if walk_cpu._reached(q)]
    except (OSError, ValueError, KeyError, TypeError) as e:
      fail(f"{args.curve}: not a walk_cpu.py curve.json ({e})")
  if not steps:
    fail("no checkpoints to screen: give --steps or a --curve with points meeting the target")
  done = json.loads(args.out.read_text()) if args.out.exists() else {}
  for step in sorted(set(steps)):
    if str(step) not in done:
      with tempfile.TemporaryDirectory() as tmp:
        done[str(step)] = walk_cpu.native_plays(args.run, step, pathlib.Path(tmp) / "policy")
      args.out.write_text(json.dumps(done, indent=1) + "\n")
    plays = done[str(step)]
    print(json.dumps({"iteration": step, "bands_met": walk_cpu.bands_met(plays),
                      "band_miss": (round(miss, 3) if math.isfinite(miss := walk_cpu.band_miss(plays))
                                    else None),  # None: a fall
                      "fell": [n for n, r in plays.items() if r["fell"]], "plays": plays}),
          flush=True)


if __name__ == "__main__":
  main()
