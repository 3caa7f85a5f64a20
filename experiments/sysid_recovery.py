"""Parameter recovery of `mjxgap sysid` on robot instances: record stand and standing logs of
each instance (`mjxgap record --routine hang,sway`, its truth written apart), fit them
(`mjxgap sysid`), and compare the fit with the truth.

    python experiments/sysid_recovery.py --out experiments/results/sysid_recovery.json

The instances of `typical` and `harsh` are driven by the reference motor, which MuJoCo's
position actuator can only approximate, so the truth is compared in the fit's own terms (what a
position actuator with joint armature, damping and friction loss would need to be):
- kp: the motor's PD gain;
- damping: joint damping + the motor's viscous friction + (kd - the model's kd), since the fit
  keeps kd at the model's value and damping takes the rest;
- frictionloss: joint friction loss + the motor's Coulomb friction (a fraction of its torque
  limit);
- armature: the joint's;
- delay: the actuation delay (action + motor transport); the fitted loop delay also holds the
  readings' staleness (each bus's, reported beside it);
- payload and base COM shift: the instance's draws, beside whether the fit was applied.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

from common import mjxgap, provenance
from mjxgap.files import write_json_atomic
from mjxgap.gap.profiles import load_profile

POLICY = "experiments/results/policies/walk_builtin"
PARAMETERS = ("kp", "damping", "frictionloss", "armature")


def truth_in_fit_terms(truth: dict, profile) -> dict:
  """parameter -> {joint: value}: the instance as a MuJoCo position actuator would be."""
  from mjxgap.robot import load_robot

  robot = load_robot(truth["robot"])
  m = truth["model"]
  joints = truth["joints"]
  ref = profile.motor.reference
  kd_nominal = dict(zip(robot.joint_names, robot.kd))
  out = {"kp": dict(zip(joints, m["kp"])), "armature": dict(zip(joints, m["armature"]))}
  out["damping"] = {j: m["damping"][i] + ref.viscous_nms + m["kd"][i] - kd_nominal[j]
                    for i, j in enumerate(joints)}
  out["frictionloss"] = {j: m["frictionloss"][i] + ref.coulomb_fraction * m["torque_limit_nm"][i]
                         for i, j in enumerate(joints)}
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--instances", default="typical@1,typical@2,typical@3,harsh@1,harsh@2,harsh@3")
  p.add_argument("--seconds", type=float, default=20.0,
                 help="seconds of stand logs each, and as many of standing sway")
  p.add_argument("--out", required=True)
  args = p.parse_args()
  rows = []
  with tempfile.TemporaryDirectory(prefix="mjxgap-sysid-") as tmp:
    for name in args.instances.split(","):
      root = pathlib.Path(tmp) / name
      mjxgap("record", POLICY, "--reality", name, "--seconds", str(2 * args.seconds),
             "--routine", "hang,sway", "--episode-seconds", "10", "--truth", str(root / "truth.json"), "--out",
             str(root / "logs"))
      summary = mjxgap("sysid", str(root / "logs"), "--out", str(root / "fit"))
      fit = json.loads((root / "fit" / "fit.json").read_text())
      truth = json.loads((root / "truth.json").read_text())
      profile = load_profile(name)
      want = truth_in_fit_terms(truth, profile)
      row = {"instance": name, "windows": fit["windows"],
             "joint_pos_rms_rad": summary["joint_pos_rms_rad"]}
      for param in PARAMETERS:
        errors, covered = [], []
        for joint, got in fit["joints"].items():
          v, hw, t = got[param]["value"], got[param]["half_width_95"], want[param][joint]
          errors.append(abs(v - t) / abs(t) * 100.0)
          covered.append(hw is not None and abs(v - t) <= hw)
        row[param] = {"median_error_pct": round(float(np.median(errors)), 1),
                      "max_error_pct": round(float(np.max(errors)), 1),
                      "interval_covers_truth": f"{sum(covered)}/{len(covered)}"}
      actuation = truth["action_delay_ms"] + truth["motor_delay_ms"]
      row["delay_ms"] = {"fitted_loop": fit["loop_delay_ms"]["value"],
                         "half_width_95": fit["loop_delay_ms"]["half_width_95"],
                         "true_actuation": round(actuation, 2),
                         "true_bus_staleness": [round(x, 2) for x in truth["bus_staleness_ms"]],
                         "error_vs_actuation": round(fit["loop_delay_ms"]["value"] - actuation, 2)}
      body = fit["body"]
      row["body"] = {"payload_kg": body["parameters"]["payload_kg"]["value"],
                     "true_payload_kg": round(truth["draws"]["payload_kg"], 3),
                     "com_error_m": round(float(np.linalg.norm(
                         [body["parameters"][f"com_{a}_m"]["value"] for a in "xyz"]
                         - np.asarray(truth["draws"]["com_offset_m"]))), 4),
                     "base_orientation_rms_rad": {k: round(v["base_orientation_rad"], 4)
                                                  for k, v in body["error_rms"].items()},
                     "applied": body["applied"]}
      rows.append(row)
      print(json.dumps(row), file=sys.stderr, flush=True)
  write_json_atomic(args.out, {**provenance(), "policy": POLICY, "seconds": args.seconds,
                               "instances": rows})


if __name__ == "__main__":
  main()
