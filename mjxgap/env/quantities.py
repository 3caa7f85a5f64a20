"""`StepQuantities`: everything reward and observation terms may read, computed once per control
step by the env (SI units, base frame), and `Measure`, which computes them from MJX data."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap import contract


class StepQuantities(NamedTuple):
  """Everything reward terms may read, computed once per control step (SI units, base frame)."""

  base_lin_vel: jax.Array  # m/s [3], base frame
  base_ang_vel: jax.Array  # rad/s [3], base frame
  projected_gravity: jax.Array  # [3], unit gravity direction in the base frame
  base_height: jax.Array  # m, base origin above the floor
  joint_pos: jax.Array  # rad [nu], relative to the default pose
  joint_vel: jax.Array  # rad/s [nu]
  torque: jax.Array  # N m [nu], actuator force at the last physics substep
  action: jax.Array  # [nu]
  last_action: jax.Array  # [nu]
  command: jax.Array  # [3]: forward m/s, lateral m/s, yaw rad/s
  feet_contact: jax.Array  # bool [nfeet]
  feet_first_contact: jax.Array  # bool [nfeet]: touched down at this step
  feet_air_time: jax.Array  # s [nfeet]: time in the air before this touchdown
  fell: jax.Array  # bool
  default_base_height: jax.Array  # m
  tracking_sigma: jax.Array  # (m/s)^2 or (rad/s)^2, width of the tracking kernels
  physics: jax.Array  # randomized physics draws, each mapped to [-1, 1] over its range


class Measure:
  """Reads `StepQuantities` off one robot's MJX data for one task: indices, floor, thresholds.

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
    self._physics, self._physics_size = physics, physics_size

  def feet_contact(self, data) -> jax.Array:
    """bool [nfeet]: any contact of that foot's geoms within `contact_threshold_m`."""
    c = data._impl.contact
    foot = jnp.maximum(self._geom_to_foot[c.geom[:, 0]], self._geom_to_foot[c.geom[:, 1]])
    touching = c.dist < self.config.contact_threshold_m
    return jnp.stack([jnp.any(touching & (foot == k)) for k in range(self.n_feet)])

  def __call__(self, data, action, info, contact, first_contact, air_time) -> StepQuantities:
    """The quantities of `data` after `action`; `info` gives the last action, the command and
    the episode; `air_time` counts only at a touchdown (`first_contact`)."""
    cfg = self.config
    quat = data.qpos[3:7]
    gravity = contract.rotate_inverse(quat, jnp.array([0.0, 0.0, -1.0]), jnp)
    height = data.qpos[2] - self.floor_z
    fell = contract.fallen(height, gravity[2], cfg.fall_height_fraction * self.default_height,
                           cfg.max_tilt_rad, jnp)
    episode = info["episode"]
    return StepQuantities(
        base_lin_vel=contract.rotate_inverse(quat, data.qvel[0:3], jnp),
        base_ang_vel=data.qvel[3:6],
        projected_gravity=gravity,
        base_height=height,
        joint_pos=data.qpos[self.qpos_adr] - self.default_joint_pos,
        joint_vel=data.qvel[self.qvel_adr],
        torque=data.actuator_force,
        action=action,
        last_action=info["last_action"],
        command=info["command"],
        feet_contact=contact,
        feet_first_contact=first_contact,
        feet_air_time=air_time * first_contact,
        fell=fell,
        default_base_height=jnp.asarray(self.default_height),
        tracking_sigma=jnp.asarray(cfg.tracking_sigma),
        physics=(self._physics(episode) if episode is not None
                 else jnp.zeros(self._physics_size)),
    )
