"""`mjxgap play`: an exported policy driving the robot in native MuJoCo (C), not MJX.

The observation comes from `mjxgap.deploy.runtime`, which reads only `policy.json`; the robot's
position actuators get `default + scale * action` every control period. A policy that stands
here as it stood in MJX has crossed the first gap (MJX -> MuJoCo) with a complete sidecar.
The base-frame velocity and the fall test are `mjxgap.contract`'s, as in the training env, so
"fell" means here what it meant in training. Its video goes through `mjxgap.rendering`.
"""

from __future__ import annotations

import json
import pathlib

import mujoco
import numpy as np

from mjxgap import contract
from mjxgap.errors import UserError
from mjxgap.deploy.runtime import Policy, rotate_inverse
from mjxgap import rendering

SETTLE_S = 1.0  # s of a play left out of `joint_motion_std_rad`: the start from standing
# s between the base positions whose chords sum to `path_m`: a stride or more, so that the
# gait's side-to-side sway is not counted as ground covered
PATH_CHORD_S = 1.0


def load_policy(folder: pathlib.Path) -> Policy:
  """The exported policy in `folder`; a missing or unreadable file is one `UserError` line."""
  if not folder.is_dir():
    raise UserError(f"{folder}: no such folder (an exported policy, from mjxgap export)")
  if not (folder / "policy.json").is_file() and (folder / "config.json").is_file():
    raise UserError(f"{folder}: a training run, not an exported policy: mjxgap export RUN "
                    "--out DIR (or mjxgap select) makes one; mjxgap eval takes the run")
  for name in ("policy.json", "policy.onnx"):
    if not (folder / name).is_file():
      raise UserError(f"{folder}: missing {name} (made by `mjxgap export`)")
  try:
    return Policy(folder)
  except (ValueError, KeyError, json.JSONDecodeError) as e:
    raise UserError(f"{folder}: unreadable exported policy ({e})") from None


