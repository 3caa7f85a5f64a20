"""The `stand` benchmark: the `cpu` preset on the built-in robot, randomization
and pushes on (`stand_push.json`: `nominal_dr` with pushes of 0.2-0.6 m/s every 2-5 s), 30
minutes of training on the CPU, then evaluation of the trained policy next to the zero-action
baseline under the same randomization and pushes.

    python experiments/stand_cpu.py --out runs/stand_cpu

Every step is an `mjxgap` command (printed before it runs); `OUT/summary.json` gathers the
figures, `OUT/run/learning_curves.png` is the curve.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from common import keep, mjxgap, provenance


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", default="runs/stand_cpu")
  p.add_argument("--minutes", type=float, default=30.0, help="training wall-clock budget")
  p.add_argument("--dr", default=str(pathlib.Path(__file__).with_name("stand_push.json")))
  p.add_argument("--episodes", type=int, default=256)
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args()
  out = pathlib.Path(args.out)
  run = out / "run"
  out.mkdir(parents=True, exist_ok=True)

  t0 = time.time()
  train = mjxgap("train", "--preset", "cpu", "--robot", "builtin", "--task", "stand",
                 "--dr", args.dr, "--seed", str(args.seed), "--out", str(run), "--no-progress",
                 "--set", f"time_limit_s={args.minutes * 60}")
  common = ["--episodes", str(args.episodes)]
  trained = mjxgap("eval", str(run), *common)
  zero = mjxgap("eval", str(run), *common, "--policy", "zero")
  zero_no_push = mjxgap("eval", str(run), *common, "--policy", "zero", "--dr", "physics")
  bench = mjxgap("bench", "train", "--preset", "cpu", "--num-envs", "256", "--dr", args.dr)
  summary = {
      **provenance(),
      "train": train,
      "trained_policy": trained,
      "zero_action": zero,
      "zero_action_without_pushes_or_delays": zero_no_push,
      "bench_train": bench,
      "episode_length_fraction": {"trained": trained["episode_length_fraction"],
                                  "zero_action": zero["episode_length_fraction"]},
      "total_wall_s": round(time.time() - t0, 1),
  }
  (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  keep(out / "summary.json", "stand_cpu_summary.json")
  keep(run / "learning_curves.png", "stand_cpu_learning_curves.png")
  keep(run / "metrics.jsonl", "stand_cpu_metrics.jsonl.gz")
  print(json.dumps(summary["episode_length_fraction"]))


if __name__ == "__main__":
  main()
