"""Synthetic motor logs: a robot on a test stand, driven by a non-ideal reference motor.

The robot hangs with its base held fixed and contacts off (native MuJoCo, 1 kHz). Each actuated
joint's drive runs its PD on the target it received `delay_ms` ago and on a motor-side encoder
(quantised, noisy, with gear backlash between motor and joint), its torque is clipped by a DC
motor's torque-speed line and torque limit, and Coulomb and viscous gear friction take their
share before the joint. Targets arrive at the policy rate (zero-order hold), alternating chirps,
steps and walking-like rhythms. The logged `tau` is the torque at the joint; `q` and `qd` are
the joint encoder's readings.
"""

from __future__ import annotations

import copy
import dataclasses

import mujoco
import numpy as np

from mjxgap.robot import Robot
from mjxgap.sim.actuators.models import torque_speed_limits


@dataclasses.dataclass(frozen=True)
class ReferenceMotor:
  delay_ms: float = 3.0  # transport delay of the position target
  saturation_factor: float = 1.0  # stall torque, x the joint's torque limit
  no_load_speed_rad_s: float = 10.0
  coulomb_fraction: float = 0.05  # Coulomb friction, x the torque limit (N m)
  viscous_nms: float = 0.5  # viscous gear friction, N m s/rad
  backlash_rad: float = 0.004
  encoder_bits: int = 14  # per revolution
  position_noise_rad: float = 2e-4
  velocity_noise_rad_s: float = 0.01
  coulomb_smoothing_rad_s: float = 0.1  # friction = coulomb tanh(qd / this): no stiction jump


class MotorDrive:
  """The reference motor of every joint, one physics step at a time: PD on the delayed target
  and the motor-side encoder (gear backlash, quantised, noisy), clipped by the torque-speed
  line and the torque limit, less Coulomb and viscous gear friction. Returns the torque at the
  joint. `kp`, `kd` and `limit` are per joint (N m/rad, N m s/rad, N m)."""

  def __init__(self, motor: ReferenceMotor, kp, kd, limit, q0, rng: np.random.Generator):
    self.motor, self.kp, self.kd, self.limit, self.rng = motor, kp, kd, limit, rng
    self.saturation = motor.saturation_factor * limit
    self.coulomb = motor.coulomb_fraction * limit
    self.resolution = 2 * np.pi / 2 ** motor.encoder_bits
    self.motor_side = np.array(q0, np.float64)

  def encoder(self, x: np.ndarray) -> np.ndarray:
    """A reading of the quantised, noisy encoder at position `x`."""
    noisy = x + self.rng.normal(0, self.motor.position_noise_rad, x.shape)
    return np.round(noisy / self.resolution) * self.resolution

  def torque(self, target: np.ndarray, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray,
                                                                                 np.ndarray]:
    """(torque at the joint, the velocity reading the PD used) for this physics step."""
    mo = self.motor
    self.motor_side = np.clip(self.motor_side, q - mo.backlash_rad / 2, q + mo.backlash_rad / 2)
    qd_meas = qd + self.rng.normal(0, mo.velocity_noise_rad_s, qd.shape)
    tau_cmd = self.kp * (target - self.encoder(self.motor_side)) - self.kd * qd_meas
    low, high = torque_speed_limits(qd, self.saturation, mo.no_load_speed_rad_s, self.limit, xp=np)
    friction = self.coulomb * np.tanh(qd / mo.coulomb_smoothing_rad_s) + mo.viscous_nms * qd
    return np.clip(tau_cmd, low, high) - friction, qd_meas


def joint_torque_limits(robot: Robot) -> np.ndarray:
  """Each actuated joint's torque limit, N m; 100 N m where the model sets none."""
  return np.where(np.isfinite(robot.torque_limit), robot.torque_limit, 100.0)


def torque_driven(model: mujoco.MjModel) -> mujoco.MjModel:
  """A copy of `model` whose actuators apply `ctrl` as joint torque, unlimited."""
  m = copy.deepcopy(model)
  m.actuator_gaintype[:] = mujoco.mjtGain.mjGAIN_FIXED
  m.actuator_gainprm[:] = 0.0
  m.actuator_gainprm[:, 0] = 1.0
  m.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_NONE
  m.actuator_biasprm[:] = 0.0
  m.actuator_ctrllimited[:] = 0
  m.actuator_forcelimited[:] = 0
  m.jnt_actfrclimited[:] = 0
  return m


