"""The robot on its feet: payload and base centre of mass, from standing logs.

With the drive fitted on the stand (`fit.Fit`), short windows of the `sway` segments (the
policy keeping the robot up while every joint sways slowly) are replayed in native MuJoCo with
the floating base on the floor, under the logged targets and the loop delay: each from the
joint readings and the IMU's orientation and gyro, the base lowered until its lowest foot
touches the floor and moving so that this foot stands still (the logs hold no base position or
linear velocity). The residual adds the base orientation the IMU read to the joint readings.
The payload shows in how far the joints sag from their targets and how the base tilts. Foot
friction is not fitted: a robot that stands still does not slip, and soft contacts let a fit
move friction anywhere without a trace (tried: 0.77 for a true 0.5, with a tight interval).
"""

from __future__ import annotations

import copy
import dataclasses

import mujoco
import numpy as np

from mjxgap.identify.fit import (Fit, FitConfig, Replay, Stand, least_squares,
                                 orientation_error, require_sysid, windows, with_values)
from mjxgap.identify.logs import RobotLog

FLOOR_KIND = "sway"
BODY = ("payload_kg", "com_x_m", "com_y_m", "com_z_m")
# each is fitted as value / scale, within these bounds (on the value)
SCALE = {"payload_kg": 1.0, "com_x_m": 0.01, "com_y_m": 0.01, "com_z_m": 0.01}
BOUNDS = {"payload_kg": (-10.0, 30.0), "com_x_m": (-0.1, 0.1), "com_y_m": (-0.1, 0.1),
          "com_z_m": (-0.1, 0.1)}
WINDOW_S = 0.4  # a standing humanoid replayed open loop drifts off its readings within a second
# the fit is applied (to robot.xml) only if it cuts the base orientation's replay error by
# at least this fraction: a fit that explains the standing logs no better than the robot file
# has found nothing to correct it with
MIN_IMPROVEMENT = 0.2


@dataclasses.dataclass
class BodyFit:
  values: dict  # name -> value (payload kg added to the base, COM shift m)
  half_width: dict  # name -> 95 % half-width (inf: the logs cannot tell)
  nominal: dict
  error_before: dict  # signal -> RMS over every joint (rad, rad/s) and the base tilt (rad)
  error_after: dict
  windows: int

  @property
  def applied(self) -> bool:
    key = "base_orientation_rad"
    return self.error_after[key] <= (1.0 - MIN_IMPROVEMENT) * self.error_before[key]


def floor_model(robot, joint_names, drive: Fit, physics_step_s: float) -> Stand:
  """The floating robot on its floor at the fit's physics step, with the drive `drive` fitted."""
  m = copy.deepcopy(robot.mj_model)
  m.opt.timestep = physics_step_s
  index = [robot.joint_names.index(j) for j in joint_names]
  floor = Stand(m, robot.qvel_adr[index], robot.qpos_adr[index], np.asarray(index),
                drive.values, drive.values)
  floor.model = with_values(floor, drive.values)
  mujoco.mj_setConst(floor.model, mujoco.MjData(floor.model))
  return floor


def with_body(robot, fl: Stand, values: dict) -> mujoco.MjModel:
  """A copy of the floor model with `values` (`BODY` names), written as `mjxgap gap`'s native
  episodes write a reality profile's payload and COM."""
  m = copy.copy(fl.model)
  base = robot.base_body_id
  mass = fl.model.body_mass[base]
  grow = (mass + values["payload_kg"]) / mass
  m.body_mass[base] = mass * grow
  m.body_inertia[base] = fl.model.body_inertia[base] * grow
  m.body_ipos[base] = fl.model.body_ipos[base] + [values["com_x_m"], values["com_y_m"],
                                                   values["com_z_m"]]
  mujoco.mj_setConst(m, mujoco.MjData(m))
  return m


def placer(robot, log: RobotLog):
  """`place(model, data, row)`: the base at the row's IMU orientation and gyro, lowered onto its
  lowest foot, moving so that this foot stands still."""
  s = log.signals
  floor = robot.floor_geom_ids[0]
  feet = list(robot.feet_geom_ids)
  fromto = np.zeros(6)
  vel = np.zeros(6)

  def place(m, d, row):
    d.qpos[0:3] = (0.0, 0.0, 1.0)
    d.qpos[3:7] = s["imu_quat_wxyz"][row] / np.linalg.norm(s["imu_quat_wxyz"][row])
    d.qvel[0:3] = 0.0
    d.qvel[3:6] = s["imu_gyro_rad_s"][row]
    mujoco.mj_forward(m, d)
    gaps = [mujoco.mj_geomDistance(m, d, g, floor, 10.0, fromto) for g in feet]
    d.qpos[2] -= min(gaps)
    mujoco.mj_forward(m, d)
    mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY,
                             int(m.geom_bodyid[feet[int(np.argmin(gaps))]]), vel, 0)
    d.qvel[0:3] = -vel[3:]
  return place


def _errors(replay: Replay, model, controls) -> dict:
  qpos, qvel = replay.states([model], controls)
  win = replay.win
  tilt = orientation_error(qpos[0][..., 3:7], win.quat)
  return {"joint_pos_rad": float(np.sqrt(np.mean((qpos[0][..., replay.st.qadr] - win.q) ** 2))),
          "joint_vel_rad_s": float(np.sqrt(np.mean((qvel[0][..., replay.st.dofs] - win.qd) ** 2))),
          "base_orientation_rad": float(np.sqrt(np.mean(np.sum(tilt ** 2, -1))))}


def fit_body(log: RobotLog, robot, drive: Fit, config: FitConfig = FitConfig(),
             output=None) -> BodyFit:
  """Payload and base COM shift from the `sway` segments of `log`, the drive fixed at `drive`
  (and its loop delay)."""
  sysid = require_sysid()
  fl = floor_model(robot, log.joint_names, drive, config.physics_step_s)
  win = windows(log, fl, config, kind=FLOOR_KIND, window_s=WINDOW_S, place=placer(robot, log))
  replay = Replay(fl, win, config)
  controls = win.controls(fl, int(round(drive.delay_ms / 1000.0 / config.physics_step_s)))
  nominal = {k: 0.0 for k in BODY}
  to_values = lambda x: {k: float(v) * SCALE[k] for k, v in zip(BODY, x)}

  x, r, result = least_squares(
      replay, lambda x: with_body(robot, fl, to_values(x)), controls, BODY,
      [nominal[k] / SCALE[k] for k in BODY],
      [(BOUNDS[k][0] / SCALE[k], BOUNDS[k][1] / SCALE[k]) for k in BODY], config.max_iters,
      output)
  _, half = sysid.calculate_intervals(r, result.jac)
  values = to_values(x)
  return BodyFit(values, {k: float(h) * SCALE[k] for k, h in zip(BODY, half)}, nominal,
                 _errors(replay, with_body(robot, fl, nominal), controls),
                 _errors(replay, with_body(robot, fl, values), controls), len(win.initial_state))
