"""A reference robot-side runtime for an exported policy, from `policy.json` alone.

Nothing here imports mjxgap or JAX (numpy and onnxruntime only): it is what a robot team would
write from the sidecar, and the proof that the sidecar is complete. Copy it to the robot.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np


def rotate_inverse(quat_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
  """`v` (world frame) expressed in the frame of the body with orientation `quat_wxyz`."""
  w, xyz = quat_wxyz[0], np.asarray(quat_wxyz[1:])
  v = np.asarray(v, np.float64)
  return v * (2 * w * w - 1) - np.cross(xyz, v) * 2 * w + xyz * 2 * np.dot(xyz, v)


# term name -> how it is computed from the robot's readings (`readings` below)
TERMS = {
    "gyro": lambda r, spec: r["base_ang_vel"],
    "projected_gravity": lambda r, spec: rotate_inverse(r["base_quat_wxyz"], [0.0, 0.0, -1.0]),
    "joint_pos": lambda r, spec: r["joint_pos"] - np.asarray(spec["default_joint_pos_rad"]),
    "joint_vel": lambda r, spec: r["joint_vel"],
    "last_action": lambda r, spec: r["last_action"],
    "command": lambda r, spec: r["command"],
}


def observation(spec: dict, readings: dict) -> np.ndarray:
  """The actor observation [obs] float32 from `readings`: `base_quat_wxyz` (4, base to world),
  `base_ang_vel` (rad/s, base frame, 3), `joint_pos` and `joint_vel` (rad, rad/s, in
  `joint_names` order), `last_action` (the previous policy output) and `command` (3)."""
  parts = []
  for term in spec["observation"]["terms"]:
    if term["name"] not in TERMS:
      raise ValueError(f"observation term {term['name']!r} is unknown to this runtime "
                       f"(knows {', '.join(TERMS)})")
    value = np.asarray(TERMS[term["name"]](readings, spec), np.float64).reshape(-1)
    if value.size != term["size"]:
      raise ValueError(f"observation term {term['name']!r}: {value.size} values, policy.json "
                       f"says {term['size']}")
    parts.append(value * term.get("scale", 1.0))
  return np.concatenate(parts).astype(np.float32)


class Policy:
  """`policy.onnx` with its sidecar: observation in, joint position targets out."""

  def __init__(self, folder: str | pathlib.Path):
    import onnxruntime as ort

    folder = pathlib.Path(folder)
    self.spec = json.loads((folder / "policy.json").read_text())
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    self.session = ort.InferenceSession(str(folder / self.spec["onnx"]["file"]), options,
                                        providers=["CPUExecutionProvider"])
    self.default = np.asarray(self.spec["default_joint_pos_rad"])
    self.scale = float(self.spec["action"]["scale_rad"])
    self.last_action = np.zeros(self.spec["action"]["size"], np.float32)

  def act(self, readings: dict) -> np.ndarray:
    """One control step: the action (kept as the next step's `last_action`)."""
    obs = observation(self.spec, {**readings, "last_action": self.last_action})
    self.last_action = self.session.run([self.spec["onnx"]["output"]],
                                        {self.spec["onnx"]["input"]: obs[None]})[0][0]
    return self.last_action

  def joint_targets(self, action: np.ndarray) -> np.ndarray:
    """rad, in `joint_names` order."""
    return self.default + self.scale * np.asarray(action, np.float64)