def play(folder: str | pathlib.Path, robot: str | None = None, seconds: float = 20.0,
         command=(0.0, 0.0, 0.0), record_s: float = 0.0, video: str | None = None,
         after_step=None, action_noise_std: float = 0.0, seed: int = 0) -> dict:
  """Runs the policy for `seconds` (or until it falls); survival, distance, tracking error.
  With `record_s`, also the joint positions of the first `record_s` seconds, per physics step;
  with `video`, a GIF or MP4 of the run (25 frames per simulated second); `after_step(model,
  data, control_step)`, if given, sees the state after each control step (a diagnosis hook).
  `action_noise_std` adds Gaussian noise of that std to each action (drawn from `seed`), as
  training's exploration does: how much a behaviour depends on the noise (a diagnosis)."""
  from mjxgap.robot import load_robot

  folder = pathlib.Path(folder)
  policy = load_policy(folder)
  spec = policy.spec
  rb = load_robot(robot or spec["robot_source"], ctrl_dt=spec["control_period_s"])
  missing = [j for j in spec["joint_names"] if j not in rb.joint_names]
  if missing:
    raise UserError(f"--robot {robot or spec['robot_source']}: has no actuated joint "
                    f"{missing[0]!r} that the policy drives")
  m = rb.mj_model
  if abs(m.opt.timestep - spec["physics_step_s"]) > 1e-12:
    raise UserError(f"--robot {rb.name}: physics step {m.opt.timestep} s, the policy was trained "
                    f"at {spec['physics_step_s']} s")
  substeps = int(round(spec["control_period_s"] / m.opt.timestep))
  index = [rb.joint_names.index(j) for j in spec["joint_names"]]  # policy order -> robot order
  qadr, vadr = rb.qpos_adr[index], rb.qvel_adr[index]
  floor_z = float(m.geom_pos[rb.floor_geom_ids[0], 2])
  fall_height = spec["termination"]["fall_height_m"]
  max_tilt = spec["termination"]["max_tilt_rad"]
  command = np.asarray(command, np.float64)
  rng = np.random.default_rng(seed)

  d = mujoco.MjData(m)
  d.qpos[:] = rb.default_qpos
  mujoco.mj_forward(m, d)
  if video:  # fail before the run, not after it
    video = rendering.check_video_path(video)
    rendering.renderer(m, 16, 16).close()
  frame_every = max(1, int(round(1.0 / (25.0 * spec["control_period_s"]))))
  poses = [d.qpos.copy()]  # one per video frame
  start_xy, start_yaw = d.qpos[:2].copy(), float(contract.heading(d.qpos[3:7], np))
  yaw, turned = start_yaw, 0.0  # rad, summed step by step so that full turns count
  steps = int(round(seconds / spec["control_period_s"]))
  settle = int(round(SETTLE_S / spec["control_period_s"]))  # steps before `joint_motion_std_rad`
  record_steps = int(round(record_s / m.opt.timestep))
  recorded, tracking, yaw_tracking, joints, fell, t = [], [], [], [], False, 0
  base_xy = [start_xy]  # after each control step
  for t in range(1, steps + 1):
    quat = d.qpos[3:7].copy()
    readings = {"base_quat_wxyz": quat, "base_ang_vel": d.qvel[3:6].copy(),
                "base_lin_vel": rotate_inverse(quat, d.qvel[0:3]),
                "joint_pos": d.qpos[qadr].copy(), "joint_vel": d.qvel[vadr].copy(),
                "command": command}
    noise = (action_noise_std * rng.standard_normal(spec["action"]["size"])
             if action_noise_std else None)
    targets = policy.joint_targets(policy.act(readings, noise))
    ctrl = np.zeros(m.nu)
    ctrl[index] = targets  # the robot's actuators are in its joint order
    d.ctrl[:] = ctrl
    for _ in range(substeps):
      mujoco.mj_step(m, d)
      if len(recorded) < record_steps:
        recorded.append(d.qpos[rb.qpos_adr].copy())
    if not np.all(np.isfinite(d.qpos)):
      raise UserError(f"{folder}: the simulation diverged (NaN) at {t * spec['control_period_s']}"
                      " s")
    if after_step is not None:
      after_step(m, d, t)
    if video and t % frame_every == 0:
      poses.append(d.qpos.copy())
    joints.append(d.qpos[qadr].copy())
    base_xy.append(d.qpos[:2].copy())
    v_base = rotate_inverse(d.qpos[3:7], d.qvel[0:3])
    tracking.append(np.linalg.norm(v_base[:2] - command[:2]))
    yaw_tracking.append(abs(d.qvel[5] - command[2]))
    yaw, last_yaw = float(contract.heading(d.qpos[3:7], np)), yaw
    turned += (yaw - last_yaw + np.pi) % (2 * np.pi) - np.pi
    gravity = rotate_inverse(d.qpos[3:7], [0.0, 0.0, -1.0])
    if contract.fallen(d.qpos[2] - floor_z, gravity[2], fall_height, max_tilt, np):
      fell = True
      break
  result = {
      "policy": str(folder),
      "robot": rb.name,
      "simulator": f"mujoco {mujoco.__version__} (native)",
      "seconds_requested": seconds,
      "survived_s": round(t * spec["control_period_s"], 4),
      "fell": fell,
      # start to end, straight: under a command that turns while walking, much less than...
      "distance_m": float(np.linalg.norm(d.qpos[:2] - start_xy)),
      # ...the ground covered along the way (chords of PATH_CHORD_S)
      "path_m": path_length_m(np.asarray(base_xy),
                              max(1, int(round(PATH_CHORD_S / spec["control_period_s"])))),
      # forward and lateral, in the heading the robot started with
      "displacement_m": _rotate_z(d.qpos[:2] - start_xy, -start_yaw).tolist(),
      "yaw_change_rad": float(turned),
      "command": command.tolist(),
      **({"action_noise_std": action_noise_std, "seed": seed} if action_noise_std else {}),
      "mean_velocity_tracking_error_mps": float(np.mean(tracking)),
      "mean_yaw_rate_error_rad_s": float(np.mean(yaw_tracking)),
      # how much each joint moves once under way (whether the feet step, the hips yaw): the
      # standard deviation of its position over the control steps after the first second
      "joint_motion_std_rad": dict(zip(spec["joint_names"], np.std(
          joints[min(settle, len(joints) - 1):], axis=0).round(6).tolist())),
  }
  if record_steps:
    result["joint_pos_rad"] = np.asarray(recorded).tolist()
  if video:
    fps = 1.0 / (frame_every * spec["control_period_s"])
    clip = rendering.render(rb, np.asarray(poses), fps, width=640, height=480)
    clip.save(video)
    result["video"] = {"file": str(video), "frames": len(clip), "fps": fps}
  return result


def path_length_m(xy: np.ndarray, every: int) -> float:
  """m: the length of the polyline through every `every`-th of the points `xy` (N, 2), the
  first and the last."""
  points = xy[::every]
  if (len(xy) - 1) % every:
    points = np.concatenate([points, xy[-1:]])
  return float(np.sum(np.linalg.norm(np.diff(points, axis=0), axis=1)))


def _rotate_z(xy, angle_rad: float) -> np.ndarray:
  c, s = np.cos(angle_rad), np.sin(angle_rad)
  return np.array([c * xy[0] - s * xy[1], s * xy[0] + c * xy[1]])
