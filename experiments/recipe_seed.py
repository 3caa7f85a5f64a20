"""One seed of a recipe, from scratch to a tested export, in one command: the per-seed rows of
the recipes' results (docs/results.md).

    python experiments/recipe_seed.py walk_builtin --seed 0

Runs `mjxgap train --recipe NAME --seed N` (resumed if its run folder holds checkpoints), then
`mjxgap select` (the checkpoint chosen on validation episodes and plays, exported and tested
once), and keeps the small results: the export in results/policies/NAME_seedN/ (with its
selection.json and test.json) and results/recipes/NAME_seedN.json and .png (the summary and the
learning curve). Checkpoints stay in --out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil

from common import RESULTS, fail, mjxgap, provenance, read_metrics


def _wall_s(rows: list[dict], per_iteration: int, up_to: int | None = None) -> float:
  """Training seconds to iteration `up_to` (all): each iteration's steps over its steps/s,
  compilation included, process starts not."""
  return sum(per_iteration / r["sps"] for r in rows if up_to is None or r["iteration"] <= up_to)


def _plot(rows: list[dict], selection: dict, per_iteration: int, target: dict,
          title: str, path: pathlib.Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np

  fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
  rows = [r for r in rows if r.get("episode_return") is not None]
  steps = np.array([r["env_steps"] for r in rows]) / 1e6
  smooth = lambda k: np.convolve([r.get(k) or 0.0 for r in rows], np.ones(25) / 25, "same")
  screen = {int(k): v for k, v in selection["screen"].items()}
  at = np.array(sorted(screen)) * per_iteration / 1e6
  if rows and "episode_lin_vel_error_mps" in rows[0]:
    a.plot(steps, smooth("episode_lin_vel_error_mps"), alpha=0.5, label="training episodes")
  a.plot(at, [screen[s]["lin_vel_error_mps"] for s in sorted(screen)], "o",
         label="validation screen (MJX)")
  if target["lin_vel_error_mps"] is not None:
    a.axhline(target["lin_vel_error_mps"], color="k", ls="--", lw=1, label="target")
  a.set_xlabel("env steps (M)")
  a.set_ylabel("velocity-tracking error (m/s)")
  a.legend(fontsize=7)
  b.plot(steps, smooth("fall_rate"), alpha=0.5, label="training episodes")
  b.plot(at, [screen[s]["fall_rate"] for s in sorted(screen)], "o",
         label="validation screen (MJX)")
  b.axhline(target["fall_rate"], color="k", ls="--", lw=1, label="target")
  b.set_xlabel("env steps (M)")
  b.set_ylabel("fall rate")
  b.legend(fontsize=7)
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=80)
  plt.close(fig)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("recipe")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", default="runs/recipes", help="where the run folders go")
  args = p.parse_args()
  name = f"{args.recipe}_seed{args.seed}"
  out = pathlib.Path(args.out) / name
  run, policy = out / "run", out / "policy"
  listing = {r["name"]: r for r in map(json.loads, _recipes())}
  if args.recipe not in listing:
    fail(f"unknown recipe {args.recipe!r}; expected one of: {', '.join(listing)}")
  recipe = listing[args.recipe]
  config = json.loads((run / "config.json").read_text()) if (run / "config.json").is_file() else {}
  rows = read_metrics(run / "metrics.jsonl") if config else []
  done = bool(rows) and rows[-1]["env_steps"] >= recipe["env_steps"]
  if not done:
    resume = ["--resume"] if (run / "checkpoints").is_dir() else ["--recipe", args.recipe]
    mjxgap("train", *resume, "--seed", str(args.seed), "--out", str(run), "--no-progress")
    config = json.loads((run / "config.json").read_text())
  if not (policy / "test.json").is_file():
    shutil.rmtree(policy, ignore_errors=True)
    mjxgap("select", str(run), "--out", str(policy))
  selection = json.loads((policy / "selection.json").read_text())
  test = json.loads((policy / "test.json").read_text())
  rows = read_metrics(run / "metrics.jsonl")
  per_iteration = config["ppo"]["num_envs"] * config["ppo"]["unroll_length"]
  chosen = selection["iteration"]
  summary = {
      **provenance(),
      "recipe": args.recipe, "recipe_sha256": config["recipe_sha256"], "seed": args.seed,
      "env_steps_trained": rows[-1]["env_steps"],
      "training_wall_s": round(_wall_s(rows, per_iteration)),
      "chosen": {"iteration": chosen, "env_steps": selection["env_steps"],
                 "training_wall_s": round(_wall_s(rows, per_iteration, chosen))},
      "test": {k: test["mjx"][k] for k in ("episodes", "lin_vel_error_mps",
                                            "yaw_rate_error_rad_s", "fall_rate",
                                            "fall_rate_ci95")} | {"seed": test["seed"]},
      "plays": test["plays"], "plays_pass": test["plays_pass"],
      "meets_target": test["meets_target"], "target": test["target"],
  }
  kept = RESULTS / "policies" / name
  shutil.rmtree(kept, ignore_errors=True)
  shutil.copytree(policy, kept)
  (RESULTS / "recipes").mkdir(parents=True, exist_ok=True)
  (RESULTS / "recipes" / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
  _plot(rows, selection, per_iteration, test["target"],
        f"{args.recipe}, seed {args.seed}: training episodes and validation screen",
        RESULTS / "recipes" / f"{name}.png")
  print(json.dumps({k: summary[k] for k in ("recipe", "seed", "chosen", "test", "plays_pass",
                                            "meets_target")}))


def _recipes() -> list[str]:
  import subprocess
  import sys

  return subprocess.run([sys.executable, "-m", "mjxgap", "recipes"], check=True, text=True,
                        stdout=subprocess.PIPE).stdout.splitlines()


if __name__ == "__main__":
  main()
