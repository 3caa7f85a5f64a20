"""`StepQuantities`: everything reward and observation terms may read, computed once per control
step by the env (SI units, base frame)."""

from __future__ import annotations

from typing import NamedTuple

import jax


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