@dataclasses.dataclass(frozen=True)
class SynthConfig:
  seconds: float = 60.0
  log_rate_hz: float = 500.0
  physics_dt_s: float = 0.001
  target_rate_hz: float = 50.0  # targets change at the policy rate
  block_s: float = 4.0  # chirp, steps and walking-like targets alternate in blocks this long
  amplitude_rad: float = 0.3
  seed: int = 0
  motor: ReferenceMotor = ReferenceMotor()


def targets(robot: Robot, config: SynthConfig, rng: np.random.Generator) -> np.ndarray:
  """[samples at the target rate, nu] joint targets in rad, within the joint ranges."""
  n = int(round(config.seconds * config.target_rate_hz))
  t = np.arange(n) / config.target_rate_hz
  nu = robot.nu
  out = np.zeros((n, nu))
  block = int(round(config.block_s * config.target_rate_hz))
  for k, start in enumerate(range(0, n, block)):
    tt = t[start:start + block] - t[start]
    amp = config.amplitude_rad * rng.uniform(0.3, 1.0, nu)
    kind = k % 3
    if kind == 0:  # chirp 0.2 -> 3 Hz
      f0, f1 = 0.2, 3.0
      phase = 2 * np.pi * (f0 * tt + (f1 - f0) / (2 * config.block_s) * tt ** 2)
      seg = amp * np.sin(phase[:, None] + rng.uniform(0, 2 * np.pi, nu))
    elif kind == 1:  # steps held 0.2-0.8 s
      seg = np.zeros((len(tt), nu))
      i = 0
      while i < len(tt):
        hold = int(rng.uniform(0.2, 0.8) * config.target_rate_hz)
        seg[i:i + hold] = rng.uniform(-1, 1, nu) * amp
        i += hold
    else:  # walking-like: a gait rhythm with harmonics, left/right in antiphase
      f = rng.uniform(0.8, 2.0)
      side = np.where(np.arange(nu) < nu // 2, 0.0, np.pi)
      ph = 2 * np.pi * f * tt[:, None] + side + rng.uniform(0, 0.5, nu)
      seg = amp * (0.7 * np.sin(ph) + 0.3 * np.sin(2 * ph + 0.4))
    out[start:start + block] = seg[:n - start]
  q = robot.default_joint_pos + out
  lo, hi = robot.joint_range[:, 0], robot.joint_range[:, 1]
  return np.clip(q, np.where(np.isfinite(lo), lo + 0.05, -np.inf),
                 np.where(np.isfinite(hi), hi - 0.05, np.inf))


def synthesize(robot: Robot, config: SynthConfig = SynthConfig()) -> dict[str, np.ndarray]:
  """Log columns (see `mjxgap.sim.actuators.logs`) of every actuated joint on the test stand."""
  rng = np.random.default_rng(config.seed)
  motor = config.motor
  m = torque_driven(robot.mj_model)
  m.opt.timestep = config.physics_dt_s
  m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
  d = mujoco.MjData(m)
  d.qpos[:] = robot.default_qpos
  base_qpos = robot.default_qpos[:7].copy()
  mujoco.mj_forward(m, d)

  limit = joint_torque_limits(robot)
  qadr, vadr = robot.qpos_adr, robot.qvel_adr
  drive = MotorDrive(motor, robot.kp, robot.kd, limit, d.qpos[qadr], rng)

  target_seq = targets(robot, config, rng)
  steps = int(round(config.seconds / config.physics_dt_s))
  per_target = int(round(1.0 / (config.target_rate_hz * config.physics_dt_s)))
  per_log = int(round(1.0 / (config.log_rate_hz * config.physics_dt_s)))
  delay = int(round(motor.delay_ms / 1000.0 / config.physics_dt_s))
  rows = {c: [] for c in ("time_s", "q_target", "q", "qd", "tau")}

  for i in range(steps):
    sent = target_seq[min(i // per_target, len(target_seq) - 1)]
    received = target_seq[min(max(i - delay, 0) // per_target, len(target_seq) - 1)]
    q, qd = d.qpos[qadr].copy(), d.qvel[vadr].copy()
    tau, qd_meas = drive.torque(received, q, qd)
    if i % per_log == 0:
      rows["time_s"].append(np.full(robot.nu, i * config.physics_dt_s))
      rows["q_target"].append(sent)
      rows["q"].append(drive.encoder(q))
      rows["qd"].append(qd_meas)
      rows["tau"].append(tau)
    d.ctrl[:] = tau
    mujoco.mj_step(m, d)
    d.qpos[:7], d.qvel[:6] = base_qpos, 0.0  # the base stays bolted to the stand
  out = {c: np.concatenate(v) for c, v in rows.items()}
  out["joint"] = np.tile(np.asarray(robot.joint_names, object), len(rows["time_s"]))
  return out
