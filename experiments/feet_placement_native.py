"""Where an exported walk policy puts its feet in native MuJoCo, against `feet_placement`'s
Raibert targets (a diagnosis, README "Walking"): `mjxgap play`'s run with a hook that reads
the feet's heading-frame offsets after each control step and scores them with the reward's own
`feet_placement_target` (the env's `Measure` and `rewards`, not a copy of them).

  python experiments/feet_placement_native.py POLICY_DIR --command 0,0.3,0 [--seconds 20]

prints one JSON line: the play's distance and turn, the mean `feet_placement` penalty (m²) after
the first second, the feet's mean offsets and their spread (m, heading frame, [foot][x, y]),
and what standing still in the default pose would score under the same command."""

from __future__ import annotations

import argparse
import json
import pathlib
import types

import numpy as np

from common import fail
from mjxgap import contract
from mjxgap.deploy.play import load_policy, play
from mjxgap.deploy.runtime import gait_slopes
from mjxgap.env import rewards
from mjxgap.env.quantities import Measure
from mjxgap.errors import UserError
from mjxgap.robot import load_robot
from mjxgap.runs.factory import task_config

SETTLE_S = 1.0  # the first second (the start from the default pose) is not scored


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("policy", type=pathlib.Path)
  p.add_argument("--command", required=True, help="forward m/s, lateral m/s, yaw rad/s")
  p.add_argument("--seconds", type=float, default=20.0)
  args = p.parse_args(argv)
  try:
    command = np.array([float(x) for x in args.command.split(",")])
    if command.shape != (3,):
      raise ValueError
  except ValueError:
    fail(f"--command: expected three numbers 'forward,lateral,yaw', got {args.command!r}")
  try:
    spec = load_policy(args.policy).spec
  except UserError as e:
    fail(str(e))
  gait = spec.get("gait", {})
  if not gait.get("frequency_hz", 0.0):
    fail(f"{args.policy}: policy.json has no gait clock (gait.frequency_hz): not a walk policy")
  robot = load_robot(spec["robot_source"], ctrl_dt=spec["control_period_s"])
  slopes = gait_slopes(spec)
  # the play holds one command, so the clock runs at one rate: cycles = step x period x rate
  frequency = float(contract.gait_frequency(command, gait["frequency_hz"], slopes, np))
  config = task_config("walk", {"gait_frequency_hz": gait["frequency_hz"],
                                "gait_frequency_hz_per_command": slopes,
                                "ctrl_dt": spec["control_period_s"]})
  measure = Measure(robot, config, lambda episode: None, 0)
  dt = spec["control_period_s"]
  penalties, offsets = [], []

  def after_step(model, data, step):
    import mujoco

    mujoco.mj_kinematics(model, data)  # the final state's body positions, as the env reads
    q = types.SimpleNamespace(
        feet_offset_m=measure.feet_offset(data.qpos, data.xpos, np),
        feet_nominal_offset_m=np.asarray(measure.feet_nominal_offset),
        feet_phase=np.asarray(measure.gait_phase(contract.gait_cycles_at(step, dt, frequency))),
        gait_period_s=1.0 / frequency, command=command)
    if step * dt > SETTLE_S:
      penalties.append(float(rewards.feet_placement(q)))
      offsets.append(q.feet_offset_m)

  try:
    result = play(args.policy, seconds=args.seconds, command=tuple(command),
                  after_step=after_step)
  except UserError as e:
    fail(str(e))
  offsets = np.asarray(offsets)
  travel = 0.25 / frequency * np.linalg.norm(command[:2])  # m: a foot's miss standing still
  print(json.dumps({
      "policy": str(args.policy), "command": command.tolist(), "fell": result["fell"],
      "survived_s": result["survived_s"], "distance_m": round(result["distance_m"], 3),
      "yaw_change_rad": round(result["yaw_change_rad"], 3),
      "feet_placement_m2": round(float(np.mean(penalties)), 5) if penalties else None,
      # standing in the default pose: each foot misses by `travel` x |stride|, mean stride^2 1/3
      # (the yaw part, a few mm at these offsets, left out)
      "standing_still_m2": round(measure.n_feet * travel**2 / 3, 5),
      "feet_mean_offset_m": offsets.mean(axis=0).round(3).tolist() if len(offsets) else None,
      "feet_offset_std_m": offsets.std(axis=0).round(3).tolist() if len(offsets) else None,
      "feet_nominal_offset_m": np.asarray(measure.feet_nominal_offset,
                                          np.float64).round(3).tolist()}))


if __name__ == "__main__":
  main()
