"""Closing the loop on robot instances: the committed walking policy before and after fine-tuning
in a simulator aligned with each instance from its logs, as a user would run it.

    python experiments/fine_tune.py --work runs/fine_tune --out experiments/results/fine_tune.json

Per instance (`typical@1-3`, `harsh@1-3`):
1. `mjxgap record` 20 s on the stand and 20 s of standing sway;
2. `mjxgap sysid` -> `fit/` (robot.xml, dr.json: centred on the fit, over the randomization the
   policy was trained with);
3. `mjxgap delta` -> `delta_fit/` (the fitted simulator corrected by a delta-action model) and
   `delta_nominal/` (the policy's own simulator corrected alone, at no delay);
4. per arm, `mjxgap train --init-from POLICY` for `--steps` env steps (the recipe's last learner),
   its last checkpoint exported (no selection), and `mjxgap gap` of it on that instance (native
   MuJoCo, `--episodes` episodes): `sysid` (fit/), `delta` (delta_nominal/), `both`
   (delta_fit/).

`before` is the policy itself; `more_training` one fine-tuning of the same budget in the
policy's own training simulator, measured on every instance: what more training adds without
the robot's logs. Every step's output stays in `--work`, and a rerun skips what is there (a
lost session resumes); the summary is rewritten after every step. With `--continue`, a rerun
starts from the summary already in `--out` (same policy and settings) and skips the results it
holds: a lost `--work` folder costs only the steps with no result yet.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from common import fail, mjxgap, provenance
from mjxgap.files import write_json_atomic

POLICY = "experiments/results/policies/walk_builtin"
INSTANCES = "harsh@1,harsh@2,harsh@3,typical@1,typical@2,typical@3"
BASE_DR = "walk_training_pushes"  # the randomization the policy ended its training with
ARMS = {"sysid": ("fit/robot.xml", "fit/dr.json"), "both": ("fit/robot.xml", "delta_fit/dr.json"),
        "delta": (None, "delta_nominal/dr.json")}


def gap(policy: str, instances: str, out: pathlib.Path, episodes: int) -> dict:
  """instance -> survival and tracking error (with their 95% intervals) of `policy`."""
  if not (out / "gap.json").is_file():
    mjxgap("gap", policy, "--reality", instances, "--episodes", str(episodes), "--out", str(out))
  report = json.loads((out / "gap.json").read_text())["profiles"]
  return {name: {k: {f: round(v[f], 4) for f in ("value", "low", "high")}
                 for k, v in p["metrics"].items() if k in ("survival", "tracking_error_mps")}
          for name, p in report.items()}


def fine_tune(root: pathlib.Path, steps: int, robot: str | None, dr: str | None) -> str:
  """The exported last checkpoint of a fine-tuning of POLICY in `root/run`."""
  if not (root / "policy" / "policy.json").is_file():
    extra = (["--robot", robot] if robot else []) + (["--dr", dr] if dr else [])
    resume = ["--resume"] if (root / "run" / "checkpoints").is_dir() else []
    mjxgap("train", *([] if resume else ["--init-from", POLICY]), *resume, "--total-steps",
           str(steps), "--cpu-devices", "2", "--no-progress", *extra, "--out", str(root / "run"))
    mjxgap("export", str(root / "run"), "--out", str(root / "policy"))
  return str(root / "policy")


def identify(root: pathlib.Path) -> None:
  """The instance's logs, its sysid fit and both delta-action models, in `root`."""
  name = root.name
  if not (root / "logs" / "log.json").is_file():
    mjxgap("record", POLICY, "--reality", name, "--seconds", "40", "--routine", "hang,sway",
           "--episode-seconds", "10", "--out", str(root / "logs"))
  if not (root / "fit" / "fit.json").is_file():
    mjxgap("sysid", str(root / "logs"), "--base-dr", BASE_DR, "--out", str(root / "fit"))
  if not (root / "delta_fit" / "dr.json").is_file():
    mjxgap("delta", str(root / "logs"), "--fit", str(root / "fit"), "--out",
           str(root / "delta_fit"))
  if not (root / "delta_nominal" / "dr.json").is_file():
    mjxgap("delta", str(root / "logs"), "--robot", "builtin", "--base-dr", BASE_DR, "--out",
           str(root / "delta_nominal"))


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--instances", default=INSTANCES)
  p.add_argument("--arms", default=",".join(ARMS), help="in the order they run")
  p.add_argument("--steps", type=int, default=2_000_000, help="env steps of each fine-tuning")
  p.add_argument("--episodes", type=int, default=64, help="gap episodes per instance")
  p.add_argument("--work", required=True, help="folder of every step's output (kept)")
  p.add_argument("--out", required=True)
  p.add_argument("--continue", dest="resume", action="store_true",
                 help="keep the results already in --out and run only the missing ones")
  args = p.parse_args()
  work = pathlib.Path(args.work)
  names = args.instances.split(",")
  settings = {"policy": POLICY, "fine_tune_env_steps": args.steps, "episodes": args.episodes,
              "base_dr": BASE_DR}
  done = {name: {} for name in names}
  if args.resume:
    if not pathlib.Path(args.out).is_file():
      fail(f"{args.out}: no summary to continue (--continue keeps the results of an earlier run)")
    before = json.loads(pathlib.Path(args.out).read_text())
    if any(before[k] != v for k, v in settings.items()):
      fail(f"{args.out}: made with other settings than these: {settings}")
    done.update(before["instances"])
  result = {**provenance(), **settings, "instances": done}

  def save(name: str, key: str, value) -> None:
    result["instances"][name][key] = value
    print(json.dumps({name: {key: value}}), file=sys.stderr, flush=True)
    write_json_atomic(args.out, result)

  def missing(key: str) -> bool:
    return any(key not in done[name] for name in names)

  if missing("before"):
    for name, row in gap(POLICY, args.instances, work / "gap_before", args.episodes).items():
      save(name, "before", row)
  if missing("more_training"):
    control = fine_tune(work / "more_training", args.steps, None, None)
    for name, row in gap(control, args.instances, work / "gap_more_training",
                         args.episodes).items():
      save(name, "more_training", row)
  for name in names:  # an instance identified, then every arm of it, then the next instance
    if all(key in done[name] for key in ("identified", *args.arms.split(","))):
      continue
    root = work / name
    identify(root)
    fit = json.loads((root / "fit" / "fit.json").read_text())
    held_out = {k: json.loads((root / k / "delta.json").read_text())
                ["validation"]["joint_pos_rms_rad"]["held_out"]
                for k in ("delta_fit", "delta_nominal")}
    save(name, "identified", {"loop_delay_ms": fit["loop_delay_ms"]["value"],
                              "body_applied": fit["body"]["applied"],
                              "delta_held_out_joint_pos_rms_rad": held_out})
    for arm in args.arms.split(","):
      if arm in done[name]:
        continue
      robot, dr = ARMS[arm]
      tuned = fine_tune(root / arm, args.steps, robot and str(root / robot), str(root / dr))
      save(name, arm, gap(tuned, name, root / arm / "gap", args.episodes)[name])


if __name__ == "__main__":
  main()
