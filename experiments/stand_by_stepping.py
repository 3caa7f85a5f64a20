"""Does a walking policy, asked to stand still, ride out the pushes that throw a policy that
keeps its feet in place? Checkpoints of a walking run, each under the zero command, on
validation episodes.

    python experiments/stand_by_stepping.py runs/recipes/walk_builtin_seed0/run \
        --every-env-steps 4000000 --out experiments/results/stand_by_stepping.json

For each checkpoint about `--every-env-steps` apart (and the last), `mjxgap eval RUN --step S
--command 0,0,0 --dr D --seed 2 --episodes 128 --falls` under each randomization of `--dr`
(default: `stand_training`, the standing recipe's target, pushes to 0.5 m/s; and `nominal_dr`,
pushes to 1 m/s). Seed 2 is the recipes' validation seed: these figures choose a recipe, so they
are never test figures. Writes the falls per checkpoint and, for each fall, when it came.
"""

from __future__ import annotations

import argparse
import json
import pathlib

from common import fail, mjxgap, provenance
from mjxgap.evaluation.selection import VALIDATION_SEED
from mjxgap.files import write_json_atomic
from mjxgap.runs import checkpoint


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("run", help="a walking run folder (mjxgap train --task walk or a walk recipe)")
  p.add_argument("--every-env-steps", type=int, default=4_000_000)
  p.add_argument("--dr", default="stand_training,nominal_dr",
                 help="comma-separated randomizations to stand under")
  p.add_argument("--episodes", type=int, default=128)
  p.add_argument("--out", required=True, help="the JSON to write")
  args = p.parse_args()
  run, out = pathlib.Path(args.run), pathlib.Path(args.out)
  steps = checkpoint.steps(run)
  if not (run / "config.json").is_file() or not steps:
    fail(f"{run}: not a training run with checkpoints (config.json, checkpoints/)")
  if not out.parent.is_dir():
    fail(f"--out {out}: no such folder {out.parent}")
  config = json.loads((run / "config.json").read_text())
  per_iteration = config["ppo"]["num_envs"] * config["ppo"]["unroll_length"]
  chosen, next_at = [], 0
  for s in steps:
    if s * per_iteration >= next_at:
      chosen.append(s)
      next_at = s * per_iteration + args.every_env_steps
  if chosen[-1] != steps[-1]:
    chosen.append(steps[-1])
  rows = []
  for s in chosen:
    for dr in args.dr.split(","):
      r = mjxgap("eval", str(run), "--step", str(s), "--command", "0,0,0", "--dr", dr,
                 "--seed", str(VALIDATION_SEED), "--episodes", str(args.episodes), "--falls")
      rows.append({"iteration": s, "env_steps": s * per_iteration, "dr": dr,
                   "fall_rate": r["fall_rate"], "fall_rate_ci95": r["fall_rate_ci95"],
                   "fall_times_s": sorted(f["time_s"] for f in r["falls"]),
                   "mean_forward_velocity_mps": r["mean_forward_velocity_mps"],
                   "mean_lateral_velocity_mps": r["mean_lateral_velocity_mps"]})
      print(json.dumps(rows[-1]), flush=True)
  summary = {**provenance(), "run": str(run), "recipe": config.get("recipe"),
             "seed": config.get("seed"), "episodes": args.episodes,
             "validation_seed": VALIDATION_SEED, "rows": rows}
  write_json_atomic(out, summary)


if __name__ == "__main__":
  main()
