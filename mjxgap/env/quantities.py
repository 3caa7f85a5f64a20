"""`StepQuantities`: everything reward and observation terms may read, computed once per control
step by the env (SI units, base frame), and `Measure`, which computes them from MJX data."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjxgap import contract
from mjxgap.sim.kinematics import BodyPositions


class StepQuantities(NamedTuple):
  """Everything reward terms may read, computed once per control step (SI units, base frame)."""

  base_lin_vel: jax.Array  # m/s [3], base frame
  base_ang_vel: jax.Array  # rad/s [3], base frame
  projected_gravity: jax.Array  # [3], unit gravity direction in the base frame
  base_height: jax.Array  # m, base origin above the floor
  joint_pos: jax.Array  # rad [nu], relative to the default pose
  joint_angle_rad: jax.Array  # rad [nu], as the joints read (not relative)
  joint_vel: jax.Array  # rad/s [nu]
  torque: jax.Array  # N m [nu], actuator force at the last physics substep
  action: jax.Array  # [nu]
  last_action: jax.Array  # [nu]
  command: jax.Array  # [3]: forward m/s, lateral m/s, yaw rad/s
  feet_contact: jax.Array  # bool [nfeet]
  feet_first_contact: jax.Array  # bool [nfeet]: touched down at this step
  feet_air_time: jax.Array  # s [nfeet]: time in the air before this touchdown
  feet_height: jax.Array  # m [nfeet]: foot body above its height standing in the default pose
  feet_speed_xy: jax.Array  # m/s [nfeet]: horizontal speed of each foot over the control step
  feet_phase: jax.Array  # rad [nfeet]: each foot's gait-clock phase (swing in [0, pi))
  # m: the first two feet's sideways distance in the base frame, positive as in the default pose
  # (negative: the legs crossed); 0 for fewer feet
  feet_separation_m: jax.Array
  # m [nfeet, 2]: each foot body's horizontal position relative to the base origin, in the
  # base's heading frame (x forward, y left, rotated by the base's yaw only)
  feet_offset_m: jax.Array
  feet_nominal_offset_m: jax.Array  # m [nfeet, 2]: `feet_offset_m` in the default pose
  gait_period_s: jax.Array  # s: one cycle of the gait clock (0: no clock)
  fell: jax.Array  # bool
  default_base_height: jax.Array  # m
  physics: jax.Array  # randomized physics draws, each mapped to [-1, 1] over its range


class Measure:
  """Reads `StepQuantities` off one robot's MJX data for one task: indices, floor, thresholds;
  `feet_positions(model, qpos)` gives the feet bodies' world positions it reads them with.

  `physics` maps an episode (or None, for shapes only) to the critic's physics block."""

  def __init__(self, robot, config, physics: Callable, physics_size: int):
    m = robot.mj_model
    self.config = config
    self.floor_z = float(m.geom_pos[robot.floor_geom_ids[0], 2])
    self.default_height = robot.default_base_height - self.floor_z  # m above the floor
    self.default_joint_pos = jnp.asarray(robot.default_joint_pos, jnp.float32)
    self.qpos_adr, self.qvel_adr = jnp.asarray(robot.qpos_adr), jnp.asarray(robot.qvel_adr)
    geom_to_foot = np.full(m.ngeom, -1)
    for g in robot.feet_geom_ids:
      geom_to_foot[g] = robot.feet_body_ids.index(int(m.geom_bodyid[g]))
    self._geom_to_foot = jnp.asarray(geom_to_foot)
    self.n_feet = len(robot.feet_body_ids)
    self.feet_positions = BodyPositions(m, robot.feet_body_ids)
    d = mujoco.MjData(m)
    d.qpos[:] = robot.default_qpos
    mujoco.mj_kinematics(m, d)
    feet = d.xpos[list(robot.feet_body_ids)]
    self._feet_default_z = jnp.asarray(feet[:, 2], jnp.float32)
    apart = (self._feet_sideways(d.qpos[3:7], feet, np) if self.n_feet >= 2 else 0.0)
    self._feet_side = 1.0 if apart >= 0 else -1.0
    self.feet_separation_m = abs(float(apart))  # m, sideways in the default pose
    self.feet_nominal_offset = jnp.asarray(self.feet_offset(d.qpos, feet, np), jnp.float32)
    self._physics, self._physics_size = physics, physics_size

  def feet_contact(self, data) -> jax.Array:
    """bool [nfeet]: any contact of that foot's geoms within `contact_threshold_m`."""
    c = data._impl.contact
    foot = jnp.maximum(self._geom_to_foot[c.geom[:, 0]], self._geom_to_foot[c.geom[:, 1]])
    touching = c.dist < self.config.contact_threshold_m
    return jnp.stack([jnp.any(touching & (foot == k)) for k in range(self.n_feet)])

  def _feet_sideways(self, quat, feet_pos, xp):
    """m: the first foot's position minus the second's along the base's y axis."""
    return contract.rotate_inverse(quat, feet_pos[0] - feet_pos[1], xp)[1]

  def feet_offset(self, qpos, feet_pos, xp):
    """m [nfeet, 2]: the feet bodies' horizontal positions relative to the base origin, in the
    base's heading frame: a torso pitched forward does not move them, a turn does."""
    yaw = contract.heading(qpos[3:7], xp)
    dx, dy = (feet_pos[:, i] - qpos[i] for i in range(2))
    c, s = xp.cos(yaw), xp.sin(yaw)
    return xp.stack([c * dx + s * dy, c * dy - s * dx], axis=-1)

  def _gait_period(self, command) -> jax.Array:
    """s: one cycle of the gait clock at `command`'s rate (0: no clock)."""
    cfg = self.config
    if not cfg.gait_frequency_hz > 0:
      return jnp.zeros(())
    return 1.0 / contract.gait_frequency(command, cfg.gait_frequency_hz,
                                         cfg.gait_frequency_hz_per_command, jnp)

  def gait_cycles(self, info) -> jax.Array:
    """The gait clock's cycles (first foot) at `info`'s step: integrated in the env state when
    the rate follows the command, else the fixed rate times the episode's time."""
    cfg = self.config
    if "gait_cycles" in info:
      return info["gait_cycles"]
    return contract.gait_cycles_at(info["step"], cfg.ctrl_dt, cfg.gait_frequency_hz)

  def advance_gait(self, cycles, command) -> jax.Array:
    """The cycles one control step after `cycles`, the step taken under `command`."""
    cfg = self.config
    return contract.advance_gait(cycles, command, cfg.ctrl_dt, cfg.gait_frequency_hz,
                                 cfg.gait_frequency_hz_per_command, jnp)

  def gait_phase(self, cycles) -> jax.Array:
    """rad [nfeet]: each foot's phase after the first foot's `cycles`, the feet evenly apart."""
    first = contract.gait_phase(cycles, jnp)
    return jnp.mod(first + 2 * jnp.pi * jnp.arange(self.n_feet) / self.n_feet, 2 * jnp.pi)

  def __call__(self, data, feet_pos, action, info, contact, first_contact, air_time,
               feet_xy_before=None) -> StepQuantities:
    """The quantities of `data` after `action`, its feet bodies at `feet_pos` [nfeet, 3] (m,
    world); `info` gives the last action, the command, the step and the episode; `air_time`
    counts only at a touchdown (`first_contact`); `feet_xy_before` is the feet's horizontal
    positions a control step earlier (None: feet at rest)."""
    cfg = self.config
    quat = data.qpos[3:7]
    gravity = contract.rotate_inverse(quat, jnp.array([0.0, 0.0, -1.0]), jnp)
    height = data.qpos[2] - self.floor_z
    fell = contract.fallen(height, gravity[2], cfg.fall_height_fraction * self.default_height,
                           cfg.max_tilt_rad, jnp)
    episode = info["episode"]
    feet_xy = feet_pos[:, :2]
    feet_speed = (jnp.zeros(self.n_feet) if feet_xy_before is None else
                  jnp.linalg.norm(feet_xy - feet_xy_before, axis=-1) / cfg.ctrl_dt)
    joint_pos = data.qpos[self.qpos_adr]
    return StepQuantities(
        base_lin_vel=contract.rotate_inverse(quat, data.qvel[0:3], jnp),
        base_ang_vel=data.qvel[3:6],
        projected_gravity=gravity,
        base_height=height,
        joint_pos=joint_pos - self.default_joint_pos,
        joint_angle_rad=joint_pos,
        joint_vel=data.qvel[self.qvel_adr],
        torque=data.actuator_force,
        action=action,
        last_action=info["last_action"],
        command=info["command"],
        feet_contact=contact,
        feet_first_contact=first_contact,
        feet_air_time=air_time * first_contact,
        feet_height=feet_pos[:, 2] - self._feet_default_z,
        feet_speed_xy=feet_speed,
        feet_phase=self.gait_phase(self.gait_cycles(info)),
        feet_separation_m=(self._feet_side * self._feet_sideways(quat, feet_pos, jnp)
                           if self.n_feet >= 2 else jnp.zeros(())),
        feet_offset_m=self.feet_offset(data.qpos, feet_pos, jnp),
        feet_nominal_offset_m=self.feet_nominal_offset,
        gait_period_s=self._gait_period(info["command"]),
        fell=fell,
        default_base_height=jnp.asarray(self.default_height),
        physics=(self._physics(episode) if episode is not None
                 else jnp.zeros(self._physics_size)),
    )
