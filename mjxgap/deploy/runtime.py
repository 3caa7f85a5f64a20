"""A reference robot-side runtime for an exported policy, from `policy.json` alone.

Nothing here imports JAX or the rest of mjxgap (numpy, onnxruntime and `mjxgap.contract` only):
it is what a robot team would write from the sidecar, and the proof that the sidecar is complete.
The quaternion rotation that makes the base-frame observation terms is `mjxgap.contract`'s, the
one the training env uses. To run it on a robot, copy `runtime.py` and `contract.py` (from the
`mjxgap` package) together into one folder: without mjxgap installed, the `contract.py` beside
this file is imported.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

try:
  from mjxgap import contract
except ImportError:
  import contract  # copied onto a robot next to this file


def rotate_inverse(quat_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
  """`v` (world frame) expressed in the frame of the body with orientation `quat_wxyz` (w, x,
  y, z; base to world), in float64: `contract.rotate_inverse` with numpy."""
  return contract.rotate_inverse(np.asarray(quat_wxyz, np.float64), np.asarray(v, np.float64),
                                 np)


# term name -> how it is computed from the robot's readings (`readings` below)
TERMS = {
    "gyro": lambda r, spec: r["base_ang_vel"],
    "base_lin_vel": lambda r, spec: r["base_lin_vel"],
    "projected_gravity": lambda r, spec: rotate_inverse(r["base_quat_wxyz"], [0.0, 0.0, -1.0]),
    "joint_pos": lambda r, spec: r["joint_pos"] - np.asarray(spec["default_joint_pos_rad"]),
    "joint_vel": lambda r, spec: r["joint_vel"],
    "last_action": lambda r, spec: r["last_action"],
    "command": lambda r, spec: r["command"],
    "gait_phase": lambda r, spec: _clock(contract.gait_phase(r["gait_cycles"], np)),
}


def gait_slopes(spec: dict) -> tuple[float, float, float]:
  """policy.json's `gait.frequency_hz_per_command` (Hz per unit of each command axis); absent in
  the policies of a fixed clock exported before it existed: zeros."""
  return tuple(spec["gait"].get("frequency_hz_per_command", (0.0, 0.0, 0.0)))


def advance_gait(spec: dict, cycles: float, command) -> float:
  """The gait clock's cycles one control step after `cycles`, the step run under `command`, at
  policy.json's rate: `gait.frequency_hz` plus `gait_slopes` times the command's magnitudes."""
  return float(contract.advance_gait(
      np.float64(cycles), np.asarray(command, np.float64), spec["control_period_s"],
      spec["gait"]["frequency_hz"], gait_slopes(spec), np))


def _clock(phase_rad: float) -> np.ndarray:
  return np.array([np.cos(phase_rad), np.sin(phase_rad)])


def observation(spec: dict, readings: dict) -> np.ndarray:
  """The actor observation [obs] float32 from `readings`: `base_quat_wxyz` (4, base to world),
  `base_ang_vel` (rad/s, base frame, 3), `joint_pos` and `joint_vel` (rad, rad/s, in
  `joint_names` order), `last_action` (the previous policy output), `command` (3),
  `gait_cycles` (the gait clock: `Policy` advances it by `advance_gait`) and, for a
  policy that observes `base_lin_vel`, `base_lin_vel` (m/s, base frame, 3: a state
  estimate)."""
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


class ObservationHistory:
  """The policy's input: its last `observation.frames` observations (1 if policy.json has no
  `frames`), newest first; at the start, the first observation fills every slot."""

  def __init__(self, spec: dict):
    self.spec = spec
    self.frames = int(spec["observation"].get("frames", 1))
    self.reset()

  def reset(self) -> None:
    self.stack = None

  def __call__(self, readings: dict) -> np.ndarray:
    frame = observation(self.spec, readings)
    self.stack = (np.tile(frame, (self.frames, 1)) if self.stack is None
                  else np.concatenate([frame[None], self.stack[:-1]]))
    return self.stack.reshape(-1)


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
    self.history = ObservationHistory(self.spec)
    self.reset()

  def reset(self) -> None:
    """A new start: no previous action or observations, the gait clock at 0."""
    self.last_action = np.zeros(self.spec["action"]["size"], np.float32)
    self.gait_cycles = 0.0
    self.history.reset()

  def act(self, readings: dict, noise: np.ndarray | None = None) -> np.ndarray:
    """One control step: the action (kept as the next step's `last_action`). `noise` (a
    diagnosis: training's exploration) is added to it and the sum clipped, as in training."""
    obs = self.history({**readings, "last_action": self.last_action,
                        "gait_cycles": self.gait_cycles})
    self.last_action = self.session.run([self.spec["onnx"]["output"]],
                                        {self.spec["onnx"]["input"]: obs[None]})[0][0]
    if noise is not None:
      clip = self.spec["action"]["clip"]
      self.last_action = np.clip(self.last_action + noise, -clip, clip).astype(np.float32)
    if "gait" in self.spec:
      self.gait_cycles = advance_gait(self.spec, self.gait_cycles, readings["command"])
    return self.last_action

  def joint_targets(self, action: np.ndarray) -> np.ndarray:
    """rad, in `joint_names` order."""
    return self.default + self.scale * np.asarray(action, np.float64)
