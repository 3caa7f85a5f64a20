"""Named reward terms: pure functions of one control step's `StepQuantities`.

A task's config maps term names to weights; the env sums `weight * term * ctrl_dt`. Penalty
terms return a non-negative magnitude and get negative weights. To add a term, write a
function here (or in a task file) and register it in `REWARD_TERMS`.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from mjxgap.env.quantities import StepQuantities


RewardTerm = Callable[[StepQuantities], jax.Array]


def alive(q: StepQuantities) -> jax.Array:
  return jnp.ones(())


def termination(q: StepQuantities) -> jax.Array:
  return q.fell.astype(jnp.float32)


def orientation(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.projected_gravity[:2]))


def base_height(q: StepQuantities) -> jax.Array:
  return jnp.square(q.base_height - q.default_base_height)


def lin_vel_z(q: StepQuantities) -> jax.Array:
  return jnp.square(q.base_lin_vel[2])


def lin_vel_xy(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.base_lin_vel[:2]))


def ang_vel_xy(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.base_ang_vel[:2]))


def ang_vel_z(q: StepQuantities) -> jax.Array:
  return jnp.square(q.base_ang_vel[2])


def pose(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.joint_pos))


def joint_vel(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.joint_vel))


def torques(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.torque))


def action_rate(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.action - q.last_action))


def tracking_lin_vel(q: StepQuantities) -> jax.Array:
  err = jnp.sum(jnp.square(q.command[:2] - q.base_lin_vel[:2]))
  return jnp.exp(-err / q.tracking_sigma)


def tracking_ang_vel(q: StepQuantities) -> jax.Array:
  err = jnp.square(q.command[2] - q.base_ang_vel[2])
  return jnp.exp(-err / q.tracking_sigma)


def feet_air_time(q: StepQuantities) -> jax.Array:
  """Rewards steps longer than 0.2 s at touchdown, only while a motion is commanded."""
  moving = jnp.linalg.norm(q.command) > 0.1
  return jnp.sum((q.feet_air_time - 0.2) * q.feet_first_contact) * moving


def stand_still(q: StepQuantities) -> jax.Array:
  """Joint motion while the command is zero."""
  still = jnp.linalg.norm(q.command) <= 0.1
  return jnp.sum(jnp.abs(q.joint_pos)) * still


REWARD_TERMS: dict[str, RewardTerm] = {
    f.__name__: f
    for f in (alive, termination, orientation, base_height, lin_vel_z, lin_vel_xy, ang_vel_xy,
              ang_vel_z, pose, joint_vel, torques, action_rate, tracking_lin_vel,
              tracking_ang_vel, feet_air_time, stand_still)
}
